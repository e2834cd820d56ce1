package wire

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// A deployment on https is reached through the dialer's TLS, and its answer
// read by the gateway's own body reader, an event stream's through the small
// one.
func TestDialerSpeaksTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: a\n\n"))
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	d := &dialer{connect: time.Minute, tls: &tls.Config{ServerName: "example.com", RootCAs: roots}}
	client := &fasthttp.HostClient{Addr: srv.Listener.Addr().String(), Dial: d.Dial, Transport: answerTransport, StreamResponseBody: true}
	var resp fasthttp.Response
	req := get("/")
	defer ReleaseRequest(req)
	if err := req.Do(client, &resp, nil, false); err != nil {
		t.Fatal(err)
	}
	defer resp.CloseBodyStream()
	if got := resp.BodyStream().(sized).readerSize(); got != sseReaderSize {
		t.Fatalf("the stream is read through %d bytes over TLS, want %d", got, sseReaderSize)
	}
	buf := make([]byte, 64)
	n, _ := resp.BodyStream().Read(buf)
	if _, own := resp.BodyStream().(interface{ Ready() bool }); !own || string(buf[:n]) != "data: a\n\n" {
		t.Fatalf("read %q, own body reader: %v", buf[:n], own)
	}
}

// A deployment whose certificate does not verify is not reached: a dial
// error, retried elsewhere.
func TestDialerRefusesBadCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	d := &dialer{connect: time.Minute, tls: &tls.Config{ServerName: "example.com"}}
	if _, err := d.Dial(srv.Listener.Addr().String()); !IsDialError(err) {
		t.Fatalf("dial with an unknown authority: %v", err)
	}
}
