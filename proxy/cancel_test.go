package proxy

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// A client that goes away mid-stream cancels the upstream call: the gateway
// closes the upstream connection instead of reading the rest of the stream.
func TestClientGoneCancelsUpstream(t *testing.T) {
	e := newEnv(t, nil)
	conn, err := net.Dial("tcp", e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"x"}]}`
	// 20 events 300 ms apart: the whole stream would take 6 s.
	fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nx-sim-events: 20\r\nx-sim-event-delay: 300ms\r\nContent-Length: %d\r\n\r\n%s", keyA, len(body), body)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			break // the stream has begun
		}
	}
	dep := e.gw.state.Load().deps["d1-beta"]
	if dep.InFlight() != 1 || dep.Conns() != 1 {
		t.Fatalf("during the stream: %d in flight, %d upstream connections", dep.InFlight(), dep.Conns())
	}
	conn.Close()
	deadline := time.Now().Add(10 * time.Second) // an outcome awaited, not a speed
	for dep.InFlight() != 0 || dep.Conns() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the client left: %d in flight, %d upstream connections still open",
				dep.InFlight(), dep.Conns())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
