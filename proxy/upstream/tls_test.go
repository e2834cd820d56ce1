package upstream

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
	var r Relay
	req := get("/")
	defer ReleaseRequest(req)
	if err := client.Do(req.client(), &r.resp); err != nil {
		t.Fatal(err)
	}
	var out fasthttp.Response
	r.dep = &Deployment{}
	r.dep.inflight.Add(1)
	r.Stream(&out, 0, false, nil)
	defer r.Close()
	if got := r.stream.(sized).readerSize(); got != sseReaderSize {
		t.Fatalf("the stream is read through %d bytes over TLS, want %d", got, sseReaderSize)
	}
	buf := make([]byte, 64)
	n, _ := r.Read(buf)
	if !ownsBody(&r) || string(buf[:n]) != "data: a\n\n" {
		t.Fatalf("read %q, own body reader: %v", buf[:n], ownsBody(&r))
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
