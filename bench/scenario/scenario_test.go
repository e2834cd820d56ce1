package scenario

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"image/png"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/load"
	"github.com/modelgate/gateway/bench/nginx"
	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/edgetls"
	"github.com/modelgate/gateway/store"
)

// testParams keep the scenarios small: the probes send one request each.
var testParams = Params{Duration: time.Second, Uploads: 2, IdleStreams: 4, IdleHold: 100 * time.Millisecond,
	PacedStreams: []int{3}, PacedEvents: 4, PacedFirstEvent: 20 * time.Millisecond, PacedEventDelay: 5 * time.Millisecond}

// deployment is an in-process copy of what the harness runs: four simulator
// deployments, the gateway in front of them and, where nginx is installed,
// nginx in front of the first and, on its session port, of all four.
type deployment struct {
	env     Env
	sims    []*sim.Server
	targets []Target
}

func startDeployment(t *testing.T) *deployment {
	t.Helper()
	d := &deployment{env: Env{Keys: DefaultKeys}}
	cert, err := WriteCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d.env.TLS = cert.Client
	var urls []string
	for i := range 4 {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "sim" + string(rune('1'+i)),
			AlphaKey: DefaultKeys.Alpha, BetaKey: DefaultKeys.Beta, GammaKey: DefaultKeys.Gamma, NoRecord: true})
		if err != nil {
			t.Fatal(err)
		}
		d.sims = append(d.sims, s)
		urls = append(urls, s.URL())
	}
	d.env.Direct = urls[0]
	d.env.Routed = urls[2:]
	d.targets = append(d.targets, Target{Name: "direct", Kind: Direct, URL: urls[0]})
	gw, gwTLS := startGateway(t, urls, cert)
	d.targets = append(d.targets, Target{Name: "gateway", Kind: Gateway, URL: gw, TLSURL: gwTLS, RoutedURL: gw})
	if _, err := nginx.Find(); err == nil {
		var addrs []string
		for _, s := range d.sims {
			addrs = append(addrs, s.Addr())
		}
		n, err := nginx.Start(nginx.Options{Upstream: addrs[0], Sessions: addrs, CertFile: cert.CertFile, KeyFile: cert.KeyFile,
			LeastConn: addrs[2:]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Stop() })
		d.targets = append(d.targets, Target{Name: "nginx", Kind: Proxy, URL: n.URL(), SessionURL: n.SessionsURL(), TLSURL: n.TLSURL(),
			RoutedURL: n.LeastConnURL()})
	} else {
		t.Logf("no nginx target: %v", err)
	}
	// Registered last, so run first: closing the simulators ends the idle
	// streams the gateway would otherwise hold through its shutdown.
	t.Cleanup(func() {
		for _, s := range d.sims {
			s.Close()
		}
	})
	return d
}

// startGateway serves an in-process gateway with the harness's config, on
// a plain listener and on a TLS one presenting cert, and returns their base URLs.
func startGateway(t *testing.T, sims []string, cert *Cert) (string, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	certs, err := edgetls.New(edgetls.Options{CertFile: cert.CertFile, KeyFile: cert.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	gc := GatewayConfig{Listen: ln.Addr().String(), StorePath: filepath.Join(t.TempDir(), "store"), Keys: DefaultKeys, Sims: sims}
	text, err := gc.YAML()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(text, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("generated config rejected: %v\n%s", err, text)
	}
	st, err := store.OpenPebble(cfg.Store.Path, store.PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := proxy.New(cfg, proxy.Options{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := gw.NewServer()
	done := make(chan struct{}, 2)
	for _, l := range []net.Listener{ln, certs.Listener(tln)} {
		go func() {
			defer func() { done <- struct{}{} }()
			_ = srv.Serve(l)
		}()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.ShutdownWithContext(ctx)
		_ = ln.Close()
		_ = tln.Close()
		<-done
		<-done
		st.Close()
	})
	return "http://" + ln.Addr().String(), "https://" + tln.Addr().String()
}

// TestScenariosAnswer prepares every scenario for every target and checks
// that one request of it gets the answer the load run will count as good.
func TestScenariosAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts simulators, a gateway and nginx")
	}
	d := startDeployment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, sc := range All(testParams) {
		for _, tg := range d.targets {
			if sc.TLS && tg.TLSURL == "" || sc.Routed && tg.RoutedURL == "" || sc.StoreOnly && tg.Kind != Gateway {
				continue
			}
			t.Run(sc.Name+"/"+tg.Name, func(t *testing.T) {
				spec, err := sc.Prepare(ctx, &d.env, &tg)
				if err != nil {
					t.Fatal(err)
				}
				sdk := 0
				for _, h := range spec.Headers {
					if h.Name == "User-Agent" || strings.HasPrefix(h.Name, "X-Stainless-") {
						sdk++
					}
				}
				if sdk != 9 {
					t.Errorf("%d of the SDK's headers, not 9: %v", sdk, spec.Headers)
				}
				if err := Probe(ctx, spec); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestStreamCheckCountsEvents shows that the streaming scenarios expect the
// simulator's exact event count of every target, and that a probe catches a
// stream with another count.
func TestStreamCheckCountsEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("starts simulators and a gateway")
	}
	d := startDeployment(t)
	ctx := context.Background()
	sc, err := Select(All(testParams), []string{"chat-stream"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sc[0].Prepare(ctx, &d.env, &d.targets[1])
	if err != nil {
		t.Fatal(err)
	}
	// A role frame, the deltas, a finish frame and [DONE].
	if spec.Check.Events < StreamEvents+2 {
		t.Fatalf("expected %d events, fewer than the %d deltas", spec.Check.Events, StreamEvents)
	}
	short := *spec
	short.Headers = append(append([]load.Header(nil), spec.Headers...), load.Header{Name: "x-sim-events", Value: "3"})
	if err := Probe(ctx, &short); !errors.Is(err, ErrProbe) || !strings.Contains(err.Error(), "events") {
		t.Fatalf("a stream of 3 deltas passed a check of %d events: %v", spec.Check.Events, err)
	}
	bad := *spec
	bad.Headers = []load.Header{{Name: "Authorization", Value: "Bearer wrong"}}
	if err := Probe(ctx, &bad); !errors.Is(err, ErrProbe) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong key passed: %v", err)
	}
}

// TestAffinitySpreads shows that the affinity scenario's sessions reach all
// four deployments through the gateway and through nginx, each session
// always the same one, while direct stays on the first.
func TestAffinitySpreads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts simulators, a gateway and nginx")
	}
	d := startDeployment(t)
	sc, err := Select(All(testParams), []string{"affinity"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range d.targets {
		t.Run(tg.Name, func(t *testing.T) {
			spec, err := sc[0].Prepare(context.Background(), &d.env, &tg)
			if err != nil {
				t.Fatal(err)
			}
			want := 4
			if tg.Kind == Direct {
				want = 1
			}
			if tg.Kind == Proxy && !strings.HasPrefix(spec.URL, tg.SessionURL+"/") {
				t.Fatalf("nginx affinity spec goes to %s, not to its session port %s", spec.URL, tg.SessionURL)
			}
			if seen := sessionDeployments(t, spec); len(seen) != want {
				t.Fatalf("sessions reached %d deployments, want %d: %v", len(seen), want, seen)
			}
		})
	}
	if len(d.targets) < 3 {
		t.Log("nginx not installed: its affinity was not checked")
	}
}

// sessionDeployments sends spec's first 200 sessions twice, the second time
// in reverse order, checks that each session stays on one deployment, and
// returns the requests each deployment answered.
func sessionDeployments(t *testing.T, spec *load.Spec) map[string]int {
	t.Helper()
	const n = 200
	first := make(map[uint64]string)
	seen := make(map[string]int)
	var c fasthttp.Client
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	for seq := range uint64(2 * n) {
		id := seq
		if seq >= n {
			id = 2*n - 1 - seq
		}
		req := newRequest(spec, id)
		err := c.DoTimeout(req, resp, 10*time.Second)
		fasthttp.ReleaseRequest(req)
		if err != nil || resp.StatusCode() != 200 {
			t.Fatalf("request %d: %v %d %s", seq, err, resp.StatusCode(), resp.Body())
		}
		dep := string(resp.Header.Peek("x-sim-deployment"))
		if want, ok := first[id]; ok && want != dep {
			t.Fatalf("session %d moved from %s to %s", id, want, dep)
		}
		first[id] = dep
		seen[dep]++
	}
	return seen
}

func TestSelect(t *testing.T) {
	all := All(testParams)
	got, err := Select(all, []string{"upload-8mib", " chat"})
	if err != nil {
		t.Fatal(err)
	}
	if names := strings.Join(Names(got), ","); names != "chat,upload-8mib" {
		t.Fatalf("selected %s", names)
	}
	if _, err := Select(all, []string{"chat", "nope"}); !errors.Is(err, ErrUnknownScenario) {
		t.Fatalf("unknown name: %v", err)
	}
	if got, _ := Select(all, nil); len(got) != len(all) {
		t.Fatalf("no names selected %d of %d", len(got), len(all))
	}
	seen := map[string]bool{}
	for i, s := range all {
		if seen[s.Name] {
			t.Fatalf("duplicate scenario name %s", s.Name)
		}
		seen[s.Name] = true
		if s.Name == "llm-streams" && (s.Paced == nil || len(s.Paced.Sizes) == 0) {
			t.Fatal("llm-streams has no paced load")
		}
		if (s.Idle != nil) != (i == len(all)-1) {
			t.Fatalf("scenario %s: the idle scenario must be the last one", s.Name)
		}
	}
}

func TestGatewayConfig(t *testing.T) {
	gc := GatewayConfig{Listen: "127.0.0.1:1", StorePath: "/tmp/x", Keys: DefaultKeys,
		Sims: []string{"http://127.0.0.1:2", "http://127.0.0.1:3/"}}
	text, err := gc.YAML()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(text, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if len(cfg.Upstreams) != 4 || cfg.Upstreams[3].BaseURL != "http://127.0.0.1:3/v1" || cfg.Upstreams[0].MaxConns != DefaultMaxConns {
		t.Fatalf("upstreams %+v", cfg.Upstreams)
	}
	models := map[string][]config.ModelUpstream{}
	for _, m := range cfg.Models {
		models[m.ID] = m.Upstreams
	}
	if len(models[ModelAffine]) != 2 || len(models[ModelChat]) != 2 || len(models[ModelImage]) != 1 {
		t.Fatalf("models %v", models)
	}
	if cfg.ListenTLS != "" || cfg.TLS != nil || cfg.Tracing != nil {
		t.Fatalf("TLS or tracing without asking: %q %+v %+v", cfg.ListenTLS, cfg.TLS, cfg.Tracing)
	}
	gc.ListenTLS, gc.CertFile, gc.KeyFile = "127.0.0.1:4", "/tmp/x/cert.pem", "/tmp/x/key.pem"
	gc.TracingEndpoint = "http://127.0.0.1:5"
	if text, err = gc.YAML(); err != nil {
		t.Fatal(err)
	}
	if cfg, err = config.Parse(text, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if cfg.ListenTLS != gc.ListenTLS || cfg.TLS == nil || cfg.TLS.CertFile != gc.CertFile || cfg.TLS.KeyFile != gc.KeyFile {
		t.Fatalf("TLS %q %+v", cfg.ListenTLS, cfg.TLS)
	}
	if tr := cfg.Tracing; tr == nil || tr.Endpoint != gc.TracingEndpoint || tr.SampleRatio == nil || *tr.SampleRatio != 1 {
		t.Fatalf("tracing %+v", tr)
	}
	gc.Sims = nil
	if _, err := gc.YAML(); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("no simulator: %v", err)
	}
}

// TestUploadBody checks the upload is one file field holding a valid PNG of
// exactly UploadBytes.
func TestUploadBody(t *testing.T) {
	body, ct := uploadBody()
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Fatal(err)
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	part, err := mr.NextPart()
	if err != nil {
		t.Fatal(err)
	}
	if part.FormName() != "file" || part.FileName() != "bench.png" || part.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("part %v", part.Header)
	}
	data, err := io.ReadAll(part)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != UploadBytes {
		t.Fatalf("file of %d bytes, want %d", len(data), UploadBytes)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil || img.Bounds().Dx() != 16 {
		t.Fatalf("not a valid PNG: %v", err)
	}
	// Like a real image's pixel data, the file does not compress: a store's
	// block compression gets nothing from it.
	var z bytes.Buffer
	zw, _ := flate.NewWriter(&z, flate.BestSpeed)
	zw.Write(data)
	zw.Close()
	if z.Len() < len(data)*99/100 {
		t.Fatalf("the file compresses to %d of %d bytes", z.Len(), len(data))
	}
	if _, err := mr.NextPart(); err != io.EOF {
		t.Fatalf("more than one part: %v", err)
	}
	if len(body) > UploadBytes+64<<10 {
		t.Fatalf("body of %d bytes is over the spec's limit", len(body))
	}
}

// TestPacedStreamsRelayStamps runs a few paced streams through every target:
// each relays every frame with the simulator's stamp, so the delays are
// measured for every event.
func TestPacedStreamsRelayStamps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts simulators, a gateway and nginx")
	}
	d := startDeployment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all, err := Select(All(testParams), []string{"llm-streams"})
	if err != nil {
		t.Fatal(err)
	}
	sc := all[0]
	for _, tg := range d.targets {
		t.Run(tg.Name, func(t *testing.T) {
			spec, err := sc.Prepare(ctx, &d.env, &tg)
			if err != nil {
				t.Fatal(err)
			}
			if want := testParams.PacedEvents + 3; spec.Check.Events != want {
				t.Fatalf("the spec expects %d events, want %d", spec.Check.Events, want)
			}
			o := sc.Paced.Options
			o.Streams = sc.Paced.Sizes[0]
			res, err := load.RunPaced(ctx, spec, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Completed != o.Streams || res.Delay.Count != int64(o.Streams*spec.Check.Events) {
				t.Fatalf("%d of %d streams completed (errors %v statuses %v), %d delays measured",
					res.Completed, o.Streams, res.Errors, res.Statuses, res.Delay.Count)
			}
		})
	}
}

func TestSizesText(t *testing.T) {
	if got := sizesText([]int{2000, 10000, 1234567}); got != "2,000, 10,000 and 1,234,567 streams" {
		t.Fatalf("got %q", got)
	}
	if got := sizesText([]int{1}); got != "1 stream" {
		t.Fatalf("got %q", got)
	}
}

// TestSlowDeploymentGroups shows that every routed target's answers name
// the deployment that answered (so the scenario can count them), and only
// the two routed ones; and that SlowDown slows the second.
func TestSlowDeploymentGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts simulators, a gateway and nginx")
	}
	d := startDeployment(t)
	ctx := context.Background()
	scs, err := Select(All(testParams), []string{"slow-deployment"})
	if err != nil {
		t.Fatal(err)
	}
	sc := &scs[0]
	for _, tg := range d.targets {
		if tg.RoutedURL == "" {
			continue
		}
		spec, err := sc.Prepare(ctx, &d.env, &tg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := load.Run(ctx, spec, load.Options{Connections: 2, MaxRequests: 20, Duration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for name, g := range r.Groups {
			if name != "sim3" && name != "sim4" {
				t.Fatalf("%s: answered by %q", tg.Name, name)
			}
			n += g.OK
		}
		if r.OK != 20 || n != r.OK {
			t.Fatalf("%s: %d calls ok, %d grouped: %+v", tg.Name, r.OK, n, r.Groups)
		}
	}
	direct := Target{Name: "sim4", Kind: Direct, URL: d.env.Routed[1], RoutedURL: d.env.Routed[1]}
	spec, err := sc.Prepare(ctx, &d.env, &direct)
	if err != nil {
		t.Fatal(err)
	}
	took := func() time.Duration {
		t.Helper()
		r, err := load.Run(ctx, spec, load.Options{Connections: 1, MaxRequests: 1, Duration: time.Minute})
		if err != nil || r.OK != 1 {
			t.Fatalf("%v %+v", err, r.Errors)
		}
		return r.TTFB.Min
	}
	if err := sc.Slow.SlowDown(ctx, &d.env, true); err != nil {
		t.Fatal(err)
	}
	if d := took(); d < SlowFirstByte-time.Millisecond {
		t.Fatalf("slowed deployment answered after %v", d)
	}
	if err := sc.Slow.SlowDown(ctx, &d.env, false); err != nil {
		t.Fatal(err)
	}
}
