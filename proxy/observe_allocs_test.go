//go:build !race

package proxy

import (
	"io"
	"net"
	"testing"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream"
	"github.com/valyala/fasthttp"
)

// With the access log off, ending a call allocates nothing once its counters
// exist: a served call, a rejection, a finished stream.
func TestFinishZeroAllocs(t *testing.T) {
	g, c := finishFixture(t, Options{})
	f := func(name string, edit func(c *call)) {
		t.Helper()
		edit(c)
		g.finish(c) // creates the counters
		if n := testing.AllocsPerRun(1000, func() { g.finish(c) }); n != 0 {
			t.Errorf("%s: %v allocations per finish", name, n)
		}
	}
	f("served", func(c *call) {})
	f("rejected", func(c *call) { c.model, c.dep, c.status, c.reason = nil, nil, 401, "auth_invalid" })
	f("stream", func(c *call) {
		c.model, c.status, c.reason = g.state.Load().models["chat-model"], 200, ""
		streamed(t, c, g.state.Load().cfg)
	})
}

// streamed relays a whole SSE answer of a loopback upstream through c.up, as
// a streamed call has done by the time it finishes.
func streamed(t *testing.T, c *call, cfg *config.Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyString("data: {}\n\ndata: [DONE]\n\n")
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	u := config.Upstream{Name: "sse", Family: "beta", BaseURL: "http://" + ln.Addr().String() + "/v1", MaxConns: 1}
	c.dep = upstream.New(u, cfg.Timeouts, cfg.Health, cfg.Limits)
	req := upstream.AcquireRequest()
	defer upstream.ReleaseRequest(req)
	req.Head = upstream.EndHead(c.dep.AppendRequestLine(req.Head, []byte("POST"), "/chat/completions", nil), []byte("POST"), 0)
	if err := c.up.Send(c.dep, req, true, c.start.Unix()); err != nil {
		t.Fatal(err)
	}
	var out fasthttp.Response
	c.up.Begin(&out)
	c.up.Stream(&out, family.Beta, false, nil)
	if _, err := io.Copy(io.Discard, &c.up); err != nil || !c.up.SSE() || c.up.Sent() == 0 {
		t.Fatalf("relayed %d bytes of SSE %v: %v", c.up.Sent(), c.up.SSE(), err)
	}
}

// Counting a pick, a session move included, allocates nothing.
func TestPickCountsWithoutAllocating(t *testing.T) {
	g, _ := finishFixture(t, Options{})
	r := g.state.Load().models["chat-model"].routes[family.Beta]
	key := affinity.Hash([]byte("session-x"))
	first, _ := r.Pick(key, true, 0)
	tried := affinity.Set(0).With(first)
	if n := testing.AllocsPerRun(1000, func() { r.Pick(key, true, tried) }); n != 0 {
		t.Fatalf("%v allocations per pick", n)
	}
	moved := r.Deployments()[1-first].Stats.Moves()
	if moved < 1000 || r.Deployments()[first].Stats.Moves() != 0 {
		t.Fatalf("moves: %d on the second choice, %d on the first", moved, r.Deployments()[first].Stats.Moves())
	}
}
