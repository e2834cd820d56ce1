package sim

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// control is what shapes one answer: the options, overridden by x-sim-* headers.
type control struct {
	latency    time.Duration
	events     int
	eventDelay time.Duration
	firstEvent time.Duration // after the headers, before the first frame
	stamp      bool          // each frame starts with a ": t=<unix ns>" comment line
	imageBytes int
	fault      Fault
}

// readControl fills c from the options, the server fault and the request headers.
func (s *Server) readControl(h *fasthttp.RequestHeader, c *control) error {
	c.latency = s.o.Latency
	c.events = s.o.StreamEvents
	c.eventDelay = s.o.EventDelay
	c.firstEvent = s.o.FirstEvent
	c.stamp = s.o.Stamp
	c.imageBytes = 0
	c.fault = Fault{}
	s.takeFault(&c.fault)
	if v := h.Peek("x-sim-latency"); len(v) > 0 {
		d, err := parseDelay("x-sim-latency", v)
		if err != nil {
			return err
		}
		c.latency = d
	}
	if v := h.Peek("x-sim-event-delay"); len(v) > 0 {
		d, err := parseDelay("x-sim-event-delay", v)
		if err != nil {
			return err
		}
		c.eventDelay = d
	}
	if v := h.Peek("x-sim-first-event"); len(v) > 0 {
		d, err := parseDelay("x-sim-first-event", v)
		if err != nil {
			return err
		}
		c.firstEvent = d
	}
	return s.readCounts(h, c)
}

func (s *Server) readCounts(h *fasthttp.RequestHeader, c *control) error {
	if v := h.Peek("x-sim-events"); len(v) > 0 {
		n, err := parseCount("x-sim-events", v, 1, maxEvents)
		if err != nil {
			return err
		}
		c.events = n
	}
	if v := h.Peek("x-sim-image-bytes"); len(v) > 0 {
		n, err := parseCount("x-sim-image-bytes", v, 0, maxImageBytes)
		if err != nil {
			return err
		}
		c.imageBytes = n
	}
	if v := h.Peek("x-sim-stamp"); len(v) > 0 {
		n, err := parseCount("x-sim-stamp", v, 0, 1)
		if err != nil {
			return err
		}
		c.stamp = n == 1
	}
	if v := h.Peek("x-sim-fault"); len(v) > 0 {
		c.fault = Fault{}
		return ParseFault(v, &c.fault)
	}
	return nil
}

func parseDelay(name string, v []byte) (time.Duration, error) {
	d, err := time.ParseDuration(b2s(v))
	if err != nil || d < 0 || d > maxDelay {
		return 0, fmt.Errorf("%s: invalid duration %q (want 0..%s)", name, v, maxDelay)
	}
	return d, nil
}

func parseCount(name string, v []byte, lo, hi int) (int, error) {
	n, err := strconv.Atoi(b2s(v))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s: invalid count %q (want %d..%d)", name, v, lo, hi)
	}
	return n, nil
}

// ParseFault parses an x-sim-fault value into f: a comma-separated list of
// status=NNN, retry-after=VALUE, reset, cut=N, error=N, first-byte=DURATION
// and drop-idle.
func ParseFault(v []byte, f *Fault) error {
	for len(v) > 0 {
		var item []byte
		item, v, _ = bytes.Cut(v, []byte{','})
		item = bytes.TrimSpace(item)
		if len(item) == 0 {
			continue
		}
		if err := parseFaultItem(item, f); err != nil {
			return err
		}
	}
	return nil
}

func parseFaultItem(item []byte, f *Fault) error {
	key, val, hasVal := bytes.Cut(item, []byte{'='})
	var err error
	switch string(key) {
	case "reset":
		if hasVal {
			return fmt.Errorf("x-sim-fault: reset takes no value")
		}
		f.Reset = true
	case "status":
		f.Status, err = parseCount("x-sim-fault status", val, 400, 599)
	case "cut":
		f.CutAfter, err = parseCount("x-sim-fault cut", val, 1, maxEvents)
	case "error":
		f.ErrorAfter, err = parseCount("x-sim-fault error", val, 1, maxEvents)
	case "retry-after":
		f.RetryAfter = string(val)
	case "drop-idle":
		f.DropIdle = true
	case "first-byte":
		f.FirstByteDelay, err = parseDelay("x-sim-fault first-byte", val)
	default:
		return fmt.Errorf("x-sim-fault: unknown fault %q", key)
	}
	return err
}
