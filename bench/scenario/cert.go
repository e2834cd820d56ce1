package scenario

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is the life of the run's certificate: past the gateway's
// expiry warning, so that no warning is logged.
const certValidity = 90 * 24 * time.Hour

// Cert is a run's self-signed certificate, which the gateway's and nginx's
// TLS servers both present, and the client configuration that trusts it.
type Cert struct {
	CertFile, KeyFile string // PEM files
	Client            *tls.Config
}

// WriteCert writes a self-signed ECDSA P-256 certificate for 127.0.0.1 and
// its key into dir.
func WriteCert(dir string) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cannot make the TLS key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "modelgate-bench"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("cannot make the TLS certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the TLS key: %w", err)
	}
	c := &Cert{CertFile: filepath.Join(dir, "tls-cert.pem"), KeyFile: filepath.Join(dir, "tls-key.pem")}
	if err := os.WriteFile(c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, fmt.Errorf("cannot write the TLS certificate: %w", err)
	}
	if err := os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("cannot write the TLS key: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	// Go's defaults otherwise, as an SDK's client sends them; no session
	// cache, as Go's HTTP client has none by default: each new connection
	// is a full handshake.
	c.Client = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	return c, nil
}
