package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// A LazyRedis on a port where nothing listens starts, fails every call with ErrUnavailable,
// says why in words without the address or the password, and closes at once.
func TestLazyRedisUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	l, err := OpenRedisLazy(RedisOptions{Addrs: []string{addr}, Password: "topsecret-pw"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PutResponse(Response{ID: "resp_1", Owner: "a", Model: "m", Deployment: "d"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutResponse: %v, want ErrUnavailable", err)
	}
	if _, err := l.GetFile("a", "file_svc_01J00000000000000000000000", time.Now()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("GetFile: %v, want ErrUnavailable", err)
	}
	err = l.Check(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Check: %v, want ErrUnavailable saying refused", err)
	}
	_, port, _ := net.SplitHostPort(addr)
	if strings.Contains(err.Error(), port) || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("Check's reason names the address or the password: %v", err)
	}
	if l.eng.Load() != nil {
		t.Fatal("Engine is set without a server")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// On a reachable cluster it opens at once and Check passes.
func TestLazyRedisReachable(t *testing.T) {
	addrs := testCluster.Addrs(t)
	l, err := OpenRedisLazy(RedisOptions{Addrs: addrs, KeyPrefix: "lazy:", Replicas: 1, WaitTimeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.eng.Load() == nil {
		t.Fatal("not open at once on a reachable cluster")
	}
	if err := l.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	r := Response{ID: "resp_lazy", Owner: "a", Model: "m", Deployment: "d", Created: time.Unix(1, 0)}
	if err := l.PutResponse(r); err != nil {
		t.Fatal(err)
	}
	if got, err := l.GetResponse(r.ID); err != nil || got.Owner != "a" {
		t.Fatalf("GetResponse: %+v %v", got, err)
	}
}

func TestLazyRedisInvalidOptions(t *testing.T) {
	if _, err := OpenRedisLazy(RedisOptions{}, nil); err == nil {
		t.Fatal("no addrs accepted")
	}
}
