package config

import (
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"time"
)

// ListenerTLS is the TLS of the client listener at listen_tls. See
// docs/operations.md (TLS).
type ListenerTLS struct {
	CertFile string `yaml:"cert_file"` // PEM certificate chain, leaf first; required
	KeyFile  string `yaml:"key_file"`  // its PEM key; required
	// ClientCAFile holds the PEM roots client certificates must chain to;
	// required when ClientAuth is request or require.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is none (the default), request (a certificate is asked for,
	// and checked when given) or require (no call without one).
	ClientAuth string `yaml:"client_auth"`
	MinVersion string `yaml:"min_version"` // "1.2" (the default) or "1.3"
	// HandshakeTimeout bounds a client's TLS handshake: a hello that stalls,
	// junk or plaintext is closed within it; default 10s.
	HandshakeTimeout Duration `yaml:"handshake_timeout"`
	// Curves are the key exchanges the listener accepts, in the server's
	// order of preference (names of CurveNames); absent: Go's default,
	// post-quantum hybrid first.
	Curves []string `yaml:"curves"`
}

// CurveNames are the key exchange names tls.curves accepts, in any case: the
// lowercase spellings first (the ones error messages list), then the names
// Go's tls.CurveID prints and OpenSSL's.
var CurveNames = []struct {
	Name string
	ID   tls.CurveID
}{
	{"x25519mlkem768", tls.X25519MLKEM768}, {"secp256r1mlkem768", tls.SecP256r1MLKEM768},
	{"secp384r1mlkem1024", tls.SecP384r1MLKEM1024}, {"x25519", tls.X25519},
	{"p256", tls.CurveP256}, {"p384", tls.CurveP384}, {"p521", tls.CurveP521},
	{"curvep256", tls.CurveP256}, {"curvep384", tls.CurveP384}, {"curvep521", tls.CurveP521},
	{"p-256", tls.CurveP256}, {"p-384", tls.CurveP384}, {"p-521", tls.CurveP521},
	{"secp256r1", tls.CurveP256}, {"secp384r1", tls.CurveP384}, {"secp521r1", tls.CurveP521},
	{"prime256v1", tls.CurveP256},
}

// knownCurves lists the lowercase names, for error messages.
const knownCurves = "x25519mlkem768, secp256r1mlkem768, secp384r1mlkem1024, x25519, p256, p384, p521"

// CurveID returns the key exchange of name, in any case; false when unknown.
func CurveID(name string) (tls.CurveID, bool) {
	for _, c := range CurveNames {
		if strings.EqualFold(name, c.Name) {
			return c.ID, true
		}
	}
	return 0, false
}

// CurveIDs returns the key exchanges of Curves in their order; nil when
// Curves is absent (Go's default). The config must be valid.
func (t *ListenerTLS) CurveIDs() []tls.CurveID {
	if t.Curves == nil {
		return nil
	}
	ids := make([]tls.CurveID, 0, len(t.Curves))
	for _, n := range t.Curves {
		if id, ok := CurveID(n); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// UpstreamTLS is the TLS toward an https deployment: a private CA, a server
// name other than the base URL's host, and a client certificate for mutual
// TLS. Its zero value is the system's roots and no client certificate.
type UpstreamTLS = StoreTLS

// ListenOff turns the plain client listener off (listen: off); listen_tls
// then serves alone.
const ListenOff = "off"

func (t *ListenerTLS) ensureDefaults() {
	if t.ClientAuth == "" {
		t.ClientAuth = "none"
	}
	if t.MinVersion == "" {
		t.MinVersion = "1.2"
	}
	setDefault(&t.HandshakeTimeout, 10*time.Second)
}

// listeners checks listen, listen_tls and tls.
func (p *problems) listeners(c *Config) {
	if c.Listen != ListenOff {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			p.add("listen", "expected host:port such as 127.0.0.1:8080, or off, not %q", c.Listen)
		}
	}
	switch {
	case c.ListenTLS == "" && c.Listen == ListenOff:
		p.add("listen", "off needs listen_tls: the gateway would listen nowhere")
	case c.ListenTLS == "" && c.TLS != nil:
		p.add("tls", "set, but listen_tls is not: add listen_tls: HOST:PORT")
	case c.ListenTLS == "":
	case c.TLS == nil:
		p.add("tls", "required with listen_tls: cert_file and key_file")
	default:
		if _, _, err := net.SplitHostPort(c.ListenTLS); err != nil {
			p.add("listen_tls", "expected host:port such as 0.0.0.0:8443, not %q", c.ListenTLS)
		}
		p.listenerTLS(c.TLS)
	}
}

func (p *problems) listenerTLS(t *ListenerTLS) {
	if t.CertFile == "" {
		p.add("tls.cert_file", "required")
	}
	if t.KeyFile == "" {
		p.add("tls.key_file", "required")
	}
	switch t.ClientAuth {
	case "none":
	case "request", "require":
		if t.ClientCAFile == "" {
			p.add("tls.client_ca_file", "required with client_auth: %s", t.ClientAuth)
		}
	default:
		p.add("tls.client_auth", "must be none, request or require, not %q", t.ClientAuth)
	}
	if t.MinVersion != "1.2" && t.MinVersion != "1.3" {
		p.add("tls.min_version", "must be \"1.2\" or \"1.3\", not %q", t.MinVersion)
	}
	if t.HandshakeTimeout < 0 {
		p.add("tls.handshake_timeout", "must be positive")
	}
	p.curves(t)
}

// curves checks tls.curves: known names, none twice, not empty, and one a
// TLS 1.2 client can use when min_version lets it in.
func (p *problems) curves(t *ListenerTLS) {
	if t.Curves == nil {
		return
	}
	if len(t.Curves) == 0 {
		p.add("tls.curves", "empty: list at least one key exchange, or leave curves out for Go's default")
		return
	}
	seen := map[tls.CurveID]int{}
	classical := false
	for i, n := range t.Curves {
		f := fmt.Sprintf("tls.curves[%d]", i)
		id, ok := CurveID(n)
		if !ok {
			p.add(f, "unknown key exchange %q; known: %s", n, knownCurves)
			continue
		}
		if j, dup := seen[id]; dup {
			p.add(f, "%q is tls.curves[%d] again", n, j)
			continue
		}
		seen[id] = i
		switch id {
		case tls.X25519MLKEM768, tls.SecP256r1MLKEM768, tls.SecP384r1MLKEM1024:
		default:
			classical = true
		}
	}
	if len(seen) == len(t.Curves) && !classical && t.MinVersion == "1.2" {
		p.add("tls.curves", "only post-quantum hybrids, which TLS 1.2 cannot use: add x25519 or p256, or set min_version: \"1.3\"")
	}
}

// upstreamTLS checks the tls of the deployment at field f, whose base URL
// is baseURL: only for https, and its files must load.
func (p *problems) upstreamTLS(f string, t UpstreamTLS, baseURL string) {
	if t == (UpstreamTLS{}) {
		return
	}
	if !strings.HasPrefix(baseURL, "https://") {
		p.add(f+".tls", "set for a base_url that is not https")
		return
	}
	if _, err := t.Config(); err != nil {
		p.add(f+".tls", "%v", err)
	}
}

// KeyClientCert names the client certificate that stands for a key's caller
// on the TLS listener, when the call carries no key: by the subject's common
// name, or by the SHA-256 of its public key (SPKI, in hex), which survives a
// renewal with the same key and cannot be claimed by another certificate of
// the client CA. Exactly one is set. The certificate must chain to
// tls.client_ca_file (client_auth request or require).
type KeyClientCert struct {
	SubjectCN  string `yaml:"subject_cn"`
	SPKISHA256 string `yaml:"spki_sha256"`
}

// clientCerts checks the keys' client_cert: one of its fields, a client CA
// to check certificates against, and no two keys for one certificate.
func (p *problems) clientCerts(c *Config) {
	seen := map[KeyClientCert]bool{}
	for i, k := range c.Keys {
		cc := k.ClientCert
		if cc == nil {
			continue
		}
		f := fmt.Sprintf("keys[%d].client_cert", i)
		switch {
		case (cc.SubjectCN == "") == (cc.SPKISHA256 == ""):
			p.add(f, "one of subject_cn or spki_sha256 is required")
		case cc.SPKISHA256 != "":
			if b, err := hex.DecodeString(cc.SPKISHA256); err != nil || len(b) != 32 {
				p.add(f+".spki_sha256", "must be 64 hex digits")
			}
		}
		if c.TLS == nil || c.TLS.ClientAuth == "none" {
			p.add(f, "needs listen_tls with tls.client_auth request or require")
		}
		norm := KeyClientCert{SubjectCN: cc.SubjectCN, SPKISHA256: strings.ToLower(cc.SPKISHA256)}
		if seen[norm] {
			p.add(f, "another key has the same client_cert")
		}
		seen[norm] = true
	}
}
