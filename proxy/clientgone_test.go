package proxy

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/rawio"
)

// readUpstreamRequest reads a request the gateway sent upstream, head and
// body (the gateway frames it by its length), and reports whether it came.
func readUpstreamRequest(br *bufio.Reader) bool {
	length := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "\r\n" {
			break
		}
		if name, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	_, err := io.CopyN(io.Discard, br, int64(length))
	return err == nil
}

// sseChunk frames events as one chunk of a chunked body.
func sseChunk(events string) string {
	return fmt.Sprintf("%x\r\n%s\r\n", len(events), events)
}

const (
	sseHead      = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	alphaStart   = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
	alphaTheRest = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

// goneEnv is a gateway, with its access log, in front of one upstream that
// serve answers, as deployment raw of model raw-model in family fam.
type goneEnv struct {
	gw     *Gateway
	addr   string
	access *syncBuffer
}

func newGoneEnv(t *testing.T, fam string, serve func(c net.Conn, br *bufio.Reader)) *goneEnv {
	t.Helper()
	up := tcpUpstream(t, serve)
	base := "http://" + up
	if fam == "beta" {
		base += "/v1"
	}
	// first_byte and idle are far longer than the test's bounds: only the
	// client's leaving can end the upstream call in time.
	// One failure would exclude the deployment.
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
keys: [{id: k, key: key-1}, {id: limited, key: key-2, limits: {tokens_per_minute: 20}}]
upstreams: [{name: raw, family: %s, base_url: "%s", api_key: up}]
models: [{id: raw-model, upstreams: [raw]}]
timeouts: {connect: 2s, first_byte: 60s, idle: 60s}
health: {failures: 1, cooldown: 1m}
`, fam, base)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	access := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(access, nil))
	gw, _, ln := listenGateway(t, cfg, Options{Logger: log, AccessLog: accesslog.New(access, accesslog.JSON)})
	return &goneEnv{gw: gw, addr: ln.Addr().String(), access: access}
}

// awaitIdle waits until the deployment has no call in flight.
func (e *goneEnv) awaitIdle(t *testing.T) {
	t.Helper()
	dep := e.gw.state.Load().deps["raw"]
	deadline := time.Now().Add(10 * time.Second) // an outcome awaited, not a speed
	for dep.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still in flight", dep.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitLog waits for an access log line that has every one of want.
func (e *goneEnv) awaitLog(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(e.access.String(), "\n") {
			if !strings.Contains(line, `"msg":"request"`) {
				continue
			}
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access log line with %q in:\n%s", want, e.access.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedAfter serves one upstream call: it reads the request, signals got,
// writes answer, and then waits for the gateway to close the connection,
// sending when it did on closed.
func closedAfter(answer string, got chan<- struct{}, closed chan<- time.Time) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		if !readUpstreamRequest(br) {
			return
		}
		got <- struct{}{}
		io.WriteString(c, answer)
		io.Copy(io.Discard, br) // until the gateway closes (or the minute's deadline)
		closed <- time.Now()
	}
}

// awaitClosed returns how long after left the upstream saw its connection
// closed, failing the test past a bound no working watch comes near: the
// upstream's timeouts are a minute.
func awaitClosed(t *testing.T, closed <-chan time.Time, left time.Time) time.Duration {
	t.Helper()
	select {
	case at := <-closed:
		return at.Sub(left)
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream connection is still open 10 s after the client left")
		return 0
	}
}

// A client that leaves before the answer's first byte ends the upstream
// call at once: the upstream sees its connection closed, the call is logged
// as 499 client_gone, and the deployment has nothing in flight. The client
// leaves right after its request (its watch not registered yet), or once
// the call was watched for a while.
func TestClientGoneBeforeFirstByte(t *testing.T) {
	f := func(name string, registered bool) {
		t.Run(name, func(t *testing.T) {
			got, closed := make(chan struct{}, 1), make(chan time.Time, 1)
			e := newGoneEnv(t, "beta", closedAfter("", got, closed)) // never answers
			conn, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			before := rawio.Registrations()
			io.WriteString(conn, rawChat("key-1", "", `{"model":"raw-model","messages":[{"role":"user","content":"x"}]}`))
			<-got
			if registered {
				awaitRegistration(t, before)
			}
			left := time.Now()
			conn.Close()
			d := awaitClosed(t, closed, left)
			t.Logf("the upstream saw its connection closed %v after the client left", d)
			e.awaitIdle(t)
			e.awaitLog(t, `"status":499`, `"reason":"client_gone"`, `"deployment":"raw"`)
			if dep := e.gw.state.Load().deps["raw"]; dep.Excluded(time.Now().UnixNano()) {
				t.Fatal("the client's leaving counted against the deployment")
			}
		})
	}
	f("at once", false)
	f("watched", true)
}

// awaitRegistration waits until a watch was registered after before (see
// rawio.Registrations): the call's client is watched by the epoll set.
func awaitRegistration(t *testing.T, before uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rawio.Registrations() == before {
		if time.Now().After(deadline) {
			t.Fatal("the call's watch was never registered")
		}
		time.Sleep(time.Millisecond)
	}
}

// A client that leaves between two events of a stream ends the upstream
// call at once, and the tokens the stream reported so far are counted and
// charged: its key's budget of 20 tokens a minute is spent by the 26 of
// message_start, and its next call is refused.
func TestClientGoneMidStream(t *testing.T) {
	f := func(name string, registered bool) {
		t.Run(name, func(t *testing.T) {
			got, closed := make(chan struct{}, 1), make(chan time.Time, 1)
			e := newGoneEnv(t, "alpha", closedAfter(sseHead+sseChunk(alphaStart), got, closed))
			conn, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net
			before := rawio.Registrations()
			body := `{"model":"raw-model","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"x"}]}`
			fmt.Fprintf(conn, "POST /v1/router/alpha/v1/messages HTTP/1.1\r\nHost: gw\r\nX-Api-Key: key-2\r\n"+
				"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			r := bufio.NewReader(conn)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(line, "data: ") {
					break // the first event came; the next never does
				}
			}
			if registered {
				awaitRegistration(t, before)
			}
			left := time.Now()
			conn.Close()
			d := awaitClosed(t, closed, left)
			t.Logf("the upstream saw its connection closed %v after the client left", d)
			e.awaitIdle(t)
			e.awaitLog(t, `"status":499`, `"reason":"client_gone"`, `"input_tokens":25`, `"stream":true`)
			status, _, _ := rawDo(t, e.addr, "POST /v1/router/alpha/v1/messages HTTP/1.1\r\nHost: gw\r\nX-Api-Key: key-2\r\n"+
				"Content-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			if status != 429 {
				t.Fatalf("the next call of the key was answered %d: the tokens were not charged", status)
			}
		})
	}
	f("at once", false)
	f("watched", true)
}

// A request the client pipelines behind a stream, sent while the stream
// waits on its upstream, is not its leaving: the stream ends whole, and
// the second request is answered on the same connection.
func TestClientPipelinedNotGone(t *testing.T) {
	var calls int
	e := newGoneEnv(t, "alpha", func(c net.Conn, br *bufio.Reader) {
		for readUpstreamRequest(br) {
			calls++
			io.WriteString(c, sseHead+sseChunk(alphaStart))
			if calls == 1 {
				// Wait until the stream's watch is registered, so the
				// second request reaches a watched socket.
				before := rawio.Registrations()
				for deadline := time.Now().Add(10 * time.Second); rawio.Registrations() == before && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(2 * rawio.WatchAfter) // and the bytes would have been noticed
			}
			io.WriteString(c, sseChunk(alphaTheRest)+"0\r\n\r\n")
		}
	})
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net
	body := `{"model":"raw-model","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"x"}]}`
	req := fmt.Sprintf("POST /v1/router/alpha/v1/messages HTTP/1.1\r\nHost: gw\r\nX-Api-Key: key-1\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	io.WriteString(conn, req)
	r := bufio.NewReader(conn)
	var resp fasthttp.Response
	resp.StreamBody = true
	if err := resp.Read(r); err != nil {
		t.Fatal(err)
	}
	// The head came: the stream waits on its upstream. Pipeline the next.
	io.WriteString(conn, req)
	first, err := io.ReadAll(resp.BodyStream())
	if err != nil || resp.StatusCode() != 200 || !strings.Contains(string(first), "message_stop") {
		t.Fatalf("first answer %d, %v: %q", resp.StatusCode(), err, first)
	}
	resp.CloseBodyStream()
	var second fasthttp.Response
	if err := second.Read(r); err != nil || second.StatusCode() != 200 || !strings.Contains(string(second.Body()), "message_stop") {
		t.Fatalf("second answer %d, %v: %q", second.StatusCode(), err, second.Body())
	}
	e.awaitIdle(t)
	if strings.Contains(e.access.String(), "client_gone") {
		t.Fatalf("a pipelined request was taken for the client's leaving:\n%s", e.access.String())
	}
}

// rawDo sends req on a new connection and reads its answer's head.
func rawDo(t *testing.T, addr, req string) (int, *fasthttp.Response, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net
	io.WriteString(c, req)
	var resp fasthttp.Response
	resp.SkipBody = true
	err = resp.Read(bufio.NewReader(c))
	return resp.StatusCode(), &resp, err
}
