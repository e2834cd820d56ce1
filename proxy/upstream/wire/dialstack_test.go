package wire

import (
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// A dial does not grow its caller's stack: the goroutines that dialed, each
// parked afterwards as an idle fasthttp worker is, hold their first stack
// of a few KiB, not the 8 KiB Go's TCP dial needs (16 KiB under a call's
// way from the worker).
func TestDialLeavesTheCallersStack(t *testing.T) {
	ln := wiretest.AcceptEach(t, func(c net.Conn) { c.Close() })
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection shrinks a stack meanwhile
	d := &dialer{connect: 10 * time.Second}
	const n = 64
	park := make(chan struct{})
	var wg sync.WaitGroup
	before := stackInuse()
	for range n {
		dialed := make(chan error)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.dial(ln.Addr().String())
			if err == nil {
				c.Close()
			}
			dialed <- err
			<-park
		}()
		if err := <-dialed; err != nil {
			t.Fatal(err)
		}
	}
	per := (stackInuse() - before) / n
	close(park)
	wg.Wait()
	if per >= 6<<10 {
		t.Fatalf("each goroutine that dialed holds %d bytes of stack", per)
	}
}

func stackInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.StackInuse
}
