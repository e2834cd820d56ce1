package store

import (
	"context"
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
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestRedisTLS runs the engine over TLS against a real standalone redis-server with a
// certificate of its own: the records go through, Check takes the standalone path, and a
// client that does not trust the certificate is unavailable.
func TestRedisTLS(t *testing.T) {
	testCluster.Addrs(t) // installs redis, or skips (fails in CI) without it
	dir := t.TempDir()
	cert, key, pool := tlsFiles(t, dir)
	port := freePort(t)
	srv := exec.Command("redis-server", "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second) // a guard against a hang, not a measure
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server with TLS does not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, err := OpenRedis(RedisOptions{Addrs: []string{addr}, TLS: &tls.Config{RootCAs: pool, ServerName: "redis.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("Check over TLS on a standalone server: %v", err)
	}
	r := Response{ID: "resp_tls", Owner: "a", Model: "m", Deployment: "d", Created: time.Unix(1, 0)}
	if err := s.PutResponse(r); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetResponse(r.ID); err != nil || got.Deployment != "d" {
		t.Fatalf("GetResponse over TLS: %+v %v", got, err)
	}
	if _, err := OpenRedis(RedisOptions{Addrs: []string{addr}, TLS: &tls.Config{ServerName: "redis.test"}}); err == nil {
		t.Fatal("a client that does not trust the server's certificate connected")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tlsFiles writes a self-signed certificate for redis.test and its key in dir.
func tlsFiles(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis.test"},
		DNSNames: []string{"redis.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}
