package proxy

import (
	"cmp"
	"io"
	"slices"
	"sync"

	"github.com/modelgate/gateway/proxy/latency"
	"github.com/modelgate/gateway/proxy/promtext"
)

// histograms holds the gateway's latency histograms by metric name and
// labels, so that a deployment a reload replaces finds its histogram again,
// as metrics.Set's GetOrCreate does for counters. The zero value is ready;
// safe for concurrent use. It is looked up once per deployment or store
// operation, never per request.
type histograms struct {
	mu    sync.Mutex
	byKey map[histKey]*latency.Histogram
}

// histKey names one histogram: the metric name and its labels without braces.
type histKey struct{ name, labels string }

// get returns the histogram of name{labels}, made on first use.
func (hs *histograms) get(name, labels string) *latency.Histogram {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	k := histKey{name, labels}
	if h := hs.byKey[k]; h != nil {
		return h
	}
	if hs.byKey == nil {
		hs.byKey = make(map[histKey]*latency.Histogram)
	}
	h := new(latency.Histogram)
	hs.byKey[k] = h
	return h
}

// write writes every histogram in the Prometheus text format, sorted by name
// and labels, so each metric's lines are together.
func (hs *histograms) write(w io.Writer) {
	hs.mu.Lock()
	keys := make([]histKey, 0, len(hs.byKey))
	for k := range hs.byKey {
		keys = append(keys, k)
	}
	hists := make([]*latency.Histogram, len(keys))
	slices.SortFunc(keys, func(a, b histKey) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.labels, b.labels))
	})
	for i, k := range keys {
		hists[i] = hs.byKey[k]
	}
	hs.mu.Unlock()
	b := make([]byte, 0, 2048*len(keys))
	for i, k := range keys {
		if i == 0 || keys[i-1].name != k.name {
			b = appendHistogramMetadata(b, k.name)
		}
		b = hists[i].AppendPrometheus(b, k.name, k.labels)
	}
	w.Write(b)
}

// histogramHelp is the # HELP text of each latency histogram.
var histogramHelp = map[string]string{
	"gateway_upstream_duration_seconds":        "Time from sending an upstream request to the end of its answer, per deployment.",
	"gateway_upstream_first_byte_seconds":      "Time from sending an upstream request to the first byte of its answer, per deployment.",
	"gateway_store_operation_duration_seconds": "Time one store operation took, per operation.",
}

// appendHistogramMetadata appends the # HELP and # TYPE lines of the
// histogram name, as the rest of /metrics carries them.
func appendHistogramMetadata(b []byte, name string) []byte {
	help := histogramHelp[name]
	if help == "" {
		help = "Latency histogram."
	}
	return promtext.AppendMetadata(b, name, "histogram", help)
}
