package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sync"
	"testing"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/store/redistest"

	"github.com/redis/rueidis"
)

// failoverLog is what the clients of TestGatewayRedisFailover were answered.
type failoverLog struct {
	mu        sync.Mutex
	responses []string       // ids answered 200
	files     map[string]int // ids answered 200 → size
	clean503  int            // 503s in the family's shape with Retry-After
	bad       []string       // any other answer
}

func (l *failoverLog) acked() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.responses), len(l.files)
}

// record files one answer: a 200 through ok, a clean 503 counted, anything else kept.
func (l *failoverLog) record(what string, status int, h http.Header, body []byte, err error, shape string, ok func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.bad = append(l.bad, fmt.Sprintf("%s: %v", what, err))
	case status == 200:
		ok()
	case status == 503 && h.Get("Retry-After") != "" && bytes.Contains(body, []byte(shape)):
		l.clean503++
	default:
		l.bad = append(l.bad, fmt.Sprintf("%s: %d %s", what, status, body))
	}
}

// post sends one request to g and returns the answer.
func post(g *gateway, path, contentType string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequest("POST", g.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// createResponses creates responses through g until stop closes, at most n.
func createResponses(g *gateway, n int, stop <-chan struct{}, log *failoverLog) {
	for range n {
		select {
		case <-stop:
			return
		default:
		}
		status, h, body, err := post(g, "/v1/router/beta/v1/responses", "application/json",
			[]byte(`{"model":"chat-model","input":"hello"}`))
		var r struct {
			ID string `json:"id"`
		}
		log.record("create", status, h, body, err, `"type":"server_error"`, func() {
			if json.Unmarshal(body, &r) == nil && r.ID != "" {
				log.responses = append(log.responses, r.ID)
			} else {
				log.bad = append(log.bad, "create: 200 without an id: "+string(body))
			}
		})
	}
}

// uploadFiles uploads small images through g until stop closes, at most n.
func uploadFiles(t *testing.T, g *gateway, n int, stop <-chan struct{}, log *failoverLog) {
	for i := range n {
		select {
		case <-stop:
			return
		default:
		}
		data := smallPNG(t, i)
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("file", fmt.Sprintf("f-%d.png", i))
		fw.Write(data)
		mw.Close()
		status, h, resp, err := post(g, "/v1/router/alpha/v1/files", mw.FormDataContentType(), body.Bytes())
		var f struct {
			ID string `json:"id"`
		}
		log.record("upload", status, h, resp, err, `"type":"error"`, func() {
			if json.Unmarshal(resp, &f) == nil && f.ID != "" {
				log.files[f.ID] = len(data)
			} else {
				log.bad = append(log.bad, "upload: 200 without an id: "+string(resp))
			}
		})
	}
}

// TestGatewayRedisFailover kills (SIGKILL) the Redis master that holds acknowledged
// records while clients keep creating responses and uploading files through the gateway.
// After the failover every response and file the gateway answered 200 for is served, and
// every call that failed got a clean 503 in its family's shape with Retry-After.
func TestGatewayRedisFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a Redis master: not in -short")
	}
	addrs, path := failoverSetup(t)
	g := launchRedis(t, path)
	prefix := prefixOf(t, path)

	log := &failoverLog{files: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { createResponses(g, 20000, stop, log) })
	}
	wg.Go(func() { uploadFiles(t, g, 5000, stop, log) })
	eventually(t, func() string { return "first acknowledged writes" }, func() bool {
		r, f := log.acked()
		return r >= 30 && f >= 5
	})
	log.mu.Lock()
	first := log.responses[0]
	log.mu.Unlock()
	c := failOver(t, addrs, prefix+"r:"+first)
	r0, f0 := log.acked()
	eventually(t, func() string { return "writes after the failover" }, func() bool {
		r, f := log.acked()
		return r >= r0+30 && f >= f0+5
	})
	close(stop)
	wg.Wait()
	// Reads are checked once every node sees the cluster whole: the node that rejoined may
	// answer CLUSTERDOWN until it has the new configuration.
	eventually(t, func() string { return "every node sees the cluster ok" }, func() bool { return redistest.AllOK(c) })
	checkAcked(t, g, log)
}

// failoverSetup starts the cluster on downPort with a node timeout of a second, so that a
// replica takes over a killed master within seconds, and a simulator, and writes a Redis
// config for both whose writes wait for one replica. It returns the cluster's addresses
// and the config's path.
func failoverSetup(t *testing.T) (addrs []string, path string) {
	t.Helper()
	e2eCluster.Addrs(t) // skips (or fails in CI) when redis cannot be had
	addrs = redistest.StartPort(t, downPort, "REDIS_CLUSTER_NODE_TIMEOUT=1000")
	s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "s1", AlphaKey: upAlpha, BetaKey: upBeta, NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return addrs, redisConfig(t, addrs, s, "  replicas: 1\n  wait_timeout: 500ms\n  command_timeout: 2s\n")
}

// failOver kills (SIGKILL) the master of the cluster on downPort that holds key, waits
// for the cluster to be ok without it, and starts the killed node again: it rejoins as a
// replica, so that replicas: 1 can be met on its slots again. It returns a client of the
// cluster.
func failOver(t *testing.T, addrs []string, key string) rueidis.Client {
	t.Helper()
	victim := redistest.KillMasterOf(t, downPort, addrs, key)
	t.Logf("killed the master on port %d, which holds %s", victim, key)
	c := redistest.Client(t, addrs)
	eventually(t, func() string { return "failover" }, func() bool { return redistest.OK(c, victim) })
	if _, err := redistest.Run("start", downPort, "REDIS_CLUSTER_NODE_TIMEOUT=1000"); err != nil {
		t.Fatal(err)
	}
	return c
}

// prefixOf reads the key prefix of a config written by redisConfig.
func prefixOf(t *testing.T, path string) string {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Store.KeyPrefix
}

// checkAcked checks that every acknowledged response and file is served.
func checkAcked(t *testing.T, g *gateway, log *failoverLog) {
	t.Helper()
	if len(log.bad) > 0 {
		t.Fatalf("%d calls got another answer than 200 or a clean 503, the first: %s", len(log.bad), log.bad[0])
	}
	for _, id := range log.responses {
		if status, _, body := do(t, "GET", g.base+"/v1/router/beta/v1/responses/"+id, keyA, nil, ""); status != 200 {
			t.Fatalf("acknowledged response %s after the failover: %d %s", id, status, body)
		}
	}
	for id, size := range log.files {
		status, _, body := do(t, "GET", g.base+"/v1/router/alpha/v1/files/"+id, keyA, nil, "")
		var f struct {
			SizeBytes int `json:"size_bytes"`
		}
		json.Unmarshal([]byte(body), &f)
		if status != 200 || f.SizeBytes != size {
			t.Fatalf("acknowledged file %s after the failover: %d %s", id, status, body)
		}
	}
	t.Logf("acknowledged and served after the failover: %d responses, %d files; %d calls answered a clean 503",
		len(log.responses), len(log.files), log.clean503)
	if log.clean503 == 0 {
		t.Log("no call failed: the failover fell between calls")
	}
}
