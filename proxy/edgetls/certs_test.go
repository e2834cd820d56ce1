package edgetls

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// syncBuf is a log sink safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// edge is a listener of Certs serving an echo of each line.
type edge struct {
	certs             *Certs
	addr              string
	log               *syncBuf
	certFile, keyFile string
}

func newEdge(t testing.TB, leaf *testca.Leaf, o Options) *edge {
	t.Helper()
	dir := t.TempDir()
	e := &edge{log: &syncBuf{}, certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem")}
	leaf.Install(t, e.certFile, e.keyFile)
	o.CertFile, o.KeyFile, o.Log = e.certFile, e.keyFile, slog.New(slog.NewTextHandler(e.log, nil))
	var err error
	if e.certs, err = New(o); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	e.addr = ln.Addr().String()
	tln := e.certs.Listener(ln)
	go func() {
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return e
}

// dial makes a handshake with the roots of ca and the client certificate
// cert, when not nil, and says hi through the connection.
func (e *edge) dial(t *testing.T, ca *testca.CA, cert *tls.Certificate, cache tls.ClientSessionCache) (*tls.Conn, error) {
	t.Helper()
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", ClientSessionCache: cache, NextProtos: []string{"h2", "http/1.1"}}
	if cert != nil {
		conf.Certificates = []tls.Certificate{*cert}
	}
	c, err := tls.Dial("tcp", e.addr, conf)
	if err != nil {
		return nil, err
	}
	// With TLS 1.3 a refused client certificate shows at the first read.
	if err := roundTrip(c, "hi"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func roundTrip(c net.Conn, s string) error {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, s); err != nil {
		return err
	}
	b := make([]byte, len(s))
	_, err := io.ReadFull(c, b)
	return err
}

func serial(c *tls.Conn) string {
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// A reload puts the new certificate in force for the handshakes that follow;
// a connection open before it goes on, and a session resumes across it.
func TestReloadSwapsCertificate(t *testing.T) {
	ca := testca.New(t, "edge")
	a, b := ca.Server(t, 90*24*time.Hour), ca.Server(t, 90*24*time.Hour)
	e := newEdge(t, a, Options{})
	cache := tls.NewLRUClientSessionCache(8)
	old, err := e.dial(t, ca, nil, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if serial(old) != a.Cert.SerialNumber.String() {
		t.Fatalf("serial %s, want %s", serial(old), a.Cert.SerialNumber)
	}
	if got := old.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Fatalf("ALPN %q, want http/1.1", got)
	}
	b.Install(t, e.certFile, e.keyFile)
	if err := e.certs.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(old, "still"); err != nil {
		t.Fatalf("the connection open across the reload: %v", err)
	}
	fresh, err := e.dial(t, ca, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if serial(fresh) != b.Cert.SerialNumber.String() {
		t.Fatalf("after the reload a handshake sees serial %s, want %s", serial(fresh), b.Cert.SerialNumber)
	}
	resumed, err := e.dial(t, ca, nil, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if !resumed.ConnectionState().DidResume {
		t.Fatal("a session from before the reload did not resume")
	}
	if !strings.Contains(e.log.String(), "tls certificate reloaded") {
		t.Fatalf("no log line of the reload: %s", e.log)
	}
}

// A broken pair is refused with a log line, and the certificate in force
// stays.
func TestReloadRefusesBrokenPair(t *testing.T) {
	ca := testca.New(t, "edge")
	a, b := ca.Server(t, 90*24*time.Hour), ca.Server(t, 90*24*time.Hour)
	e := newEdge(t, a, Options{})
	f := func(certFile, keyFile string) {
		t.Helper()
		copyFile(t, certFile, e.certFile)
		copyFile(t, keyFile, e.keyFile)
		if err := e.certs.Reload(); err == nil {
			t.Fatal("a broken pair was taken")
		}
		c, err := e.dial(t, ca, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if serial(c) != a.Cert.SerialNumber.String() {
			t.Fatalf("serial %s after a refused reload, want %s", serial(c), a.Cert.SerialNumber)
		}
	}
	f(b.CertFile, a.KeyFile) // a key of another certificate
	junk := filepath.Join(t.TempDir(), "junk.pem")
	os.WriteFile(junk, []byte("not a key"), 0o600)
	f(b.CertFile, junk)
	if n := strings.Count(e.log.String(), "tls reload refused"); n != 2 {
		t.Fatalf("%d log lines of a refused reload, want 2: %s", n, e.log)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// With client_auth require, a client without a certificate, or with one of
// another CA, is refused at the handshake; one of the client CA is served.
func TestClientAuthRequire(t *testing.T) {
	ca, clients, other := testca.New(t, "edge"), testca.New(t, "clients"), testca.New(t, "other")
	e := newEdge(t, ca.Server(t, 90*24*time.Hour), Options{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAFile: clients.CertFile})
	if c, err := e.dial(t, ca, nil, nil); err == nil {
		c.Close()
		t.Fatal("a client without a certificate was served")
	}
	if c, err := e.dial(t, ca, &other.Client(t, "svc").TLS, nil); err == nil {
		c.Close()
		t.Fatal("a client with a certificate of another CA was served")
	}
	c, err := e.dial(t, ca, &clients.Client(t, "svc").TLS, nil)
	if err != nil {
		t.Fatalf("a client with a certificate of the client CA: %v", err)
	}
	c.Close()
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: v, MaxVersion: v}
		if c, err := tls.Dial("tcp", e.addr, conf); err == nil {
			err = roundTrip(c, "hi")
			c.Close()
			if err == nil {
				t.Fatalf("TLS %x without a certificate was served", v)
			}
		}
	}
}

// min_version 1.3 refuses a TLS 1.2 client.
func TestMinVersion(t *testing.T) {
	ca := testca.New(t, "edge")
	e := newEdge(t, ca.Server(t, 90*24*time.Hour), Options{MinVersion: tls.VersionTLS13})
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12}
	if c, err := tls.Dial("tcp", e.addr, conf); err == nil {
		c.Close()
		t.Fatal("a TLS 1.2 client was served under min_version 1.3")
	}
	if c, err := e.dial(t, ca, nil, nil); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
}

// A certificate expiring within 14 days is a warning, at load and at each
// check; its expiry time is a metric.
func TestExpiryWarning(t *testing.T) {
	ca := testca.New(t, "edge")
	soon := ca.Server(t, 5*24*time.Hour)
	e := newEdge(t, soon, Options{})
	if !strings.Contains(e.log.String(), "tls certificate expires soon") {
		t.Fatalf("no warning for a certificate expiring in 5 days: %s", e.log)
	}
	if !e.certs.CheckExpiry() {
		t.Fatal("CheckExpiry: a certificate expiring in 5 days is not near its expiry")
	}
	var w bytes.Buffer
	e.certs.WritePrometheus(&w)
	want := "gateway_tls_certificate_expiry_timestamp_seconds " + strconv.FormatInt(soon.Cert.NotAfter.Unix(), 10) + "\n"
	if !strings.Contains(w.String(), want) || !strings.Contains(w.String(), "# HELP gateway_tls_certificate_expiry_timestamp_seconds ") {
		t.Fatalf("metrics %q, want the line %q and its help", w.String(), want)
	}
	late := newEdge(t, ca.Server(t, 90*24*time.Hour), Options{})
	if late.certs.CheckExpiry() || strings.Contains(late.log.String(), "expires soon") {
		t.Fatalf("a warning for a certificate expiring in 90 days: %s", late.log)
	}
}

// A broken pair at start is an error naming the fields.
func TestNewRefusesBrokenPair(t *testing.T) {
	ca := testca.New(t, "edge")
	a, b := ca.Server(t, time.Hour), ca.Server(t, time.Hour)
	if _, err := New(Options{CertFile: a.CertFile, KeyFile: b.KeyFile}); err == nil || !strings.Contains(err.Error(), "tls.cert_file, tls.key_file") {
		t.Fatalf("a mismatched pair: %v", err)
	}
	_, err := New(Options{CertFile: a.CertFile, KeyFile: a.KeyFile, ClientAuth: tls.RequireAndVerifyClientCert})
	if err == nil || !strings.Contains(err.Error(), "tls.client_ca_file") {
		t.Fatalf("client auth without a client CA: %v", err)
	}
}
