package load

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The range and precision of every latency histogram: 1 µs .. 60 s, 3 digits.
const (
	histLowest  = 1
	histHighest = 60_000_000
	histDigits  = 3
)

// Histogram records latencies in microseconds from 1 µs to 60 s with three
// significant digits (HDR histogram); longer latencies are recorded as 60 s.
// In JSON it is the base64 of the HDR V2 compressed encoding, so runs can be
// compared percentile by percentile later.
//
// Use NewHistogram; a Histogram is not safe for concurrent use.
type Histogram struct {
	h *hdrhistogram.Histogram
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(histLowest, histHighest, histDigits)}
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	us := d.Microseconds()
	us = max(us, 0)
	us = min(us, histHighest)
	if err := h.h.RecordValue(us); err != nil {
		panic("BUG: clamped value out of histogram range: " + err.Error())
	}
}

// Merge adds all values of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o != nil {
		h.h.Merge(o.h)
	}
}

// Count returns the number of recorded values.
func (h *Histogram) Count() int64 { return h.h.TotalCount() }

// Percentile returns the latency at percentile p (0 < p <= 100), e.g. 99.9.
func (h *Histogram) Percentile(p float64) time.Duration {
	return time.Duration(h.h.ValueAtPercentile(p)) * time.Microsecond
}

// Summary returns the usual percentiles of h.
func (h *Histogram) Summary() Summary {
	if h.Count() == 0 {
		return Summary{}
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return Summary{
		Count: h.Count(),
		Min:   us(h.h.Min()),
		Mean:  time.Duration(h.h.Mean() * float64(time.Microsecond)),
		P50:   h.Percentile(50),
		P90:   h.Percentile(90),
		P99:   h.Percentile(99),
		P999:  h.Percentile(99.9),
		P9999: h.Percentile(99.99),
		Max:   us(h.h.Max()),
	}
}

// MarshalJSON encodes h as a base64 string of its HDR V2 compressed form.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	b, err := h.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("cannot encode histogram: %w", err)
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (h *Histogram) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("cannot decode histogram: %w", err)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("cannot decode histogram: %w", err)
	}
	dec, err := hdrhistogram.Decode(b)
	if err != nil {
		return fmt.Errorf("cannot decode histogram: %w", err)
	}
	// Re-home the counts in the standard geometry so Merge never drops values.
	h.h = hdrhistogram.New(histLowest, histHighest, histDigits)
	h.h.Merge(dec)
	return nil
}

// Summary holds the usual percentiles of a latency distribution; in JSON
// every duration is in nanoseconds.
type Summary struct {
	Count int64         `json:"count"`
	Min   time.Duration `json:"min_ns"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	P9999 time.Duration `json:"p9999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Error kinds, the keys of Result.Errors.
const (
	ErrKindStatus   = "status"    // a status other than Check.Status
	ErrKindTimeout  = "timeout"   // the request or its body ran past Options.Timeout
	ErrKindRefused  = "refused"   // the connection was refused
	ErrKindClosed   = "closed"    // the connection was closed or reset
	ErrKindBody     = "body"      // reading a streamed body failed otherwise
	ErrKindTooLarge = "too_large" // the body passed Check.MaxBody
	ErrKindCheck    = "check"     // the SSE event count differed from Check.Events
	ErrKindOther    = "other"
)

// Result is what one run measured. Latencies count successful requests only;
// failed ones are counted in Errors by kind.
type Result struct {
	Mode        string  `json:"mode"` // "closed" or "open"
	URL         string  `json:"url"`
	Connections int     `json:"connections"`    // closed: connections; open: the concurrency cap
	Rate        float64 `json:"rate,omitempty"` // open loop: the intended req/s

	Requests uint64            `json:"requests"` // completed: OK plus errors
	OK       uint64            `json:"ok"`
	Errors   map[string]uint64 `json:"errors,omitempty"`
	Statuses map[int]uint64    `json:"statuses,omitempty"`
	// Late counts open-loop requests a worker claimed more than
	// LateThreshold after their intended time: all workers were busy, so the
	// concurrency cap was reached (or the generator fell behind).
	Late uint64 `json:"late,omitempty"`

	Elapsed time.Duration `json:"elapsed_ns"`
	RPS     float64       `json:"rps"` // OK responses per second of Elapsed
	Bytes   uint64        `json:"bytes"`
	Events  uint64        `json:"events,omitempty"` // SSE events in OK responses

	// Latency runs from the send (closed loop) or, in an open loop, from
	// the intended send of a request the busy workers could not send on
	// time, to the end of the body; TTFB to the first body bytes.
	Latency     Summary    `json:"latency"`
	TTFB        Summary    `json:"ttfb"`
	LatencyHist *Histogram `json:"latency_hist"`
	TTFBHist    *Histogram `json:"ttfb_hist"`
	// Groups are the successful calls by the value of Spec.GroupBy's
	// header, from Options.ShiftAt on; nil without GroupBy.
	Groups map[string]*Group `json:"groups,omitempty"`
}

// ErrorCount returns the number of failed requests.
func (r *Result) ErrorCount() uint64 { return r.Requests - r.OK }

// Merge returns the sum of several runs of the same kind, e.g. the rounds of
// one target: counts and histograms add up, Elapsed is the total time, so RPS
// is the mean over the rounds.
func Merge(rs ...Result) Result {
	var m Result
	m.LatencyHist, m.TTFBHist = NewHistogram(), NewHistogram()
	for i := range rs {
		r := &rs[i]
		if m.Mode == "" {
			m.Mode, m.URL, m.Connections, m.Rate = r.Mode, r.URL, r.Connections, r.Rate
		}
		m.Requests += r.Requests
		m.OK += r.OK
		m.Late += r.Late
		m.Elapsed += r.Elapsed
		m.Bytes += r.Bytes
		m.Events += r.Events
		m.Errors = addCounts(m.Errors, r.Errors)
		m.Statuses = addCounts(m.Statuses, r.Statuses)
		m.LatencyHist.Merge(r.LatencyHist)
		m.TTFBHist.Merge(r.TTFBHist)
		m.Groups = mergeGroups(m.Groups, r.Groups)
	}
	m.finish()
	return m
}

func addCounts[K comparable](dst, src map[K]uint64) map[K]uint64 {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		return maps.Clone(src)
	}
	for k, v := range src {
		dst[k] += v
	}
	return dst
}

// finish derives RPS and the summaries from the counts and histograms.
func (r *Result) finish() {
	if r.Elapsed > 0 {
		r.RPS = float64(r.OK) / r.Elapsed.Seconds()
	}
	r.Latency = r.LatencyHist.Summary()
	r.TTFB = r.TTFBHist.Summary()
}
