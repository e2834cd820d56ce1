package load

import (
	"sync/atomic"
	"time"
)

// Group is what the calls answered with one value of Spec.GroupBy's header
// (the deployment that answered, say) measured, from Options.ShiftAt on.
type Group struct {
	OK       uint64     `json:"ok"`
	TTFB     Summary    `json:"ttfb"`
	TTFBHist *Histogram `json:"ttfb_hist"`
}

// groups counts a worker's successful calls by the value of one answer
// header. The values seen are few (deployments), so a map suffices.
type groups struct {
	by map[string]*Group
	// from is the earliest send time, in Unix ns, of a call that counts;
	// 0 until the run's shift has happened.
	from *atomic.Int64
}

// record counts a call sent at start whose answer carried value v, taking
// first as its first byte.
func (g *groups) record(v []byte, start, first time.Time) {
	from := g.from.Load()
	if from == 0 || start.UnixNano() < from {
		return
	}
	grp := g.by[string(v)]
	if grp == nil {
		grp = &Group{TTFBHist: NewHistogram()}
		g.by[string(v)] = grp
	}
	grp.OK++
	grp.TTFBHist.Record(first.Sub(start))
}

// mergeGroups adds src to dst and returns it.
func mergeGroups(dst, src map[string]*Group) map[string]*Group {
	for k, s := range src {
		if dst == nil {
			dst = make(map[string]*Group)
		}
		d := dst[k]
		if d == nil {
			d = &Group{TTFBHist: NewHistogram()}
			dst[k] = d
		}
		d.OK += s.OK
		d.TTFBHist.Merge(s.TTFBHist)
		d.TTFB = d.TTFBHist.Summary()
	}
	return dst
}

// shiftAt runs opts.Shift at start+opts.ShiftAt, unless ctx ends first, and
// then lets the groups count; without a Shift they count from start.
func shiftAt(opts *Options, start time.Time, from *atomic.Int64, done <-chan struct{}) {
	if opts.Shift == nil {
		from.Store(start.UnixNano())
		return
	}
	t := time.NewTimer(time.Until(start.Add(opts.ShiftAt)))
	defer t.Stop()
	select {
	case <-t.C:
		opts.Shift()
		from.Store(time.Now().UnixNano())
	case <-done:
	}
}
