package upstream

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
)

// The client gets the upstream's headers in the upstream's order, repeated
// ones too, with the stripped ones, in any case, left out wherever they
// were: deleting them from a whole copy (fasthttp moves the last header into
// a deleted one's place) would reorder the rest.
func TestBeginKeepsTheUpstreamOrder(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\ndate: Mon, 01 Jan 2024 00:00:00 GMT\r\nvary: Origin\r\nconnection: keep-alive\r\n" +
		"x-request-id: r\r\nx-dup: 1\r\nKeep-Alive: timeout=5\r\nx-a: a\r\nTransfer-Encoding: chunked\r\n" +
		"x-dup: 2\r\nSERVER: s\r\nx-b: b\r\nREQUEST-ID: q\r\nx-dup: 3\r\n\r\n"
	var r Relay
	r.dep = New(config.Upstream{Name: "d", Family: "beta", BaseURL: "http://127.0.0.1:1/v1", APIKey: "k", MaxConns: 1},
		config.Timeouts{}, config.Health{}, config.Limits{})
	if _, err := readHead(bufio.NewReader(strings.NewReader(head)), false, &r.resp); err != nil {
		t.Fatal(err)
	}
	var out fasthttp.Response
	out.Header.SetNoDefaultContentType(true)
	r.Begin(&out)
	var got []string
	for name, value := range out.Header.All() {
		got = append(got, string(name)+": "+string(value))
	}
	want := []string{"vary: Origin", "x-dup: 1", "x-a: a", "x-dup: 2", "x-b: b", "x-dup: 3"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("client headers\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
