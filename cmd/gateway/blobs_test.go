package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/minio/minio-go/v7"
	"github.com/openai/openai-go/v3"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/store/s3test"
)

// Tests of gateway processes whose file bytes are in object storage (store.blobs): a real
// S3 server (versitygw, see store/s3test) beside the real Redis Cluster.

// gatewayS3 is the S3 server of this package's tests; TestMain stops it.
var gatewayS3 = s3test.Server{Port: 7413}

// The environment variables the configs name for the S3 keys.
const (
	s3AccessEnv = "GATEWAY_TEST_S3_ACCESS"
	s3SecretEnv = "GATEWAY_TEST_S3_SECRET"
)

// blobsSection is the store.blobs section of a config on the bucket of endpoint, indented
// to follow the store section's fields. It sets the key variables for the test.
func blobsSection(t *testing.T, endpoint, bucket string) string {
	t.Setenv(s3AccessEnv, s3test.AccessKey)
	t.Setenv(s3SecretEnv, s3test.SecretKey)
	return fmt.Sprintf(`  blobs:
    engine: s3
    endpoint: %s
    bucket: %s
    region: us-east-1
    prefix: files/
    access_key_env: %s
    secret_key_env: %s
    path_style: true
`, endpoint, bucket, s3AccessEnv, s3SecretEnv)
}

// bucketObjects returns the objects of bucket by name, with their bytes.
func bucketObjects(t *testing.T, endpoint, bucket string) map[string][]byte {
	t.Helper()
	c := s3test.Client(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string][]byte{}
	for _, name := range s3test.Objects(t, endpoint, bucket, "") {
		o, err := c.GetObject(ctx, bucket, name, minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("get object %s: %v", name, err)
		}
		b, err := io.ReadAll(o)
		o.Close()
		if err != nil {
			t.Fatalf("read object %s: %v", name, err)
		}
		out[name] = b
	}
	return out
}

// objectOf returns the bytes of the object of file id, and whether there is one.
func objectOf(objects map[string][]byte, id string) ([]byte, bool) {
	for name, b := range objects {
		if strings.HasSuffix(name, "/"+id) {
			return b, true
		}
	}
	return nil, false
}

// betaFileIDs returns the ids of key's files as g lists them in the beta shape, through
// the openai SDK's pager.
func betaFileIDs(t *testing.T, g *gateway, key string) []string {
	t.Helper()
	var ids []string
	iter := ptr(g.openai(key)).Files.ListAutoPaging(context.Background(), openai.FileListParams{})
	for iter.Next() && len(ids) < 1000 {
		ids = append(ids, iter.Current().ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("beta list on %s: %v", g.base, err)
	}
	return ids
}

// bigPNG is a PNG head followed by n random bytes: a file whose type the gateway takes
// from its first bytes, large enough to be put in several parts.
func bigPNG(t *testing.T, n int) []byte {
	b := smallPNG(t, 11)
	tail := make([]byte, n)
	rand.Read(tail)
	return append(b, tail...)
}

// TestThreeGatewaysFilesInObjectStorage: three gateway processes on one Redis Cluster and
// one bucket. Two files uploaded on A with the official SDK (one object of one PUT, one of
// a multipart upload) are objects of the bucket holding exactly their bytes, are listed in
// both families' shapes on B and C, and are inlined into a message on B (the upstream
// receives their bytes); their metadata is served on B and C and their content refused as
// not downloadable. Deleted on C, they are 404 in the alpha shape on A, B and C, listed
// nowhere, refused in a message, and their objects are gone from the bucket.
func TestThreeGatewaysFilesInObjectStorage(t *testing.T) {
	addrs := e2eCluster.Addrs(t)
	endpoint := gatewayS3.Endpoint(t)
	bucket := gatewayS3.Bucket(t)
	s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "s1", AlphaKey: upAlpha, BetaKey: upBeta})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	config := redisConfig(t, addrs, s, blobsSection(t, endpoint, bucket))
	nodes := []*gateway{launchRedis(t, config), launchRedis(t, config), launchRedis(t, config)}
	a, b, c := nodes[0], nodes[1], nodes[2]
	ctx := context.Background()
	for _, g := range nodes {
		// The redis engine connects in the background: ready within 30 s.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			status, _, body := do(t, "GET", g.admin+"/readyz", "", nil, "")
			if status == 200 && strings.Contains(body, `"store":"open"`) && strings.Contains(body, `"object_storage":"ok"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz of %s: %d %s", g.base, status, body)
			}
		}
	}

	small, big := smallPNG(t, 5), bigPNG(t, 6<<20) // the part size is 5 MiB
	var ids []string
	for i, data := range [][]byte{small, big} {
		f, err := ptr(a.anthropic(keyA)).Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{
			File: anthropic.File(bytes.NewReader(data), fmt.Sprintf("pic-%d.png", i), "image/png"), Betas: filesBeta})
		if err != nil {
			t.Fatalf("upload %d on A: %v", i, err)
		}
		if f.SizeBytes != int64(len(data)) {
			t.Fatalf("upload %d: size %d, want %d", i, f.SizeBytes, len(data))
		}
		ids = append(ids, f.ID)
	}
	objects := bucketObjects(t, endpoint, bucket)
	for i, data := range [][]byte{small, big} {
		got, ok := objectOf(objects, ids[i])
		if !ok || !bytes.Equal(got, data) {
			t.Fatalf("the object of %s: found %v, %d bytes, want the %d uploaded", ids[i], ok, len(got), len(data))
		}
	}

	for _, g := range []*gateway{b, c} {
		alpha, beta := listFiles(t, g, keyA), betaFileIDs(t, g, keyA)
		for _, id := range ids {
			if !slices.Contains(alpha, id) || !slices.Contains(beta, id) {
				t.Fatalf("%s lists %v (alpha) and %v (beta), without %s uploaded on A", g.base, alpha, beta, id)
			}
		}
		if other := betaFileIDs(t, g, keyB); len(other) != 0 {
			t.Fatalf("another key lists %v on %s", other, g.base)
		}
		for i, id := range ids {
			m, err := ptr(g.anthropic(keyA)).Beta.Files.GetMetadata(ctx, id, anthropic.BetaFileGetMetadataParams{Betas: filesBeta})
			if err != nil || m.ID != id || m.SizeBytes != int64(len([][]byte{small, big}[i])) {
				t.Fatalf("metadata of %s on %s: %+v %v", id, g.base, m, err)
			}
			status, _, body := do(t, "GET", g.base+"/v1/router/alpha/v1/files/"+id+"/content", keyA, nil, "")
			if status != 403 || !strings.Contains(body, `"type":"permission_error"`) {
				t.Fatalf("content of %s on %s: %d %s, want 403 permission_error", id, g.base, status, body)
			}
		}
	}

	s.Reset()
	_, err = ptr(b.anthropic(keyA)).Messages.New(ctx, fileMessage(ids))
	if err != nil {
		t.Fatalf("message with the files on B: %v", err)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests for the message, want 1", len(reqs))
	}
	for i, data := range [][]byte{small, big} {
		if !bytes.Contains(reqs[0].Body, []byte(base64.StdEncoding.EncodeToString(data))) {
			t.Fatalf("file %d was not inlined on B", i)
		}
	}
	if bytes.Contains(reqs[0].Body, []byte("file_svc_")) {
		t.Fatal("a gateway file id reached the upstream")
	}

	for _, id := range ids {
		d, err := ptr(c.anthropic(keyA)).Beta.Files.Delete(ctx, id, anthropic.BetaFileDeleteParams{Betas: filesBeta})
		if err != nil || d.ID != id {
			t.Fatalf("delete %s on C: %+v %v", id, d, err)
		}
	}
	objects = bucketObjects(t, endpoint, bucket)
	for _, id := range ids {
		if _, ok := objectOf(objects, id); ok {
			t.Fatalf("the object of %s is still in the bucket after its delete", id)
		}
	}
	for _, g := range nodes {
		assertFilesGone(t, s, g, ids)
		if strings.Contains(g.stderr.String()+g.stdout.String(), s3test.SecretKey) {
			t.Fatalf("the S3 secret key is in the log of %s", g.base)
		}
	}
}

// fileMessage is a message with an image block for each file id.
func fileMessage(ids []string) anthropic.MessageNewParams {
	blocks := []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock("what are they?")}
	for _, id := range ids {
		blocks = append(blocks, anthropic.NewImageBlock(anthropic.FileImageSourceParam{FileID: id}))
	}
	return anthropic.MessageNewParams{Model: "chat-model", MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(blocks...)}}
}

// assertFilesGone checks that g serves none of the deleted files: metadata, content and
// delete are 404 not_found_error in the alpha shape, neither list shows them, and a message
// that references one is 404 before anything goes upstream.
func assertFilesGone(t *testing.T, s *sim.Server, g *gateway, ids []string) {
	t.Helper()
	for _, id := range ids {
		for _, call := range []struct{ method, path string }{
			{"GET", "/v1/files/" + id}, {"GET", "/v1/files/" + id + "/content"}, {"DELETE", "/v1/files/" + id},
		} {
			status, _, body := do(t, call.method, g.base+"/v1/router/alpha"+call.path, keyA, nil, "")
			if status != 404 || !strings.HasPrefix(body, `{"type":"error","error":{"type":"not_found_error"`) {
				t.Fatalf("%s %s on %s after the delete: %d %s", call.method, call.path, g.base, status, body)
			}
		}
		if _, err := ptr(g.anthropic(keyA)).Beta.Files.GetMetadata(context.Background(), id,
			anthropic.BetaFileGetMetadataParams{Betas: filesBeta}); sdkStatus(err) != 404 {
			t.Fatalf("the SDK's metadata of deleted %s on %s: %v, want 404", id, g.base, err)
		}
	}
	alpha, beta := listFiles(t, g, keyA), betaFileIDs(t, g, keyA)
	for _, id := range ids {
		if slices.Contains(alpha, id) || slices.Contains(beta, id) {
			t.Fatalf("%s still lists deleted %s: %v %v", g.base, id, alpha, beta)
		}
	}
	s.Reset()
	_, err := ptr(g.anthropic(keyA)).Messages.New(context.Background(), fileMessage(ids[:1]))
	if sdkStatus(err) != 404 || len(s.Requests()) != 0 {
		t.Fatalf("a message with deleted %s on %s: %v, %d upstream requests", ids[0], g.base, err, len(s.Requests()))
	}
}
