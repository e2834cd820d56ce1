package proxy

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// newResetUpstreamTLS is newResetUpstream served over TLS with conf; a
// request it resets is reset under TLS, on the TCP connection.
func newResetUpstreamTLS(t *testing.T, conf *tls.Config) *resetUpstream {
	t.Helper()
	u := &resetUpstream{sim: sim.New(sim.Options{Name: "d3", AlphaKey: "up-alpha", BetaKey: "up-beta", GammaKey: "up-gamma"})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.ln = ln
	srv := &fasthttp.Server{Handler: u.handleTLS, Logger: quietLog{}, NoDefaultServerHeader: true, NoDefaultContentType: true}
	go srv.Serve(tls.NewListener(ln, conf))
	t.Cleanup(func() { srv.Shutdown() })
	return u
}

func (u *resetUpstream) handleTLS(ctx *fasthttp.RequestCtx) {
	if u.resetting.Load() && ctx.ConnRequestNum() > 1 {
		u.requests.Add(1)
		tc := ctx.Conn().(*tls.Conn).NetConn().(*net.TCPConn)
		tc.SetLinger(0) // a reset, not a FIN
		tc.Close()
		return
	}
	u.handle(ctx)
}

// tlsUpstreamEnv is staleEnv with the deployments on https, their tls set
// to tlsYAML.
func tlsUpstreamEnv(t *testing.T, u *resetUpstream, tlsYAML string) *testEnv {
	t.Helper()
	return staleEnv(t, u, func(y string) string {
		for _, d := range []string{"d3-alpha", "d3-beta", "d3-gamma"} {
			i := strings.Index(y, "{name: "+d+",")
			j := i + strings.Index(y[i:], "}\n")
			y = y[:i] + strings.Replace(y[i:j], "http://", "https://", 1) + ", tls: " + tlsYAML + y[j:]
		}
		return y
	})
}

// A deployment behind a private CA is reached with the CA in its tls, and
// with a client certificate when it asks for one; without the CA, or
// without the certificate it requires, the call fails as a 502.
func TestUpstreamPrivateCA(t *testing.T) {
	ca, clients := testca.New(t, "upstream"), testca.New(t, "gateways")
	leaf := ca.Server(t, 90*24*time.Hour)
	client := clients.Client(t, "gateway-1")
	f := func(name string, serverConf *tls.Config, tlsYAML string, want int) {
		t.Helper()
		u := newResetUpstreamTLS(t, serverConf)
		e := tlsUpstreamEnv(t, u, tlsYAML)
		status, _, body := e.do(staleChat.method, staleChat.path, staleChat.headers, staleChat.body)
		if status != want {
			t.Fatalf("%s: status %d, want %d: %s", name, status, want, body)
		}
		if want != 200 {
			assertBetaError(t, status, body, want)
		}
	}
	plain := &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}
	mutual := &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients.Pool()}
	f("the private CA", plain, "{ca_file: "+ca.CertFile+"}", 200)
	f("the private CA and a server name", plain, "{ca_file: "+ca.CertFile+", server_name: localhost}", 200)
	f("the system's roots", plain, "{server_name: localhost}", 502)
	f("a wrong server name", plain, "{ca_file: "+ca.CertFile+", server_name: elsewhere.example}", 502)
	f("mutual TLS", mutual, "{ca_file: "+ca.CertFile+", cert_file: "+client.CertFile+", key_file: "+client.KeyFile+"}", 200)
	f("mutual TLS without a certificate", mutual, "{ca_file: "+ca.CertFile+"}", 502)
}

// A stale keep-alive connection to a deployment on TLS is resent once on a
// new connection, as over plain TCP.
func TestStaleConnectionResendOverTLS(t *testing.T) {
	ca := testca.New(t, "upstream")
	u := newResetUpstreamTLS(t, &tls.Config{Certificates: []tls.Certificate{ca.Server(t, 90*24*time.Hour).TLS}})
	e := tlsUpstreamEnv(t, u, "{ca_file: "+ca.CertFile+"}")
	u.warmPool(t, e, "d3-beta", 4, staleChat)
	u.resetting.Store(true)
	u.requests.Store(0)
	status, _, body := e.do(staleChat.method, staleChat.path, staleChat.headers, staleChat.body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if got := u.requests.Load(); got != 2 {
		t.Errorf("the upstream saw %d requests, want 2: the stale one and its resend", got)
	}
	dep := e.gw.state.Load().deps["d3-beta"]
	if got := dep.Stats.StaleRetries(); got != 1 {
		t.Errorf("stale_connection retries %d, want 1", got)
	}
	if got := dep.Conns(); got != 1 {
		t.Errorf("%d connections after the resend, want the one dialled for it", got)
	}
}
