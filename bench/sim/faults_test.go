package sim

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/valyala/fasthttp"
)

// A limited fault applies to the next Times requests only; a status fault
// carries its retry-after.
func TestFaultTimesAndRetryAfter(t *testing.T) {
	s := startSim(t, Options{})
	s.SetFault(Fault{Status: 429, RetryAfter: "7", Times: 2})
	bc := betaClient(s, testBetaKey)
	for i := range 2 {
		_, err := bc.Chat.Completions.New(context.Background(), chatParams())
		apiErr := betaAPIError(t, err, 429, "Simulated failure (x-sim-fault).")
		if got := apiErr.Response.Header.Get("Retry-After"); got != "7" {
			t.Fatalf("call %d: retry-after %q", i, got)
		}
	}
	if _, err := bc.Chat.Completions.New(context.Background(), chatParams()); err != nil {
		t.Fatalf("the third call: %v", err)
	}
	_, err := bc.Chat.Completions.New(context.Background(), chatParams(),
		option.WithHeader("x-sim-fault", "status=503,retry-after=30"))
	if apiErr := betaAPIError(t, err, 503, "Simulated failure (x-sim-fault)."); apiErr.Response.Header.Get("Retry-After") != "30" {
		t.Fatalf("retry-after %q", apiErr.Response.Header.Get("Retry-After"))
	}
}

// drop-idle answers in full, without Connection: close, then closes the
// connection: the next request on it finds it closed.
func TestFaultDropIdle(t *testing.T) {
	s := startSim(t, Options{})
	s.SetFault(Fault{DropIdle: true})
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"model":"gpt-sim","messages":[{"role":"user","content":"x"}]}`
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nAuthorization: Bearer " + testBetaKey +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	br := bufio.NewReader(c)
	if err := resp.Read(br); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != 200 || resp.ConnectionClose() {
		t.Fatalf("status %d, connection close %v", resp.StatusCode(), resp.ConnectionClose())
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection stayed open")
	}
}

// The control endpoint sets the server-wide fault from another process, as
// SetFault does, and an empty body clears it.
func TestFaultControlEndpoint(t *testing.T) {
	s := startSim(t, Options{})
	put := func(body string, want int) {
		t.Helper()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(s.URL() + "/_sim/fault")
		req.Header.SetMethod(fasthttp.MethodPut)
		req.SetBodyString(body)
		if err := fasthttp.Do(req, resp); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != want {
			t.Fatalf("PUT %q: %d %s", body, resp.StatusCode(), resp.Body())
		}
	}
	bc := betaClient(s, testBetaKey)
	put("status=503", fasthttp.StatusNoContent)
	_, err := bc.Chat.Completions.New(context.Background(), chatParams())
	betaAPIError(t, err, 503, "Simulated failure (x-sim-fault).")
	put("boom", fasthttp.StatusBadRequest)
	put("", fasthttp.StatusNoContent)
	if _, err := bc.Chat.Completions.New(context.Background(), chatParams()); err != nil {
		t.Fatalf("after the fault was cleared: %v", err)
	}
}
