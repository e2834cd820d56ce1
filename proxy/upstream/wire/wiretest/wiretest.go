// Package wiretest serves the answers of a provider over in-memory
// connections (net.Pipe), for the tests of the wire and of the relay above
// it: the provider's end reads each request whole and writes the answer the
// test gives for it, byte for byte. AcceptEach serves a test's provider over
// loopback TCP instead.
package wiretest

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// SSEHead and SSEChunks are an event stream's answer in two parts: its head,
// then two events in chunks (the second with an extension) and a trailer.
const (
	SSEHead   = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	SSEChunks = "9\r\ndata: a\n\n\r\n9;x=1\r\ndata: b\n\n\r\n0\r\nX-T: 1\r\n\r\n"
)

// Answers returns the answers in turn, one a call, then waits until the test
// ends and reports false: the connection asking stays open until then.
func Answers(t testing.TB, answers ...string) func() (string, bool) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	next := make(chan string, len(answers))
	for _, a := range answers {
		next <- a
	}
	return func() (string, bool) {
		select {
		case a := <-next:
			return a, true
		case <-done:
			return "", false
		}
	}
}

// Pipe returns the client's end of a new net.Pipe whose other end answers
// each request read whole with what answer returns, in one write ("\x00"
// parts it into several), until answer returns false or a request cannot be
// read; it then closes.
func Pipe(answer func() (string, bool)) net.Conn {
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		br := bufio.NewReader(server)
		for {
			var req fasthttp.Request
			if err := req.Read(br); err != nil {
				return
			}
			a, ok := answer()
			if !ok {
				return
			}
			for _, part := range strings.Split(a, "\x00") {
				io.WriteString(server, part)
			}
		}
	}()
	return client
}

// AcceptEach listens on loopback and hands each connection accepted to each,
// on the accepting goroutine, until the test ends and closes the listener.
func AcceptEach(tb testing.TB, each func(net.Conn)) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			each(c)
		}
	}()
	return ln
}
