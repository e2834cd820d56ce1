package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/store"
)

// BenchmarkFilesUpload8MiB uploads an 8 MiB PNG through the gateway over loopback, in the
// order the SDKs send the form (file first) and with expires_in_seconds first; both stream
// straight into the store. Each file is deleted after its upload, outside the timing.
func BenchmarkFilesUpload8MiB(b *testing.B) {
	data := testImage(pngHead, maxUploadFileBytes)
	orders := []struct {
		name  string
		parts []formPart
	}{
		{"sdk-order", []formPart{filePart("big.png", "image/png", data), fieldPart("expires_in_seconds", "3600")}},
		{"expires-first", []formPart{fieldPart("expires_in_seconds", "3600"), filePart("big.png", "image/png", data)}},
	}
	for _, o := range orders {
		b.Run(o.name, func(b *testing.B) {
			e := newBenchEnv(b)
			body, ct := multipartBody(o.parts...)
			b.SetBytes(maxUploadFileBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				req, _ := http.NewRequest("POST", e.base+"/v1/router/alpha/v1/files", bytes.NewReader(body))
				req.Header.Set("Content-Type", ct)
				req.Header.Set("Authorization", "Bearer "+keyA)
				resp, err := filesHTTP.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%d %s", resp.StatusCode, out)
				}
				b.StopTimer()
				deleteAllFiles(b, e)
				b.StartTimer()
			}
		})
	}
}

func deleteAllFiles(b *testing.B, e *testEnv) {
	files, _, err := e.store.ListFiles("team-a", store.ListQuery{Limit: 100})
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range files {
		if err := e.store.DeleteFile("team-a", f.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// newBenchEnv starts the fixture of newEnv for a benchmark or a fuzz target: the
// simulators, a gateway on loopback and a Pebble store in a temporary directory. Its t is
// nil: the helpers that report through e.t are not for it.
func newBenchEnv(b testing.TB) *testEnv {
	b.Helper()
	e := &testEnv{dir: b.TempDir(), logBuf: &syncBuffer{}}
	for _, name := range []string{"d1", "d2"} {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: name, AlphaKey: "up-alpha", BetaKey: "up-beta", GammaKey: "up-gamma"})
		if err != nil {
			b.Fatal(err)
		}
		e.sims = append(e.sims, s)
		b.Cleanup(func() { s.Close() })
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(testConfigYAML, e.sims[0].Addr(), e.sims[1].Addr(), HashKey(keyB))),
		func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	if e.store, err = store.OpenPebble(e.dir, store.PebbleOptions{Logger: quietPebble{}}); err != nil {
		b.Fatal(err)
	}
	if e.gw, err = New(cfg, Options{Store: e.store, Logger: slog.New(slog.NewJSONHandler(e.logBuf, nil))}); err != nil {
		b.Fatal(err)
	}
	if e.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	e.base = "http://" + e.ln.Addr().String()
	e.srv = e.gw.NewServer()
	go e.srv.Serve(e.ln)
	b.Cleanup(e.stop)
	return e
}

// quietPebble drops Pebble's log lines.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// BenchmarkFilesList100 serves a list page of 100 files in process (no network), so that
// -benchmem shows the gateway's allocations: the handler's and the store's.
func BenchmarkFilesList100(b *testing.B) {
	e := newBenchEnv(b)
	for i := range 150 {
		_, err := e.store.PutFile(store.File{Owner: "team-a", Filename: fmt.Sprintf("f%d.png", i), MimeType: "image/png",
			Purpose: filePurpose, Created: e.gw.now()}, bytes.NewReader(testImage(pngHead, 100)), maxUploadFileBytes)
		if err != nil {
			b.Fatal(err)
		}
	}
	h := e.gw.Handler()
	for _, path := range []string{"/v1/router/alpha/v1/files?limit=100", "/v1/router/beta/v1/files?limit=100"} {
		b.Run(strings.Split(path, "/")[3], func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI(path)
			ctx.Request.Header.Set("Authorization", "Bearer "+keyA)
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				h(&ctx)
				if ctx.Response.StatusCode() != 200 || len(ctx.Response.Body()) < 100*100 {
					b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
			b.SetBytes(int64(len(ctx.Response.Body())))
		})
	}
}

// The peak RSS benchmark runs the gateway in a child process (this test binary, running
// TestFilesRSSChild), so that neither the client nor other tests count: the child reports
// its VmHWM after a warm-up and again after rounds of N concurrent 8 MiB uploads.
// peakRSS-B/upload is the growth divided by N: what one concurrent upload costs on top of
// the steady state.
const rssChildEnv = "MODELGATE_FILES_RSS_CHILD"

func BenchmarkFilesUploadPeakRSS(b *testing.B) {
	for _, n := range []int{1, 8, 32} {
		for _, order := range []string{"sdk-order", "expires-first"} {
			b.Run(fmt.Sprintf("%s/uploads=%d", order, n), func(b *testing.B) {
				measurePeakRSS(b, n, order == "expires-first")
			})
		}
	}
}

func measurePeakRSS(b *testing.B, n int, expiresFirst bool) {
	child := exec.Command(os.Args[0], "-test.run=^TestFilesRSSChild$", "-test.count=1")
	child.Env = append(os.Environ(), rssChildEnv+"=1")
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = io.Discard
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	lines := bufio.NewScanner(stdout)
	ask := func(cmd string) []string {
		fmt.Fprintln(stdin, cmd)
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) > 0 && f[0] == "RSS:" {
				return f[1:]
			}
		}
		b.Fatalf("child gave no answer to %s", cmd)
		return nil
	}
	base := ask("ADDR")[0]
	upload := func() {
		var parts []formPart
		file := formPart{name: "file", filename: "big.png", contentType: "image/png"}
		if expiresFirst {
			parts = append(parts, fieldPart("expires_in_seconds", "3600"))
		}
		head, ct := multipartBody(append(parts, file)...)
		cut := bytes.LastIndex(head, []byte("\r\n--"))
		body := io.MultiReader(bytes.NewReader(head[:cut]), strings.NewReader(pngHead),
			&bigBody{maxUploadFileBytes - int64(len(pngHead))}, bytes.NewReader(head[cut:]))
		req, _ := http.NewRequest("POST", base+"/v1/router/alpha/v1/files", body)
		req.ContentLength = int64(len(head)) + maxUploadFileBytes
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+keyA)
		resp, err := filesHTTP.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Errorf("upload: %d", resp.StatusCode)
		}
	}
	// Warm the pools and bring the store to its steady state: 64 MiB through the
	// memtables, so that the baseline already holds what any upload stream costs.
	for range 8 {
		upload()
	}
	before := ask("MEASURE")
	for b.Loop() {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); upload() }()
		}
		wg.Wait()
	}
	after := ask("MEASURE")
	hwm0, _ := strconv.ParseInt(before[0], 10, 64)
	hwm1, _ := strconv.ParseInt(after[0], 10, 64)
	b.ReportMetric(float64(hwm1-hwm0)*1024/float64(n), "peakRSS-B/upload")
	b.ReportMetric(float64(hwm1)*1024, "peakRSS-B")
}

// TestFilesRSSChild is the gateway process of BenchmarkFilesUploadPeakRSS; it does nothing
// in a normal test run. It answers ADDR with the gateway's base URL and MEASURE with VmHWM
// and VmRSS in kB, on lines that start with "RSS:".
func TestFilesRSSChild(t *testing.T) {
	if os.Getenv(rssChildEnv) == "" {
		t.Skip("the child process of BenchmarkFilesUploadPeakRSS")
	}
	e := newEnv(t, nil)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "ADDR":
			fmt.Println("RSS:", e.base)
		case "MEASURE":
			fmt.Println("RSS:", procStatusKB(t, "VmHWM:"), procStatusKB(t, "VmRSS:"))
		}
	}
}

// procStatusKB reads a field of /proc/self/status, in kB.
func procStatusKB(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
