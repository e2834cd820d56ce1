package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/modelgate/gateway/bench/scenario"
	"github.com/modelgate/gateway/store/s3test"
)

// The gateway on the redis engine with the files' bytes in object storage
// (store.blobs), measured beside the redis engine alone on the stateful
// scenarios.
const (
	blobsTarget = "gateway-redis-s3"
	// s3Port is the port of the run's S3 server (scripts/s3-server.sh),
	// apart from the tests' 7411 and 7412.
	s3Port   = 7431
	s3Bucket = "bench-files"
)

// startS3 starts (or reuses) the S3 server of scripts/s3-server.sh, makes
// the run's bucket and starts the gateway on redis with it. A server that
// cannot be had (or, in quick mode, is not built) is a skipped target, with
// its reason; a gateway that does not start with it is an error.
func (d *deployment) startS3(ctx context.Context, root string, quick bool, log io.Writer) error {
	if d.redis == nil {
		d.blobsSkipped = "no Redis Cluster: " + d.redisSkipped
		return nil
	}
	if quick && !isExecutable(filepath.Join(root, ".cache", "s3", "versitygw")) {
		d.blobsSkipped = "versitygw not built (quick mode does not build it: scripts/s3-server.sh build)"
		fmt.Fprintf(log, "s3: skipped: %s\n", d.blobsSkipped)
		return nil
	}
	_, err := s3test.Run("status", s3Port)
	running := err == nil
	out, err := s3test.Run("start", s3Port)
	if err == nil {
		d.s3Endpoint, d.s3Owned = strings.TrimSpace(out), !running
		err = makeBucket(ctx, d.s3Endpoint)
	}
	if err != nil {
		d.blobsSkipped = "S3 server not available: " + oneLine(err.Error(), 200)
		fmt.Fprintf(log, "s3: skipped: %s\n", d.blobsSkipped)
		return nil
	}
	fmt.Fprintf(log, "s3: versitygw on %s\n", d.s3Endpoint)
	return d.startBlobsGateway()
}

// makeBucket makes the run's bucket, unless it is there from an earlier run.
func makeBucket(ctx context.Context, endpoint string) error {
	c, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s3test.AccessKey, s3test.SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ok, err := c.BucketExists(ctx, s3Bucket)
	if err != nil || ok {
		return err
	}
	return c.MakeBucket(ctx, s3Bucket, minio.MakeBucketOptions{})
}

// startBlobsGateway starts the gateway on redis with object storage, if
// there is an S3 server.
func (d *deployment) startBlobsGateway() error {
	if d.s3Endpoint == "" {
		return nil
	}
	prefix := fmt.Sprintf("bench-s3:%d:", os.Getpid()) // apart from the redis gateway's keys
	gc := scenario.GatewayConfig{Redis: d.redis, RedisPrefix: prefix,
		Blobs: &scenario.Blobs{Endpoint: d.s3Endpoint, Bucket: s3Bucket, Prefix: fmt.Sprintf("bench-%d/", os.Getpid())}}
	var err error
	d.blobsGw, d.blobsGwAddr, err = d.launchGateway(blobsTarget, gc,
		scenario.BlobsAccessEnv+"="+s3test.AccessKey, scenario.BlobsSecretEnv+"="+s3test.SecretKey)
	return err
}

// stopS3 stops the S3 server, if this run started it.
func (d *deployment) stopS3(log io.Writer) {
	if !d.s3Owned {
		return
	}
	if err := s3test.StopPort(s3Port); err != nil {
		fmt.Fprintf(log, "warning: cannot stop the S3 server: %v\n", err)
	}
}

// blobsTargetOf returns the gateway with object storage as a target,
// skipped with its reason when there is none.
func (d *deployment) blobsTargetOf() target {
	t := target{Target: scenario.Target{Name: blobsTarget, Kind: scenario.Gateway}, skipped: d.blobsSkipped, stateful: true}
	if d.blobsGw != nil {
		t.URL, t.pids = "http://"+d.blobsGwAddr, []int{d.blobsGw.pid()}
	}
	return t
}
