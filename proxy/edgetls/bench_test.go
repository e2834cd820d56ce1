package edgetls

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// BenchmarkHandshake measures a new connection through the listener over
// loopback (ECDSA P-256, TLS 1.3): the handshake, full or resumed from a
// session ticket, and one small round trip.
func BenchmarkHandshake(b *testing.B) {
	ca := testca.New(b, "edge")
	e := newEdge(b, ca.Server(b, 90*24*time.Hour), Options{})
	for _, resume := range []bool{false, true} {
		name := "full"
		if resume {
			name = "resumed"
		}
		b.Run(name, func(b *testing.B) {
			conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
			if resume {
				conf.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			}
			b.ReportAllocs()
			resumed := 0
			for b.Loop() {
				c, err := tls.Dial("tcp", e.addr, conf)
				if err != nil {
					b.Fatal(err)
				}
				if err := roundTrip(c, "hi"); err != nil {
					b.Fatal(err)
				}
				if c.ConnectionState().DidResume {
					resumed++
				}
				c.Close()
			}
			if resume && resumed == 0 && b.N > 1 {
				b.Fatal("no handshake resumed")
			}
		})
	}
}
