package edgetls

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// dialCurves makes a handshake offering the key exchanges offer (nil: Go's
// client defaults) up to TLS version max (zero: 1.3), and returns the one
// agreed.
func (e *edge) dialCurves(t *testing.T, ca *testca.CA, offer []tls.CurveID, max uint16) (tls.CurveID, error) {
	t.Helper()
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", CurvePreferences: offer, MaxVersion: max}
	c, err := tls.Dial("tcp", e.addr, conf)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if err := roundTrip(c, "hi"); err != nil {
		return 0, err
	}
	return c.ConnectionState().CurveID, nil
}

// A client that offers only X25519 is refused by a listener that accepts the
// post-quantum hybrid alone, and served by one with Go's defaults.
func TestCurvesRefuseClientWithoutOne(t *testing.T) {
	ca := testca.New(t, "edge")
	leaf := ca.Server(t, 90*24*time.Hour)
	only := []tls.CurveID{tls.X25519}
	strict := newEdge(t, leaf, Options{Curves: []tls.CurveID{tls.X25519MLKEM768}})
	if id, err := strict.dialCurves(t, ca, only, 0); err == nil {
		t.Fatalf("curves [X25519MLKEM768]: an X25519-only client agreed on %v", id)
	}
	def := newEdge(t, leaf, Options{})
	id, err := def.dialCurves(t, ca, only, 0)
	if err != nil || id != tls.X25519 {
		t.Fatalf("default curves: an X25519-only client got %v, %v; want X25519", id, err)
	}
	// Go's default takes the hybrid when the client offers it.
	if id, err := def.dialCurves(t, ca, nil, 0); err != nil || id != tls.X25519MLKEM768 {
		t.Fatalf("default curves, Go's client: %v, %v; want X25519MLKEM768", id, err)
	}
}

// A client that offers several gets the server's first preference among
// them, in the operator's order, not Go's; TLS 1.2 skips the hybrids.
func TestCurvesServerPreference(t *testing.T) {
	ca := testca.New(t, "edge")
	leaf := ca.Server(t, 90*24*time.Hour)
	both := []tls.CurveID{tls.X25519MLKEM768, tls.X25519, tls.CurveP256}
	for _, c := range []struct {
		server []tls.CurveID
		offer  []tls.CurveID
		max    uint16
		want   tls.CurveID
	}{
		{[]tls.CurveID{tls.X25519, tls.X25519MLKEM768}, nil, 0, tls.X25519},
		{[]tls.CurveID{tls.X25519, tls.X25519MLKEM768}, both, 0, tls.X25519},
		{[]tls.CurveID{tls.X25519MLKEM768, tls.X25519}, both, 0, tls.X25519MLKEM768},
		{[]tls.CurveID{tls.CurveP256, tls.X25519}, both, 0, tls.CurveP256},
		{[]tls.CurveID{tls.X25519MLKEM768, tls.CurveP384, tls.X25519}, nil, tls.VersionTLS12, tls.CurveP384},
		{[]tls.CurveID{tls.CurveP384, tls.X25519}, []tls.CurveID{tls.X25519}, 0, tls.X25519},
	} {
		e := newEdge(t, leaf, Options{Curves: c.server})
		id, err := e.dialCurves(t, ca, c.offer, c.max)
		if err != nil || id != c.want {
			t.Errorf("server %v, client offers %v (max %x): %v, %v; want %v", c.server, c.offer, c.max, id, err, c.want)
		}
	}
}

// A certificate reload keeps the key exchanges.
func TestCurvesKeptAcrossReload(t *testing.T) {
	ca := testca.New(t, "edge")
	e := newEdge(t, ca.Server(t, 90*24*time.Hour), Options{Curves: []tls.CurveID{tls.X25519, tls.X25519MLKEM768}})
	ca.Server(t, 90*24*time.Hour).Install(t, e.certFile, e.keyFile)
	if err := e.certs.Reload(); err != nil {
		t.Fatal(err)
	}
	if id, err := e.dialCurves(t, ca, nil, 0); err != nil || id != tls.X25519 {
		t.Fatalf("after a reload: %v, %v; want X25519", id, err)
	}
	if id, err := e.dialCurves(t, ca, []tls.CurveID{tls.CurveP256}, 0); err == nil {
		t.Fatalf("after a reload a P-256-only client agreed on %v", id)
	}
}
