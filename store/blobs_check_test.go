package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// CheckBucket, against the real S3 server: nil for the bucket; in words, without the
// endpoint or a key, for a bucket that does not exist, keys the service refuses and a port
// where nothing listens.
func TestBlobsCheckBucket(t *testing.T) {
	endpoint := testS3.Endpoint(t)
	good := S3Options{Endpoint: endpoint, Bucket: testS3.Bucket(t), Region: "us-east-1",
		AccessKey: "gatewaytest", SecretKey: "gatewaytestsecret", PathStyle: true}
	f := func(name string, o S3Options, want string) {
		t.Helper()
		records, err := OpenPebble(t.TempDir(), PebbleOptions{Logger: SlogLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			t.Fatal(err)
		}
		b, err := OpenBlobs(records, o)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		err = b.CheckBucket(context.Background())
		if want == "" {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return
		}
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want ErrUnavailable saying %q", name, err, want)
		}
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(o.Endpoint, "http://"))
		if strings.Contains(err.Error(), port) || strings.Contains(err.Error(), "topsecret") {
			t.Fatalf("%s: the reason names the endpoint or a key: %v", name, err)
		}
		// The records engine is not the bucket: the store's own check passes.
		if err := b.Check(context.Background()); err != nil {
			t.Fatalf("%s: Check: %v", name, err)
		}
	}
	f("the bucket", good, "")
	missing := good
	missing.Bucket = "no-such-bucket-here"
	f("a missing bucket", missing, "the bucket does not exist")
	refused := good
	refused.SecretKey = "topsecret-wrong"
	f("wrong keys", refused, "refused the credentials (403")
	down := good
	down.Endpoint = "http://" + closedAddr(t)
	f("no server", down, "object storage refused the connection")
}

// Blobs.Check is the records engine's: a Redis that cannot be reached makes it fail in
// Redis's words, whatever the bucket (never asked here).
func TestBlobsCheckIsTheRecords(t *testing.T) {
	l, err := OpenRedisLazy(RedisOptions{Addrs: []string{closedAddr(t)}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenBlobs(l, S3Options{Endpoint: "http://" + closedAddr(t), Bucket: "b", Region: "us-east-1",
		AccessKey: "a", SecretKey: "s", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Check(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "redis refused") {
		t.Fatalf("Check with redis down: %v, want redis's reason", err)
	}
}
