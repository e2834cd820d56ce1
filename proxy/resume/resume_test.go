package resume

import (
	"testing"
	"time"
)

// stepFunc is a step the test writes.
type stepFunc func()

func (f stepFunc) Step() { f() }

// Steps that block (a client whose socket takes no write) do not hold the
// others up for long: with every resumer blocked, the watchdog starts one
// more, which runs the step waiting behind them.
func TestResumersBlockedStepsDoNotStallTheQueue(t *testing.T) {
	r := New(2)
	release := make(chan struct{})
	defer close(release)
	blocked := make(chan struct{}, 2)
	for range 2 {
		r.Add(stepFunc(func() { blocked <- struct{}{}; <-release }))
	}
	<-blocked
	<-blocked
	ran := make(chan struct{})
	r.Add(stepFunc(func() { close(ran) }))
	select {
	case <-ran:
	case <-time.After(30 * time.Second): // an outcome awaited, not a speed
		t.Fatal("the step behind two blocked ones never ran")
	}
	if n := r.Started(); n < 3 {
		t.Fatalf("%d resumers started, want two blocked and one more by the watchdog", n)
	}
}

// Steps run in the order they came, each once, on the resumers started up
// to the soft bound while they keep the queue moving.
func TestResumersRunEveryStepOnce(t *testing.T) {
	r := New(2)
	const n = 1000
	done := make(chan int, n)
	for i := range n {
		r.Add(stepFunc(func() { done <- i }))
	}
	seen := make([]bool, n)
	for range n {
		select {
		case i := <-done:
			if seen[i] {
				t.Fatalf("step %d ran twice", i)
			}
			seen[i] = true
		case <-time.After(30 * time.Second):
			t.Fatal("the steps did not all run")
		}
	}
}
