//go:build clockcount

package proxy

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestClockCount counts the clock reads of the harness's chat call, by
// caller, through the gateway and through fasthttp's relay as
// BenchmarkServedChat serves them (one kept-alive connection, 20,000 calls
// after 1,000). It needs the counting runtime of bench/clockcount/run.sh.
func TestClockCount(t *testing.T) {
	for _, target := range []string{"gateway", "fasthttp-relay"} {
		h := newHotBenchUpstream(t, Options{}, providerUpstream)
		ln := listenLoopback(t)
		var srv *fasthttp.Server
		if target == "gateway" {
			srv = h.gw.NewServer()
			go srv.Serve(h.gw.Listener(ln))
		} else {
			srv = fasthttpRelay(h.gw.state.Load().deps["u1"].Addr())
			go srv.Serve(rawListener{ln})
		}
		addr := ln.Addr().String()
		client := &fasthttp.HostClient{Addr: addr, MaxConns: 1}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		hotRequest(req, servedBody)
		req.SetRequestURI("http://" + addr + "/v1/router/beta/v1/chat/completions")
		for _, kv := range sdkHeaders {
			req.Header.Set(kv[0], kv[1])
		}
		do := func() {
			if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				t.Fatal(err, resp.StatusCode())
			}
		}
		for range 1000 {
			do()
		}
		const n = 20000
		runtime.ClockReset()
		for range n {
			do()
		}
		nano, pcs, kinds, counts := runtime.ClockReads()
		type row struct {
			name string
			n    float64
		}
		agg := map[string]float64{}
		for i, st := range pcs {
			k := "Now"
			if kinds[i] == 1 {
				k = "Nano"
			}
			name := k
			for _, pc := range st {
				if pc == 0 {
					continue
				}
				f := runtime.FuncForPC(pc - 1)
				if f == nil {
					continue
				}
				_, line := f.FileLine(pc - 1)
				fn := f.Name()
				if j := strings.LastIndex(fn, "/"); j >= 0 {
					fn = fn[j+1:]
				}
				name += fmt.Sprintf(" < %s:%d", fn, line)
			}
			agg[name] += float64(counts[i]) / n
		}
		var rows []row
		var nowSum, nanoSum float64
		for k, v := range agg {
			if v >= 0.01 {
				rows = append(rows, row{k, v})
			}
			if k[:3] == "Now" {
				nowSum += v
			} else {
				nanoSum += v
			}
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
		fmt.Printf("== %s: runtime nanotime %.2f/call, time.Now %.2f/call, runtimeNano %.2f/call\n", target, float64(nano)/n, nowSum, nanoSum)
		for _, r := range rows {
			fmt.Printf("%6.2f %s\n", r.n, r.name)
		}
		srv.Shutdown()
	}
}
