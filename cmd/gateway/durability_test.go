package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
)

// durableGateway is a gateway process on a config and store directory that
// outlive it.
type durableGateway struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	config string
}

var listeningRE = regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)

func startDurable(t *testing.T, config string) *durableGateway {
	t.Helper()
	cmd := exec.Command(binary(t), "-config", config, "-listen", "127.0.0.1:0", "-admin-listen", "off")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &durableGateway{t: t, cmd: cmd, config: config}
	t.Cleanup(func() { g.kill() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		g.base = "http://" + a
	case <-time.After(20 * time.Second):
		t.Fatal("gateway did not start listening")
	}
	return g
}

func (g *durableGateway) kill() {
	if g.cmd.ProcessState == nil {
		g.cmd.Process.Signal(syscall.SIGKILL)
		g.cmd.Wait()
	}
}

func (g *durableGateway) do(method, path, contentType string, body io.Reader, key string) (int, []byte, error) {
	req, err := http.NewRequest(method, g.base+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// durabilities are the store.durability levels; every kill -9 test runs at each.
var durabilities = []string{"process", "machine"}

func durableConfig(t *testing.T, durability string) string {
	t.Helper()
	var addrs []string
	for _, n := range []string{"d1", "d2"} {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: n, BetaKey: "up-beta", AlphaKey: "up-alpha", NoRecord: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		addrs = append(addrs, s.Addr())
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
store: {path: %q, durability: %s}
keys: [{id: team-a, key: key-a}]
upstreams:
  - {name: d1, family: beta, base_url: "http://%s/v1", api_key: up-beta}
  - {name: d2, family: beta, base_url: "http://%s/v1", api_key: up-beta}
models: [{id: chat-model, upstreams: [d1, d2]}]
`, filepath.Join(dir, "data"), durability, addrs[0], addrs[1])
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Responses creates race a kill -9 at each durability level: every record
// acknowledged before it is there after a restart, and the response can be
// retrieved and continued.
func TestResponsesSurviveKill9(t *testing.T) {
	for _, d := range durabilities {
		t.Run(d, func(t *testing.T) { testResponsesSurviveKill9(t, d) })
	}
}

func testResponsesSurviveKill9(t *testing.T, durability string) {
	config := durableConfig(t, durability)
	g := startDurable(t, config)
	const enough = 40
	var mu sync.Mutex
	var acked []string
	reached := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				status, body, err := g.do("POST", "/v1/router/beta/v1/responses", "application/json",
					strings.NewReader(`{"model":"chat-model","input":"remember me"}`), "key-a")
				if err != nil {
					return // the gateway was killed
				}
				var created struct{ ID string }
				if status != 200 || json.Unmarshal(body, &created) != nil || created.ID == "" {
					t.Errorf("create: %d %s", status, body)
					return
				}
				mu.Lock()
				acked = append(acked, created.ID)
				if len(acked) == enough {
					close(reached)
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Error("fewer than 40 creates were acknowledged in 60 s")
	}
	g.kill()
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no create was acknowledged")
	}

	g = startDurable(t, config)
	for _, id := range acked {
		status, body, err := g.do("GET", "/v1/router/beta/v1/responses/"+id, "", nil, "key-a")
		if err != nil || status != 200 {
			t.Fatalf("retrieve %s after kill -9 (%d acknowledged): %d %s %v", id, len(acked), status, body, err)
		}
	}
	status, body, err := g.do("POST", "/v1/router/beta/v1/responses", "application/json",
		strings.NewReader(`{"previous_response_id":"`+acked[len(acked)-1]+`","input":"and now?"}`), "key-a")
	if err != nil || status != 200 {
		t.Fatalf("continue after kill -9: %d %s %v", status, body, err)
	}
}

func smallPNG(t *testing.T, seed int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	for i := range img.Pix {
		img.Pix[i] = byte(i*7 + seed)
	}
	img.Set(0, 0, color.RGBA{byte(seed), 1, 2, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Uploads race a kill -9 at each durability level: every acknowledged file is
// intact after the restart, and no partial file is visible.
func TestUploadsSurviveKill9(t *testing.T) {
	for _, d := range durabilities {
		t.Run(d, func(t *testing.T) { testUploadsSurviveKill9(t, d) })
	}
}

func testUploadsSurviveKill9(t *testing.T, durability string) {
	config := durableConfig(t, durability)
	g := startDurable(t, config)
	type acked struct {
		id   string
		size int
	}
	var mu sync.Mutex
	var got []acked
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				data := smallPNG(t, w*1000+i)
				var body bytes.Buffer
				mw := multipart.NewWriter(&body)
				fw, _ := mw.CreateFormFile("file", fmt.Sprintf("f-%d-%d.png", w, i))
				fw.Write(data)
				mw.Close()
				status, resp, err := g.do("POST", "/v1/router/alpha/v1/files", mw.FormDataContentType(), &body, "key-a")
				if err != nil {
					return // the gateway was killed
				}
				if status != 200 {
					t.Errorf("upload: %d %s", status, resp)
					return
				}
				var f struct {
					ID        string `json:"id"`
					SizeBytes int    `json:"size_bytes"`
				}
				json.Unmarshal(resp, &f)
				mu.Lock()
				got = append(got, acked{f.ID, len(data)})
				mu.Unlock()
			}
		}(w)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 40 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.kill()
	close(stop)
	wg.Wait()
	if len(got) == 0 {
		t.Fatal("no upload was acknowledged")
	}

	g = startDurable(t, config)
	for _, a := range got {
		status, body, err := g.do("GET", "/v1/router/alpha/v1/files/"+a.id, "", nil, "key-a")
		if err != nil || status != 200 {
			t.Fatalf("acknowledged file %s after kill -9: %d %s %v", a.id, status, body, err)
		}
		var f struct {
			SizeBytes int `json:"size_bytes"`
		}
		json.Unmarshal(body, &f)
		if f.SizeBytes != a.size {
			t.Fatalf("file %s: %d bytes, uploaded %d", a.id, f.SizeBytes, a.size)
		}
	}
	// Everything listed is complete: as many files as acknowledged, plus at
	// most the uploads in flight when the process died.
	status, body, err := g.do("GET", "/v1/router/alpha/v1/files?limit=100", "", nil, "key-a")
	if err != nil || status != 200 {
		t.Fatalf("list: %d %s %v", status, body, err)
	}
	var list struct {
		Data []struct {
			ID        string `json:"id"`
			SizeBytes int    `json:"size_bytes"`
		} `json:"data"`
		NextPage *string `json:"next_page"`
	}
	json.Unmarshal(body, &list)
	for _, f := range list.Data {
		if f.SizeBytes <= 0 {
			t.Fatalf("partial file visible: %+v", f)
		}
	}
	if len(list.Data) < len(got) && list.NextPage == nil {
		t.Fatalf("listed %d files, %d were acknowledged", len(list.Data), len(got))
	}
}
