package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/sim"
)

// BenchmarkImageAnswer4MiB relays a generateContent answer carrying a 4 MiB
// image (about 5.6 MB of JSON) to 32 concurrent clients, first straight from
// the simulator ("direct"), then through the gateway, in the same process
// run. The simulators run in a child process. Each run reports its
// throughput (MB/s) and the peak RSS of this process during the run
// (peak-RSS-MiB: clients, plus the gateway in the gateway run; measured from
// a reset of VmHWM after returning free memory to the OS); the gateway run
// also reports both as ratios to the direct run (x-direct-speed,
// x-direct-rss). Clients stream the answers into a counter, so they hold no
// answer whole.
//
//	go test ./proxy/ -run '^$' -bench ImageAnswer4MiB -benchtime 200x
func BenchmarkImageAnswer4MiB(b *testing.B) {
	const imageBytes = 4 << 20
	const concurrency = 32
	sims, gwAddr := startImageBench(b)
	direct := imageBenchTarget{
		addr: sims[0],
		path: "/v1beta/models/image-model:generateContent",
		hdrs: [][2]string{{"x-goog-api-key", "up-gamma"}},
	}
	viaGateway := imageBenchTarget{
		addr: gwAddr,
		path: "/v1/router/gamma/v1beta/models/image-model:generateContent",
		hdrs: [][2]string{{"x-gamma-api-key", keyA}},
	}
	for _, t := range []*imageBenchTarget{&direct, &viaGateway} {
		t.hdrs = append(t.hdrs, [2]string{"x-sim-image-bytes", strconv.Itoa(imageBytes)})
		t.client = &fasthttp.HostClient{Addr: t.addr, MaxConns: 2 * concurrency,
			StreamResponseBody: true, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	}
	answerLen := direct.answerLen(b)
	if got := viaGateway.answerLen(b); got != answerLen {
		b.Fatalf("the gateway's answer has %d bytes, the simulator's %d", got, answerLen)
	}

	var directRate, directRSS float64
	b.Run("direct", func(b *testing.B) {
		directRate, directRSS = direct.run(b, answerLen, concurrency)
	})
	b.Run("gateway", func(b *testing.B) {
		rate, rss := viaGateway.run(b, answerLen, concurrency)
		if directRate > 0 {
			b.ReportMetric(rate/directRate, "x-direct-speed")
			b.ReportMetric(rss/directRSS, "x-direct-rss")
		}
	})
}

// startImageBench starts two simulators in a child process (so that the
// memory measured here is the gateway's and the clients', not the
// simulators') and a gateway in front of them, with the end-to-end tests'
// config.
func startImageBench(b *testing.B) ([]string, string) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestImageBenchSimProcess$")
	cmd.Env = append(os.Environ(), imageBenchSimEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close() // the child exits when its stdin closes
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("simulator process: %v", err)
	}
	sims := strings.Fields(line)
	if len(sims) != 2 {
		b.Fatalf("simulator process said %q", line)
	}
	return sims, startBenchGateway(b, sims, Options{})
}

const imageBenchSimEnv = "MODELGATE_IMAGE_BENCH_SIM"

// TestImageBenchSimProcess is not a test: it is the child process of
// BenchmarkImageAnswer4MiB, serving two simulators until its stdin closes.
func TestImageBenchSimProcess(t *testing.T) {
	if os.Getenv(imageBenchSimEnv) == "" {
		t.Skip("the simulator process of BenchmarkImageAnswer4MiB")
	}
	var addrs []string
	for _, name := range []string{"d1", "d2"} {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: name, GammaKey: "up-gamma", NoRecord: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		addrs = append(addrs, s.Addr())
	}
	fmt.Println(strings.Join(addrs, " "))
	io.Copy(io.Discard, os.Stdin)
}

type imageBenchTarget struct {
	addr, path string
	hdrs       [][2]string
	client     *fasthttp.HostClient
}

// do sends one request and streams the answer into a byte counter.
func (t *imageBenchTarget) do(req *fasthttp.Request, resp *fasthttp.Response) (int, error) {
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://" + t.addr + t.path)
	for _, h := range t.hdrs {
		req.Header.Set(h[0], h[1])
	}
	req.Header.SetContentType("application/json")
	req.SetBodyString(gammaImageBody)
	if err := t.client.Do(req, resp); err != nil {
		return 0, err
	}
	if resp.StatusCode() != 200 {
		return 0, fmt.Errorf("status %d: %.200s", resp.StatusCode(), resp.Body())
	}
	var n byteCounter
	err := resp.BodyWriteTo(&n)
	resp.CloseBodyStream()
	return int(n), err
}

func (t *imageBenchTarget) answerLen(b *testing.B) int {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	n, err := t.do(req, resp)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// run measures b.N answers over concurrency connections and returns the
// throughput in answers per second and the peak RSS in MiB.
func (t *imageBenchTarget) run(b *testing.B, answerLen, concurrency int) (rate, rssMiB float64) {
	b.ReportAllocs()
	b.SetBytes(int64(answerLen))
	b.SetParallelism((concurrency + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	debug.FreeOSMemory()
	resetPeakRSS(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for pb.Next() {
			n, err := t.do(req, resp)
			if err == nil && n != answerLen {
				err = fmt.Errorf("answer of %d bytes, want %d", n, answerLen)
			}
			if err != nil {
				b.Error(err)
				return
			}
			req.Reset()
			resp.Reset()
		}
	})
	b.StopTimer()
	rate = float64(b.N) / b.Elapsed().Seconds()
	rssMiB = float64(peakRSS(b)) / (1 << 20)
	b.ReportMetric(rssMiB, "peak-RSS-MiB")
	return rate, rssMiB
}

type byteCounter int

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}

// resetPeakRSS sets the process's VmHWM to its current RSS (Linux).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// peakRSS returns the process's VmHWM in bytes (Linux).
func peakRSS(b *testing.B) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	_, rest, ok := bytes.Cut(status, []byte("VmHWM:"))
	if !ok {
		b.Fatal("no VmHWM in /proc/self/status")
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(line), []byte("kB")))), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return kb << 10
}
