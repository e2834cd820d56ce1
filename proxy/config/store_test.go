package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate and its key as PEM files in dir.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

// The TLS section becomes the engine's tls.Config: roots from ca_file, the server name,
// the client certificate; a file that holds no certificate is refused by its field.
func TestStoreTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	vars := env(map[string]string{"KEY_A": "a", "UP": "u"})
	yaml := minimalConfig + "store: {engine: redis, addrs: [\"h:1\"], tls: {ca_file: " + cert +
		", server_name: redis.test, cert_file: " + cert + ", key_file: " + key + "}}\n"
	cfg, err := Parse([]byte(yaml), vars)
	if err != nil {
		t.Fatal(err)
	}
	o, err := cfg.Store.RedisOptions(cfg.Responses.Retention)
	if err != nil {
		t.Fatal(err)
	}
	if o.TLS == nil || o.TLS.RootCAs == nil || o.TLS.ServerName != "redis.test" || len(o.TLS.Certificates) != 1 {
		t.Fatalf("tls config: %+v", o.TLS)
	}
	_, err = Parse([]byte(minimalConfig+"store: {engine: redis, addrs: [\"h:1\"], tls: {ca_file: "+key+"}}\n"), vars)
	if err == nil || !strings.Contains(err.Error(), "store.tls") {
		t.Fatalf("a CA file without a certificate: %v", err)
	}
	_, err = Parse([]byte(minimalConfig+"store: {engine: redis, addrs: [\"h:1\"], tls: {cert_file: "+cert+"}}\n"), vars)
	if err == nil || !strings.Contains(err.Error(), "store.tls") {
		t.Fatalf("cert_file without key_file: %v", err)
	}
}
