package proxy

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"strings"

	"github.com/modelgate/gateway/proxy/clientconn"
	"github.com/modelgate/gateway/proxy/config"
)

// certKeys maps client certificates to the ids of the keys they stand for
// (keys[].client_cert): by the subject's common name, and by the SHA-256 of
// the public key. Built with a state, read-only after: safe for concurrent
// use. The zero value maps nothing.
type certKeys struct {
	byCN   map[string]string
	bySPKI map[[sha256.Size]byte]string
}

func newCertKeys(keys []config.Key) certKeys {
	var ck certKeys
	for _, k := range keys {
		cc := k.ClientCert
		switch {
		case cc == nil:
		case cc.SPKISHA256 != "":
			var d [sha256.Size]byte
			hex.Decode(d[:], []byte(strings.ToLower(cc.SPKISHA256))) // validated by Config.Validate
			if ck.bySPKI == nil {
				ck.bySPKI = map[[sha256.Size]byte]string{}
			}
			ck.bySPKI[d] = k.ID
		default:
			if ck.byCN == nil {
				ck.byCN = map[string]string{}
			}
			ck.byCN[cc.SubjectCN] = k.ID
		}
	}
	return ck
}

// tlsStater is a connection that spoke TLS: edgetls.Conn.
type tlsStater interface {
	ConnectionState() tls.ConnectionState
}

// certAuthenticate sets keyID to the key that the call's verified client
// certificate stands for, and reports whether there is one. A call over
// plain TCP, or with no certificate, or one no key names, has none.
func (c *call) certAuthenticate() bool {
	ck := &c.st.certs
	if ck.byCN == nil && ck.bySPKI == nil {
		return false
	}
	conn := c.ctx.Conn()
	if cc, ok := conn.(*clientconn.Conn); ok {
		conn = cc.Conn
	}
	ts, ok := conn.(tlsStater)
	if !ok {
		return false
	}
	cs := ts.ConnectionState()
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return false // none given, or not checked against the client CA
	}
	leaf := cs.PeerCertificates[0]
	id, ok := ck.bySPKI[sha256.Sum256(leaf.RawSubjectPublicKeyInfo)]
	if !ok && leaf.Subject.CommonName != "" {
		id, ok = ck.byCN[leaf.Subject.CommonName]
	}
	if ok {
		c.keyID = id
	}
	return ok
}
