package store

import (
	"context"
	"crypto/tls"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// TestRedisTLS runs the engine over TLS against a real standalone redis-server with a
// certificate of its own: the records go through, Check takes the standalone path, and a
// client that does not trust the certificate is unavailable.
func TestRedisTLS(t *testing.T) {
	testCluster.Addrs(t) // installs redis, or skips (fails in CI) without it
	dir := t.TempDir()
	ca := testca.New(t, "redis")
	leaf := ca.Server(t, time.Hour, "redis.test")
	port := freePort(t)
	srv := exec.Command("redis-server", "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", leaf.CertFile, "--tls-key-file", leaf.KeyFile, "--tls-ca-cert-file", ca.CertFile,
		"--tls-auth-clients", "no", "--save", "", "--appendonly", "no", "--dir", dir)
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
	s, err := OpenRedis(RedisOptions{Addrs: []string{addr}, TLS: &tls.Config{RootCAs: ca.Pool(), ServerName: "redis.test"}})
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
