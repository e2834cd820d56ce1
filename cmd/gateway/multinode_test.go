package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/store/redistest"
)

// Tests of several gateway processes on one real Redis Cluster: the state one node
// writes is served by every node, and a Redis that is down or failing over costs clean
// 503s, never a lost acknowledged write.

// e2eCluster is the cluster of the three-node test; downPort is the first port of the
// cluster the down-and-back and failover tests start and stop themselves.
var e2eCluster = redistest.Cluster{Port: 7121}

const downPort = 7131

var redisPrefixSeq int

// redisConfig writes a config of the redis engine on addrs in front of s and returns
// its path. Each config takes a key prefix of its own; extra is added to the store section.
func redisConfig(t *testing.T, addrs []string, s *sim.Server, extra string) string {
	t.Helper()
	redisPrefixSeq++
	quoted := make([]string, len(addrs))
	for i, a := range addrs {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	cfg := fmt.Sprintf(`store:
  engine: redis
  addrs: [%s]
  key_prefix: "gw%d:%d:"
%skeys:
  - {id: team-a, key: %s}
  - {id: team-b, key: %s}
upstreams:
  - {name: s1-beta, family: beta, base_url: "http://%s/v1", api_key: %s}
  - {name: s1-alpha, family: alpha, base_url: "http://%s", api_key: %s}
models:
  - {id: chat-model, upstreams: [s1-beta, s1-alpha]}
`, strings.Join(quoted, ", "), os.Getpid(), redisPrefixSeq, extra, keyA, keyB, s.Addr(), upBeta, s.Addr(), upAlpha)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// launchRedis runs a gateway on config with JSON logs and an admin listener.
func launchRedis(t *testing.T, config string) *gateway {
	t.Helper()
	return launch(t, "", []string{"-config", config, "-listen", "127.0.0.1:0", "-log-format", "json",
		"-access-log", "off", "-admin-listen", "127.0.0.1:0"}, nil)
}

func (g *gateway) openai(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.base+"/v1/router/beta/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func (g *gateway) anthropic(key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(g.base+"/v1/router/alpha"), aoption.WithAuthToken(key),
		aoption.WithAPIKey(""), aoption.WithMaxRetries(0))
}

// sdkStatus is the HTTP status of an SDK's error, 0 when it is not one.
func sdkStatus(err error) int {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.StatusCode
	}
	return 0
}

var filesBeta = []anthropic.AnthropicBeta{anthropic.AnthropicBetaFilesAPI2025_04_14}

// TestThreeGatewaysOneCluster: a response created on A is retrieved, continued without
// model, its input items listed and input tokens counted, and deleted on B and C, and is
// 404 for another key everywhere; a file uploaded on
// A is listed on B, inlined into a message on B, deleted on C and gone on A.
func TestThreeGatewaysOneCluster(t *testing.T) {
	addrs := e2eCluster.Addrs(t)
	s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "s1", AlphaKey: upAlpha, BetaKey: upBeta})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	config := redisConfig(t, addrs, s, "")
	nodes := []*gateway{launchRedis(t, config), launchRedis(t, config), launchRedis(t, config)}
	a, b, c := nodes[0], nodes[1], nodes[2]
	ctx := context.Background()

	first, err := ptr(a.openai(keyA)).Responses.New(ctx, responses.ResponseNewParams{Model: "chat-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range nodes {
		if got, err := ptr(g.openai(keyA)).Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); err != nil || got.ID != first.ID {
			t.Fatalf("node %d: retrieve %s: %v", i, first.ID, err)
		}
		if _, err := ptr(g.openai(keyB)).Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); sdkStatus(err) != 404 {
			t.Fatalf("node %d: another key retrieves %s: %v, want 404", i, first.ID, err)
		}
	}
	second := continueOn(t, b, first.ID)
	third := continueOn(t, c, second.ID)
	items, err := ptr(c.openai(keyA)).Responses.InputItems.List(ctx, first.ID, responses.InputItemListParams{Limit: openai.Int(10)})
	if err != nil || len(items.Data) == 0 {
		t.Fatalf("input items of A's response on C: %+v %v", items, err)
	}
	count, err := ptr(b.openai(keyA)).Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{
		PreviousResponseID: openai.String(third.ID),
		Input:              responses.InputTokenCountParamsInputUnion{OfString: openai.String("how many?")},
	})
	if err != nil || count.InputTokens <= 0 {
		t.Fatalf("input tokens after C's response on B: %+v %v", count, err)
	}
	if err := ptr(b.openai(keyA)).Responses.Delete(ctx, first.ID); err != nil {
		t.Fatalf("delete on B: %v", err)
	}
	if err := ptr(c.openai(keyA)).Responses.Delete(ctx, third.ID); err != nil {
		t.Fatalf("delete on C: %v", err)
	}
	for i, g := range nodes {
		for _, id := range []string{first.ID, third.ID} {
			if _, err := ptr(g.openai(keyA)).Responses.Get(ctx, id, responses.ResponseGetParams{}); sdkStatus(err) != 404 {
				t.Fatalf("node %d: deleted %s retrieved: %v, want 404", i, id, err)
			}
		}
	}
	sharedFiles(t, s, a, b, c)
}

func ptr[T any](v T) *T { return &v }

// continueOn continues prev on g without a model and returns the new response.
func continueOn(t *testing.T, g *gateway, prev string) *responses.Response {
	t.Helper()
	r, err := ptr(g.openai(keyA)).Responses.New(context.Background(), responses.ResponseNewParams{
		PreviousResponseID: openai.String(prev),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")},
	})
	if err != nil || r.PreviousResponseID != prev {
		t.Fatalf("continue %s on %s: %+v %v", prev, g.base, r, err)
	}
	return r
}

// sharedFiles: uploaded on a, listed and inlined on b, deleted on c, gone on a.
func sharedFiles(t *testing.T, s *sim.Server, a, b, c *gateway) {
	ctx := context.Background()
	png := smallPNG(t, 7)
	f, err := ptr(a.anthropic(keyA)).Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{
		File: anthropic.File(bytes.NewReader(png), "cat.png", "image/png"), Betas: filesBeta})
	if err != nil {
		t.Fatal(err)
	}
	if ids := listFiles(t, b, keyA); !slices.Contains(ids, f.ID) {
		t.Fatalf("B lists %v, without %s uploaded on A", ids, f.ID)
	}
	if ids := listFiles(t, b, keyB); slices.Contains(ids, f.ID) {
		t.Fatalf("another key lists %s", f.ID)
	}
	s.Reset()
	_, err = ptr(b.anthropic(keyA)).Messages.New(ctx, anthropic.MessageNewParams{Model: "chat-model", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("what is it?"),
			anthropic.NewImageBlock(anthropic.FileImageSourceParam{FileID: f.ID}))}})
	if err != nil {
		t.Fatalf("message with the file on B: %v", err)
	}
	if r := s.Requests(); len(r) != 1 || !bytes.Contains(r[0].Body, []byte(base64.StdEncoding.EncodeToString(png))) {
		t.Fatalf("the file was not inlined on B: %d upstream requests", len(r))
	}
	if _, err := ptr(c.anthropic(keyA)).Beta.Files.Delete(ctx, f.ID, anthropic.BetaFileDeleteParams{Betas: filesBeta}); err != nil {
		t.Fatalf("delete on C: %v", err)
	}
	if _, err := ptr(a.anthropic(keyA)).Beta.Files.GetMetadata(ctx, f.ID, anthropic.BetaFileGetMetadataParams{Betas: filesBeta}); sdkStatus(err) != 404 {
		t.Fatalf("deleted file on A: %v, want 404", err)
	}
	if ids := listFiles(t, a, keyA); slices.Contains(ids, f.ID) {
		t.Fatalf("A still lists the deleted %s", f.ID)
	}
}

// listFiles returns the ids of key's files, newest first, as g lists them.
func listFiles(t *testing.T, g *gateway, key string) []string {
	t.Helper()
	var ids []string
	iter := ptr(g.anthropic(key)).Beta.Files.ListAutoPaging(context.Background(), anthropic.BetaFileListParams{Betas: filesBeta})
	for iter.Next() && len(ids) < 1000 {
		ids = append(ids, iter.Current().ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("list on %s: %v", g.base, err)
	}
	return ids
}

// downAddrs are the addresses of the cluster on downPort, whether it runs or not.
func downAddrs() []string {
	var addrs []string
	for i := range 6 {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", downPort+i))
	}
	return addrs
}

// TestRedisDownAndBack starts a gateway while its Redis Cluster is down: it serves chat,
// answers a retrieve 503 with Retry-After in the beta shape, and /readyz says why it is not
// ready; once the cluster is up it serves responses without a restart.
func TestRedisDownAndBack(t *testing.T) {
	e2eCluster.Addrs(t) // skips (or fails in CI) when redis cannot be had
	if err := redistest.StopPort(downPort); err != nil {
		t.Fatal(err)
	}
	s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "s1", AlphaKey: upAlpha, BetaKey: upBeta, NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// g has credentials the cluster does not take; g2 has none, as the cluster.
	g := launchRedis(t, redisConfig(t, downAddrs(), s, "  username: gw-nobody\n  password: topsecret-redis-pw\n  dial_timeout: 1s\n"))
	g2 := launchRedis(t, redisConfig(t, downAddrs(), s, "  dial_timeout: 1s\n"))
	for _, g := range []*gateway{g, g2} {
		assertStoreDown(t, g)
	}
	if _, err := redistest.Run("start", downPort); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redistest.StopPort(downPort) })
	eventually(t, func() string { return "ready once redis is up" }, func() bool {
		status, _, _ := do(t, "GET", g2.admin+"/readyz", "", nil, "")
		return status == 200
	})
	r, err := ptr(g2.openai(keyA)).Responses.New(context.Background(), responses.ResponseNewParams{Model: "chat-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptr(g2.openai(keyA)).Responses.Get(context.Background(), r.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatal(err)
	}
	// The cluster has no user gw-nobody: g's readiness says its credentials are refused, in words.
	eventually(t, func() string { return "a reason about the credentials" }, func() bool {
		_, _, body := do(t, "GET", g.admin+"/readyz", "", nil, "")
		return strings.Contains(body, "credentials")
	})
	_, _, body := do(t, "GET", g.admin+"/readyz", "", nil, "")
	_, _, page := do(t, "GET", g.admin+"/status", "", nil, "")
	for _, text := range []string{body, page, g.stderr.String(), g.stdout.String()} {
		if strings.Contains(text, "topsecret-redis-pw") {
			t.Fatalf("the redis password leaked: %s", text)
		}
	}
}

// assertStoreDown checks g while its Redis is down: chat serves, a retrieve is a 503 with
// Retry-After in the beta shape, /readyz is not ready and says why.
func assertStoreDown(t *testing.T, g *gateway) {
	t.Helper()
	if status := g.chat(keyA, "chat-model"); status != 200 {
		t.Fatalf("chat with redis down: %d", status)
	}
	status, h, body := do(t, "GET", g.base+"/v1/router/beta/v1/responses/resp_x", keyA, nil, "")
	if status != 503 || h.Get("Retry-After") == "" || !strings.Contains(body, `"type":"server_error"`) {
		t.Fatalf("retrieve with redis down: %d retry-after %q %s", status, h.Get("Retry-After"), body)
	}
	status, _, body = do(t, "GET", g.admin+"/readyz", "", nil, "")
	if status != 503 || !strings.Contains(body, `"store":"unavailable"`) || !strings.Contains(body, "refused the connection") {
		t.Fatalf("/readyz with redis down: %d %s", status, body)
	}
}
