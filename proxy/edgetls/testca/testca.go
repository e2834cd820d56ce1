// Package testca makes throwaway certificate authorities and certificates
// for tests: ECDSA P-256 keys, PEM files in a directory the test owns. Not
// for production use.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority. Safe for concurrent use.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA's certificate in PEM.
	CertFile string
	dir      string
}

var serials atomic.Int64

// New makes a CA whose files go to t.TempDir().
func New(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serials.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, dir: t.TempDir()}
	ca.CertFile = filepath.Join(ca.dir, name+"-ca.pem")
	writePEM(t, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Pool returns a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is an issued certificate and its files.
type Leaf struct {
	Cert              *x509.Certificate
	TLS               tls.Certificate
	CertFile, KeyFile string
}

// Server issues a server certificate for 127.0.0.1, localhost and names,
// valid for life (from an hour ago).
func (ca *CA) Server(t testing.TB, life time.Duration, names ...string) *Leaf {
	t.Helper()
	tmpl := ca.template("server", life)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.DNSNames = append([]string{"localhost"}, names...)
	return ca.issue(t, tmpl)
}

// Client issues a client certificate with the common name cn.
func (ca *CA) Client(t testing.TB, cn string) *Leaf {
	t.Helper()
	tmpl := ca.template(cn, 365*24*time.Hour)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(t, tmpl)
}

func (ca *CA) template(cn string, life time.Duration) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1) + 1000),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(life),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate) *Leaf {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	base := filepath.Join(ca.dir, tmpl.Subject.CommonName+"-"+tmpl.SerialNumber.String())
	l := &Leaf{Cert: cert, CertFile: base + ".pem", KeyFile: base + "-key.pem"}
	writePEM(t, l.CertFile, "CERTIFICATE", der)
	writePEM(t, l.KeyFile, "EC PRIVATE KEY", kder)
	l.TLS = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}
	return l
}

// Install copies l's files over certFile and keyFile, each replaced whole
// (written aside, then renamed), as a deployment tool would.
func (l *Leaf) Install(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for _, f := range [][2]string{{l.CertFile, certFile}, {l.KeyFile, keyFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1]+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f[1]+".new", f[1]); err != nil {
			t.Fatal(err)
		}
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
