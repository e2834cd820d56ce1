// Command floor is the least a Go proxy can do for the harness's beta chat
// scenarios: the reference that tells how much of the gateway's gap to nginx
// is the gateway's and how much is Go's, on the machine at hand. The harness
// runs it in the gateway's place as the targets go-relay and fasthttp-relay
// (see bench/cmd/bench); it takes the gateway's flags.
//
// Each client connection gets a goroutine, a connection of its own to the
// config's first upstream of the request's family (beta's chat calls under
// /v1/router/beta/v1, alpha's messages under /v1/router/alpha), and the
// gateway's socket layer (proxy/rawio). A request is read by its
// Content-Length, sent on with the upstream's key (and, for alpha, the
// client's anthropic-version), and the upstream's head and body go back as
// they came: a chunked answer (a stream) chunk by chunk, each burst of chunks
// already read in one write. Nothing is checked, routed, counted or bounded:
// it does not authenticate or survive a hostile client. It answers GET
// .../models with an empty list, for the harness's readiness probe.
//
// With FLOOR_ENGINE=fasthttp in its environment it is fasthttp's own reverse
// proxy instead, on the same socket layer: a fasthttp server whose handler
// sends the client's request, pointed at the upstream, through a fasthttp
// client into the client's response (a stream's body as fasthttp streams
// one, read as it comes). The difference between the two is what fasthttp
// costs a proxy; between that and the gateway, the gateway's work.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/rawio"
)

func main() {
	cfgPath := flag.String("config", "", "the gateway config whose first beta and alpha upstreams to relay to")
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve on")
	flag.String("admin-listen", "", "ignored (a gateway flag)")
	flag.String("grace", "", "ignored (a gateway flag)")
	flag.String("access-log", "", "ignored (a gateway flag)")
	flag.Parse()
	ups, err := upstreamsOf(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	if os.Getenv("FLOOR_ENGINE") == "fasthttp" {
		fmt.Fprintln(os.Stderr, "floor: fasthttp relaying", *listen, "to", ups.beta.addr)
		serveFasthttp(ln, ups)
		return
	}
	fmt.Fprintln(os.Stderr, "floor: relaying", *listen, "to", ups.beta.addr)
	serve(ln, ups)
}

// serveFasthttp relays as the usual fasthttp reverse proxy does: the client's
// request and response are the upstream call's.
func serveFasthttp(ln net.Listener, ups upstreams) error {
	clients := map[string]*fasthttp.HostClient{}
	for _, up := range []upstream{ups.beta, ups.alpha} {
		if up.addr != "" && clients[up.addr] == nil {
			clients[up.addr] = &fasthttp.HostClient{Addr: up.addr, MaxConns: 1 << 14, DisablePathNormalizing: true,
				Dial: func(addr string) (net.Conn, error) {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						return nil, err
					}
					return wrap(c), nil
				}}
		}
	}
	srv := &fasthttp.Server{
		ReadBufferSize: 8 << 10,
		Handler: func(ctx *fasthttp.RequestCtx) {
			path := ctx.Path()
			if ctx.IsGet() && bytes.HasSuffix(path, []byte("/models")) {
				ctx.SetContentType("application/json")
				ctx.SetBodyString(`{"object":"list","data":[]}`)
				return
			}
			up, rest, ok := ups.of(path)
			if !ok {
				ctx.Error("not relayed", fasthttp.StatusNotFound)
				return
			}
			req := &ctx.Request
			req.SetRequestURI(up.base + string(rest))
			req.Header.SetHost(up.addr)
			req.Header.Del("Authorization")
			req.Header.Set(up.keyHeader, up.key)
			hc := clients[up.addr]
			if !bytes.Contains(req.Body(), []byte(`"stream":true`)) {
				if err := hc.Do(req, &ctx.Response); err != nil {
					ctx.Error("upstream failed", fasthttp.StatusBadGateway)
				}
				return
			}
			// A stream is relayed as fasthttp relays one: the upstream's
			// body stream is the client's, copied as it comes.
			resp := fasthttp.AcquireResponse()
			resp.StreamBody = true
			if err := hc.Do(req, resp); err != nil {
				fasthttp.ReleaseResponse(resp)
				ctx.Error("upstream failed", fasthttp.StatusBadGateway)
				return
			}
			resp.Header.CopyTo(&ctx.Response.Header)
			ctx.Response.SetBodyStream(streamed{resp}, -1)
		},
	}
	return srv.Serve(rawListener{ln})
}

// streamed is an upstream answer's body stream, given back with its answer
// when the client's response is written.
type streamed struct{ resp *fasthttp.Response }

func (s streamed) Read(p []byte) (int, error) { return s.resp.BodyStream().Read(p) }

func (s streamed) Close() error {
	err := s.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(s.resp)
	return err
}

// rawListener gives fasthttp's server the gateway's socket layer, as the
// gateway's listener does.
type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrap(c), nil
}

// upstream is where a family's requests go: the address, the base path the
// endpoint's path is appended to, and the header that carries the
// upstream's key, with its value.
type upstream struct {
	addr, base, keyHeader, key string
}

// upstreams are the config's first beta and alpha upstreams; alpha's addr is
// empty when the config has none.
type upstreams struct{ beta, alpha upstream }

// The gateway's paths of each family: what follows them is the upstream's
// endpoint path, after the upstream's base (beta's base URL ends in /v1,
// alpha's does not).
const (
	betaPrefix  = "/v1/router/beta/v1"
	alphaPrefix = "/v1/router/alpha"
)

// of returns the upstream of a request to path and the endpoint path that
// goes after its base; ok is false for a path the floor does not relay.
func (u *upstreams) of(path []byte) (up upstream, rest []byte, ok bool) {
	switch {
	case bytes.HasPrefix(path, []byte(betaPrefix)):
		return u.beta, path[len(betaPrefix):], true
	case bytes.HasPrefix(path, []byte(alphaPrefix)) && u.alpha.addr != "":
		return u.alpha, path[len(alphaPrefix):], true
	}
	return upstream{}, nil, false
}

func upstreamsOf(path string) (upstreams, error) {
	var ups upstreams
	data, err := os.ReadFile(path)
	if err != nil {
		return ups, err
	}
	cfg, err := config.Parse(data, os.LookupEnv)
	if err != nil {
		return ups, err
	}
	for _, u := range cfg.Upstreams {
		dst, keyHeader, value := &ups.beta, "Authorization", "Bearer "+u.APIKey
		switch {
		case u.Family == "alpha" && ups.alpha.addr == "":
			dst, keyHeader, value = &ups.alpha, "x-api-key", u.APIKey
		case u.Family != "beta" || ups.beta.addr != "":
			continue
		}
		pu, err := url.Parse(u.BaseURL)
		if err != nil || pu.Scheme != "http" {
			return ups, fmt.Errorf("upstream %s: only a plain http base URL is relayed", u.Name)
		}
		*dst = upstream{addr: pu.Host, base: strings.TrimRight(pu.Path, "/"), keyHeader: keyHeader, key: value}
	}
	if ups.beta.addr == "" {
		return ups, errors.New("the config has no beta upstream")
	}
	return ups, nil
}

func serve(ln net.Listener, ups upstreams) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go relay(wrap(c), ups)
	}
}

func wrap(c net.Conn) net.Conn {
	if rc := rawio.Wrap(c); rc != nil {
		return rc
	}
	return c
}

// relay serves one client connection until it closes or sends what the floor
// does not relay.
func relay(c net.Conn, ups upstreams) {
	defer c.Close()
	cr, cw := bufio.NewReaderSize(c, 8<<10), bufio.NewWriterSize(c, 8<<10)
	var u upConn
	defer u.close()
	head := make([]byte, 0, 4<<10)
	body := make([]byte, 0, 4<<10)
	for {
		var err error
		var n int
		if head, n, _, err = readHead(cr, head); err != nil {
			return
		}
		if body, err = readBody(cr, body, n); err != nil {
			return
		}
		method, path, ok := requestLine(head)
		if !ok {
			return
		}
		if string(method) == "GET" && bytes.HasSuffix(path, []byte("/models")) {
			cw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"object\":\"list\",\"data\":[]}")
			if cw.Flush() != nil {
				return
			}
			continue
		}
		up, rest, ok := ups.of(path)
		if !ok || u.to(up.addr) != nil {
			return
		}
		writeRequest(u.w, method, up, rest, head, body)
		if u.w.Flush() != nil {
			return
		}
		var chunked bool
		if head, n, chunked, err = readHead(u.r, head); err != nil {
			return
		}
		cw.Write(head)
		if chunked {
			err = relayChunked(u.r, cw)
		} else if body, err = readBody(u.r, body, n); err == nil {
			cw.Write(body)
		}
		if err != nil || cw.Flush() != nil {
			return
		}
	}
}

// upConn is a client connection's connection to an upstream, dialled on
// first use and again when a request goes to another address.
type upConn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

// to has u connected to addr.
func (u *upConn) to(addr string) error {
	if u.c != nil && u.addr == addr {
		return nil
	}
	u.close()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	u.addr, u.c = addr, wrap(c)
	u.r, u.w = bufio.NewReaderSize(u.c, 8<<10), bufio.NewWriterSize(u.c, 8<<10)
	return nil
}

func (u *upConn) close() {
	if u.c != nil {
		u.c.Close()
		u.c = nil
	}
}

// writeRequest writes the client's request, its head read into head, to up:
// the endpoint path rest after up's base, up's key, the client's
// anthropic-version (alpha's SDKs send one), the JSON body.
func writeRequest(w *bufio.Writer, method []byte, up upstream, rest, head, body []byte) {
	w.Write(method)
	w.WriteString(" ")
	w.WriteString(up.base)
	w.Write(rest)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(up.addr)
	w.WriteString("\r\n")
	w.WriteString(up.keyHeader)
	w.WriteString(": ")
	w.WriteString(up.key)
	if v := headerOf(head, "anthropic-version"); v != nil {
		w.WriteString("\r\nanthropic-version: ")
		w.Write(v)
	}
	w.WriteString("\r\nContent-Type: application/json\r\nContent-Length: ")
	var num [20]byte
	w.Write(strconv.AppendInt(num[:0], int64(len(body)), 10))
	w.WriteString("\r\n\r\n")
	w.Write(body)
}

// headerOf returns the value of the header name in head, or nil.
func headerOf(head []byte, name string) []byte {
	for line := range bytes.SplitSeq(head, []byte("\r\n")) {
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte(name)) {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}

// relayChunked copies a chunked body as it comes, its framing included: a
// chunk goes out once no more of the answer is read already, so a burst of
// events goes in one write, as the gateway relays them.
func relayChunked(r *bufio.Reader, w *bufio.Writer) error {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		w.Write(line)
		hex, _, _ := bytes.Cut(line, []byte(";"))
		size, err := strconv.ParseInt(string(bytes.TrimSpace(hex)), 16, 64)
		if err != nil || size < 0 {
			return errors.New("floor: bad chunk size")
		}
		if size == 0 { // the trailer, up to its blank line
			for {
				if line, err = r.ReadSlice('\n'); err != nil {
					return err
				}
				w.Write(line)
				if len(line) <= 2 {
					return nil
				}
			}
		}
		if _, err = io.CopyN(w, r, size+2); err != nil {
			return err
		}
		if r.Buffered() == 0 {
			if err = w.Flush(); err != nil {
				return err
			}
		}
	}
}

// readHead reads a message's head into head and returns it with its
// Content-Length (0 when it has none) and whether it is chunked.
func readHead(r *bufio.Reader, head []byte) ([]byte, int, bool, error) {
	head, n, chunked := head[:0], 0, false
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return head, 0, false, err
		}
		head = append(head, line...)
		if len(line) <= 2 {
			return head, n, chunked, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		switch {
		case !ok:
		case bytes.EqualFold(name, []byte("Content-Length")):
			if n, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil || n < 0 {
				return head, 0, false, errors.New("floor: bad Content-Length")
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(bytes.TrimSpace(value), []byte("chunked"))
		}
	}
}

func readBody(r *bufio.Reader, body []byte, n int) ([]byte, error) {
	if n > cap(body) {
		body = make([]byte, n)
	}
	body = body[:n]
	_, err := io.ReadFull(r, body)
	return body, err
}

// requestLine returns the method and path of the request line at the start
// of head.
func requestLine(head []byte) (method, path []byte, ok bool) {
	line, _, _ := bytes.Cut(head, []byte("\r\n"))
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	path, _, ok2 := bytes.Cut(rest, []byte(" "))
	return method, path, ok1 && ok2
}
