// Command streammem measures what held SSE streams cost the gateway in
// memory, the gateway alone in its process: it starts the simulator and the
// gateway as child processes (itself, as "sim" and "gw"), opens one stream to
// warm the gateway up, reads the gateway's memory, opens -streams paced
// streams at once (256 opening at a time, as the harness's llm-streams opens
// them), and reads it again once every stream is open: without a collection
// (what the harness's RSS sees) and after two forced ones (what the streams
// hold; a sync.Pool lets go of its items at the second). It prints the
// growth per stream of VmRSS, the heap in use and the stacks in use, and
// what the openings allocated.
//
// With -rounds, the streams are opened again once the last round's have
// ended, and each round's growth is told from before the first, as the
// harness takes its rounds of a size (a process keeps the memory it took):
// the later rounds show what the collector's pacing lets the heap grow to.
//
//	go run ./bench/cmd/streammem -streams 1000 [-rounds 3]
//
// With -hold, the last round's streams are held that long once measured
// (give them events enough to last: -events), and the gateway child serves
// Go's profiles on its admin address meanwhile; with every allocation
// sampled, its heap profile tells what each stream keeps:
//
//	GODEBUG=memprofilerate=1 go run ./bench/cmd/streammem -streams 1000 -events 60 -hold 30s
//	go tool pprof -sample_index=inuse_space -top 'http://127.0.0.1:18603/debug/pprof/heap?gc=1'
//
// The figures of docs/performance.md's "What a burst of openings leaves" are
// its output. It is a measuring tool, not part of the gateway.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // the gateway child's profiles, for -hold
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy"
	"github.com/modelgate/gateway/proxy/config"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "sim" || os.Args[1] == "gw") {
		child(os.Args[1])
		return
	}
	streams := flag.Int("streams", 1000, "paced streams held at once")
	events := flag.Int("events", 8, "events of each stream after its first")
	delay := flag.Duration("delay", time.Second, "pause between a stream's events")
	rounds := flag.Int("rounds", 1, "rounds of streams, each opened once the last one's ended, as the harness's rounds of a size")
	hold := flag.Duration("hold", 0, "how long to hold the last round's streams once measured, for the gateway's profiles")
	flag.Parse()
	if err := run(os.Stdout, *streams, *events, *delay, *rounds, *hold); err != nil {
		log.Fatal(err)
	}
}

// The addresses of the children, on loopback.
const (
	simAddr   = "127.0.0.1:18601"
	gwAddr    = "127.0.0.1:18602"
	adminAddr = "127.0.0.1:18603"
)

func run(w io.Writer, n, events int, delay time.Duration, rounds int, hold time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	raiseFileLimit()
	for _, args := range [][]string{{"sim"}, {"gw"}} {
		cmd := exec.Command(self, args...)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return err
		}
		defer cmd.Process.Kill()
	}
	if err := waitFor(adminAddr); err != nil {
		return err
	}
	if failed := openStreams(1, 3, 10*time.Millisecond, nil); failed > 0 {
		return fmt.Errorf("the warm-up stream failed")
	}
	before, err := memstats(false)
	if err != nil {
		return err
	}
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) / 1024 }
	fmt.Fprintf(w, "%d streams, KiB per stream, from before the first round\n", n)
	var held, collected mem
	for round := 1; round <= rounds; round++ {
		start, err := memstats(false)
		if err != nil {
			return err
		}
		open := make(chan struct{}, n)
		done := make(chan int)
		go func() { done <- openStreams(n, events, delay, open) }()
		for range n {
			<-open
		}
		if held, err = memstats(false); err != nil {
			return err
		}
		if round == rounds {
			if collected, err = memstats(true); err != nil {
				return err
			}
			if hold > 0 {
				fmt.Fprintf(w, "holding the streams %v: profiles at http://%s/debug/pprof/\n", hold, adminAddr)
				time.Sleep(hold)
			}
		}
		if failed := <-done; failed > 0 {
			return fmt.Errorf("%d of %d streams failed", failed, n)
		}
		fmt.Fprintf(w, "round %d, every stream open: VmRSS %.1f, HeapInuse %.1f, StackInuse %.1f; this round allocated %.1f an opening, %d collections\n",
			round, per(before.rss, held.rss), per(before.heap, held.heap), per(before.stack, held.stack),
			per(start.alloc, held.alloc), held.gcs-start.gcs)
	}
	fmt.Fprintf(w, "%-12s %16s %21s\n", "", "no collection", "after two collections")
	fmt.Fprintf(w, "%-12s %16.1f %21.1f\n", "VmRSS", per(before.rss, held.rss), per(before.rss, collected.rss))
	fmt.Fprintf(w, "%-12s %16.1f %21.1f\n", "HeapInuse", per(before.heap, held.heap), per(before.heap, collected.heap))
	fmt.Fprintf(w, "%-12s %16.1f %21.1f\n", "StackInuse", per(before.stack, held.stack), per(before.stack, collected.stack))
	return nil
}

// mem is what the gateway's /memstats tells: bytes, but for gcs, the count of
// collections; alloc is every byte allocated so far.
type mem struct{ rss, heap, stack, alloc, gcs uint64 }

func memstats(collect bool) (mem, error) {
	var m mem
	resp, err := http.Get(fmt.Sprintf("http://%s/memstats?gc=%v", adminAddr, collect))
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	_, err = fmt.Fscan(resp.Body, &m.rss, &m.heap, &m.stack, &m.alloc, &m.gcs)
	return m, err
}

// child runs the simulator or the gateway, the latter with /memstats on its
// admin address: VmRSS, HeapInuse, StackInuse, TotalAlloc and NumGC, after
// two collections when gc=true.
func child(what string) {
	if what == "sim" {
		if _, err := sim.Listen(simAddr, sim.Options{Name: "d1", BetaKey: "up"}); err != nil {
			log.Fatal(err)
		}
		select {}
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `
keys: [{id: k, key: key-1}]
upstreams: [{name: d1, family: beta, base_url: "http://%s/v1", api_key: up, max_conns: 25000}]
models: [{id: plain-model, upstreams: [d1]}]
`, simAddr), func(string) (string, bool) { return "", false })
	if err != nil {
		log.Fatal(err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", gwAddr)
	if err != nil {
		log.Fatal(err)
	}
	go g.NewServer().Serve(g.Listener(ln))
	http.HandleFunc("/memstats", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gc") == "true" {
			runtime.GC()
			runtime.GC()
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Fprintln(w, vmRSS(), m.HeapInuse, m.StackInuse, m.TotalAlloc, m.NumGC)
	})
	log.Fatal(http.ListenAndServe(adminAddr, nil))
}

// vmRSS is the process's resident set in bytes, 0 when /proc does not say.
func vmRSS() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb uint64
			fmt.Sscan(v, &kb)
			return kb << 10
		}
	}
	return 0
}

// openStreams opens n paced streams to the gateway, 256 opening at a time,
// signals open as each one's head comes, reads each to its end and returns
// how many failed.
func openStreams(n, events int, delay time.Duration, open chan<- struct{}) int {
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req := fmt.Sprintf("POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n"+
		"Content-Type: application/json\r\nConnection: close\r\nx-sim-first-event: 300ms\r\nx-sim-events: %d\r\n"+
		"x-sim-event-delay: %v\r\nContent-Length: %d\r\n\r\n%s", events, delay, len(body), body)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	opening := make(chan struct{}, 256)
	for range n {
		wg.Add(1)
		opening <- struct{}{}
		go func() {
			defer wg.Done()
			if err := stream(req, opening, open); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}

// stream sends req, frees its opening slot once the head came (or it
// failed), and reads the stream to its end.
func stream(req string, opening chan struct{}, open chan<- struct{}) error {
	opened := false
	defer func() {
		if !opened {
			<-opening
		}
	}()
	c, err := net.Dial("tcp", gwAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	br := bufio.NewReaderSize(c, 2048)
	if _, err := br.Peek(1); err != nil {
		return err
	}
	opened = true
	<-opening
	if open != nil {
		open <- struct{}{}
	}
	_, err = io.Copy(io.Discard, br)
	return err
}

// waitFor waits up to 10 s for addr to take connections.
func waitFor(addr string) error {
	for range 200 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not come up", addr)
}

// raiseFileLimit raises the soft open-files limit to the hard one, which the
// children inherit: two descriptors a stream in the gateway.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
