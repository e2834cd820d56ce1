package load

import "time"

// DefaultSampleInterval is the RSS sampling period of a Sampler.
const DefaultSampleInterval = 100 * time.Millisecond

// Usage is what a set of processes consumed over one sampled period; every
// figure is a sum over the processes.
type Usage struct {
	CPU      time.Duration `json:"cpu_ns"`    // user+system time consumed in the period
	RSSStart uint64        `json:"rss_start"` // bytes at the start
	RSSEnd   uint64        `json:"rss_end"`   // bytes at the end
	// RSSPeak is the most RSS seen by periodic sampling, start and end
	// included. VmHWM cannot be reset, so this is the peak of the period.
	RSSPeak uint64 `json:"rss_peak"`
	// HWM is VmHWM at the end: the peak over each process's whole life.
	HWM     uint64        `json:"hwm"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Samples int           `json:"samples"`
}

// CPUPerRequest returns the CPU time per request, in microseconds.
func (u *Usage) CPUPerRequest(requests uint64) float64 {
	if requests == 0 {
		return 0
	}
	return float64(u.CPU.Microseconds()) / float64(requests)
}

// Sampler samples the CPU time and RSS of a set of processes over a period,
// e.g. one round: CPU from the readings at its start and end, peak RSS
// also from periodic readings in between.
//
// Start one with StartSampler; Stop it once. Its methods are not for
// concurrent use.
type Sampler struct {
	pids  []int
	start time.Time
	first ProcStat
	stop  chan struct{}
	done  chan struct{}

	// Written by the sampling goroutine until done is closed.
	peak    uint64
	samples int
	err     error
}

// StartSampler reads pids now and then every interval (DefaultSampleInterval
// if not positive) until Stop. With no pids it measures nothing.
func StartSampler(interval time.Duration, pids ...int) (*Sampler, error) {
	if interval <= 0 {
		interval = DefaultSampleInterval
	}
	first, err := ReadProcs(pids...)
	if err != nil {
		return nil, err
	}
	s := &Sampler{
		pids:    append([]int(nil), pids...),
		start:   time.Now(),
		first:   first,
		peak:    first.RSS,
		samples: 1,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.loop(interval)
	return s, nil
}

func (s *Sampler) loop(interval time.Duration) {
	defer close(s.done)
	if len(s.pids) == 0 {
		<-s.stop
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.observe(ReadProcs(s.pids...))
		}
	}
}

// observe folds one reading in.
func (s *Sampler) observe(st ProcStat, err error) {
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.samples++
	s.peak = max(s.peak, st.RSS)
}

// Stop ends the sampling, takes the last reading and returns the period's usage.
func (s *Sampler) Stop() (Usage, error) {
	close(s.stop)
	<-s.done
	last, err := ReadProcs(s.pids...)
	s.observe(last, err)
	if s.err != nil {
		return Usage{}, s.err
	}
	return Usage{
		CPU:      last.CPU - s.first.CPU,
		RSSStart: s.first.RSS,
		RSSEnd:   last.RSS,
		RSSPeak:  s.peak,
		HWM:      last.HWM,
		Elapsed:  time.Since(s.start),
		Samples:  s.samples,
	}, nil
}
