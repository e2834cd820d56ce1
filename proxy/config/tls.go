package config

import (
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
