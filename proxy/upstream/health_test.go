package upstream

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/upstream/wire"
)

func newHealthDeployment(t *testing.T, log *bytes.Buffer) *Deployment {
	t.Helper()
	d := New(config.Upstream{Name: "beta-east", Family: "beta", BaseURL: "http://127.0.0.1:1/v1", APIKey: "sk-secret", MaxConns: 1},
		config.Timeouts{}, config.Health{Failures: 2, Cooldown: config.Duration(time.Hour)}, config.Limits{})
	d.SetLogger(slog.New(slog.NewTextHandler(log, nil)))
	return d
}

// TestHealthLogThrottled: exclusions repeated within logEvery give one line,
// and the next one says how many were not logged.
func TestHealthLogThrottled(t *testing.T) {
	var log bytes.Buffer
	d := newHealthDeployment(t, &log)
	d.logEvery = time.Hour
	cause := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, Err: errors.New("connect: connection refused")}
	for range 6 {
		d.Failed(cause)
	}
	if n := strings.Count(log.String(), "deployment excluded"); n != 1 {
		t.Fatalf("%d exclusion lines:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), `deployment=beta-east family=beta failures=2 cooldown=1h0m0s cause="dial tcp`) || strings.Contains(log.String(), "sk-secret") {
		t.Fatalf("line:\n%s", log.String())
	}
	d.logEvery = 0 // the next line passes and counts the two held back
	d.Failed(cause)
	d.Failed(cause)
	if !strings.Contains(log.String(), "unlogged_before=2") {
		t.Fatalf("lines:\n%s", log.String())
	}
}

// TestHealthLogRecovery: a deployment that answers after its cooldown is
// logged as back, once.
func TestHealthLogRecovery(t *testing.T) {
	var log bytes.Buffer
	d := newHealthDeployment(t, &log)
	d.Failed(StatusError(503))
	d.Failed(StatusError(503))
	d.Succeeded() // still in its cooldown: not back
	if strings.Contains(log.String(), "back in service") || !strings.Contains(log.String(), `cause="upstream answered 503"`) {
		t.Fatalf("lines:\n%s", log.String())
	}
	d.downUntil.Store(time.Now().Add(-time.Second).UnixNano()) // the cooldown is over
	d.Succeeded()
	d.Succeeded()
	if n := strings.Count(log.String(), "deployment back in service"); n != 1 {
		t.Fatalf("%d recovery lines:\n%s", n, log.String())
	}
}

// TestOutOfDescriptorsIsNotAFailure: a dial that fails because the gateway
// is at its file limit does not count against the deployment's health;
// a refused connection does.
func TestOutOfDescriptorsIsNotAFailure(t *testing.T) {
	var log bytes.Buffer
	d := newHealthDeployment(t, &log)
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE} {
		cause := dialError(t, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", errno)})
		for range 4 {
			if d.Failed(cause) {
				t.Fatalf("%v excluded the deployment", errno)
			}
		}
		if d.Excluded(time.Now().UnixNano()) {
			t.Fatalf("%v: deployment excluded", errno)
		}
	}
	refused := dialError(t, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	d.Failed(refused)
	if !d.Failed(refused) {
		t.Fatal("two refused dials did not exclude the deployment")
	}
}

// dialError is the error of a call whose dial failed with cause, as a
// deployment's client returns it.
func dialError(t *testing.T, cause error) error {
	t.Helper()
	client := wire.NewClient("upstream", wire.Options{Dial: func(string) (net.Conn, error) { return nil, cause }})
	req := get("/")
	defer ReleaseRequest(req)
	var resp fasthttp.Response
	err := req.Do(client, &resp, nil, false)
	if !IsDialError(err) || !errors.Is(err, cause) {
		t.Fatalf("a failed dial: %v, want a dial error of %v", err, cause)
	}
	return err
}
