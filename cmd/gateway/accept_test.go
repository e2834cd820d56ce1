package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/modelgate/gateway/internal/netfault"
	"github.com/modelgate/gateway/proxy"
)

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// TestAcceptErrorKeepsServing: accepts that fail on the admin listener, and
// on the client one, neither stop the gateway: both serve once accepts
// work again, and only a signal ends it.
func TestAcceptErrorKeepsServing(t *testing.T) {
	demo, err := startDemo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw, err := proxy.New(demo.cfg, proxy.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	lns, err := listen("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := netfault.AcceptError(syscall.EMFILE)
	lns[0] = &netfault.Listener{Listener: lns[0], N: 3, Err: emfile}
	lns[1] = &netfault.Listener{Listener: lns[1], N: 3, Err: emfile}
	r := start(gw, nopCloser{}, lns, nil, log)

	client := &http.Client{Timeout: 30 * time.Second} // a hung gateway fails the test
	for _, ln := range lns {
		resp, err := client.Get("http://" + ln.Addr().String() + "/healthz")
		if err != nil {
			t.Fatalf("%s after failed accepts: %v", ln.Addr(), err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s/healthz: %d", ln.Addr(), resp.StatusCode)
		}
	}
	select {
	case err := <-r.served:
		t.Fatalf("a server returned: %v", err)
	default:
	}

	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	if err := r.wait(sigs, serveOptions{grace: 5 * time.Second, log: log}); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
