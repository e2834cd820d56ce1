// Package s3test starts and stops the real S3 server of the tests of object storage
// (versitygw on its posix backend, built from the Go module proxy into .cache/s3/ of the
// repository) through scripts/s3-server.sh, and makes buckets on it.
//
// Each test binary takes its own port, so that packages tested at once never stop each
// other's server. A server found running on that port is reused and left running; one that
// this process started is stopped by Stop.
//
// When the server cannot be had (it cannot be built here), a test asking for it is skipped,
// unless GATEWAY_REQUIRE_S3=1 or GATEWAY_REQUIRE_REDIS=1 is set (CI sets them): then it
// fails.
package s3test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/modelgate/gateway/store/internal/serverscript"
)

// The credentials of the test server.
const (
	AccessKey = "gatewaytest"
	SecretKey = "gatewaytestsecret"
)

// Server is the S3 server of one port, started once on first use.
type Server struct {
	Port int

	srv serverscript.Server
}

var script = serverscript.Script{File: "s3-server.sh", Dir: "gateway-s3-server", PortEnv: "S3_SERVER_PORT",
	Env: []string{"S3_SERVER_ACCESS=" + AccessKey, "S3_SERVER_SECRET=" + SecretKey}}

// Endpoint returns the server's URL, starting it on first use; it skips (or fails, see the
// package doc) t when there is no server.
func (s *Server) Endpoint(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(s.srv.Start(t, script, s.Port, "S3 server", "GATEWAY_REQUIRE_S3", "GATEWAY_REQUIRE_REDIS"))
}

// Stop stops the server and removes its data if this process started it.
func (s *Server) Stop() { s.srv.Stop(script, s.Port) }

// Kill stops the server now (it comes back with Restart), for tests of an outage.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if _, err := Run("stop", s.Port); err != nil {
		t.Fatal(err)
	}
}

// Restart starts the server again on the same data after Kill.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if _, err := Run("start", s.Port); err != nil {
		t.Fatal(err)
	}
}

var bucketSeq atomic.Int64

// Bucket makes a new bucket of its own for t and returns its name.
func (s *Server) Bucket(t testing.TB) string {
	t.Helper()
	endpoint := s.Endpoint(t)
	name := fmt.Sprintf("test-%d-%d", os.Getpid(), bucketSeq.Add(1))
	c := Client(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
	return name
}

// Client returns a plain client of the server at endpoint.
func Client(t testing.TB, endpoint string) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Objects returns the names of the objects of bucket under prefix.
func Objects(t testing.TB, endpoint, bucket, prefix string) []string {
	t.Helper()
	c := Client(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names []string
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list objects: %v", o.Err)
		}
		names = append(names, o.Key)
	}
	return names
}

// Dir is the data directory of the server on port: fixed, so that a server a test process
// left running is found and reused.
func Dir(port int) string { return script.DataDir(port) }

// Run runs the script with cmd (start, stop, status) on the server of port and returns its
// output.
func Run(cmd string, port int) (string, error) { return script.Run(cmd, port) }

// StopPort stops the server of port and removes its data directory.
func StopPort(port int) error { return script.Stop(port) }
