package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/modelgate/gateway/bench/nginx"
	"github.com/modelgate/gateway/bench/scenario"
	"github.com/modelgate/gateway/store/redistest"
)

// simDeployments is the number of simulator processes: the affinity ring.
const simDeployments = 4

// deployment is every process of one run and the temp dir of their configs,
// logs and store.
type deployment struct {
	dir      string
	bins     binaries
	binsFrom string
	sims     []*proc
	simAddrs []string
	gateway  *proc
	gwAddr   string
	// cert is the run's TLS certificate; gwTLSAddr the gateway's TLS listener.
	cert      *scenario.Cert
	gwTLSAddr string
	nginx     *nginx.Server
	// nginxSkipped says why there is no nginx, when there is none.
	nginxSkipped string
	nginxVersion string
	nginxPIDs    []int
	// The gateway on the redis engine, measured on the stateful scenarios:
	// its Redis Cluster (started by this run when redisOwned), the process
	// and its address, or why there is none.
	redis        []string
	redisOwned   bool
	redisGw      *proc
	redisGwAddr  string
	redisSkipped string
	// The gateway with traces on (tracing.go): the run's Jaeger, the
	// process and its address, or why there is none.
	jaegerDir, otlpEndpoint string
	tracedGw                *proc
	tracedGwAddr            string
	tracedSkipped           string
	// The gateway on redis with the files' bytes in object storage
	// (blobs.go): its S3 server (started by this run when s3Owned), the
	// process and its address, or why there is none.
	s3Endpoint   string
	s3Owned      bool
	blobsGw      *proc
	blobsGwAddr  string
	blobsSkipped string
	// The two relays of bench/cmd/floor in the gateway's place, measured on
	// floorScenarios: what Go and what fasthttp cost a proxy that does no
	// work of its own. None with -no-floors.
	floors []floor
}

// floor is one relay of bench/cmd/floor, running.
type floor struct {
	name, addr string
	p          *proc
}

// floorEngines are the relays: the target's name and its environment.
var floorEngines = []struct{ name, env string }{
	{"go-relay", "FLOOR_ENGINE=lean"},
	{"fasthttp-relay", "FLOOR_ENGINE=fasthttp"},
}

// floorScenarios are the scenarios the floors relay: beta chat calls and
// alpha's streamed messages.
var floorScenarios = []string{"chat", "chat-1conn", "chat-stream", "messages-stream"}

// redisPort is the first port of the bench's Redis Cluster (6 nodes from it).
const redisPort = 7191

// deploy starts the simulators, the gateway in front of them and nginx in
// front of the first simulator and, on its session port, of all of them. On
// error, whatever started is stopped.
func deploy(ctx context.Context, o *options, root string, log io.Writer) (d *deployment, err error) {
	dir, err := os.MkdirTemp("", "modelgate-bench-")
	if err != nil {
		return nil, fmt.Errorf("cannot create the run's temp dir: %w", err)
	}
	d = &deployment{dir: dir}
	defer func() {
		if err != nil {
			d.close(log)
			d = nil
		}
	}()
	if d.bins, d.binsFrom, err = findBinaries(ctx, root, o.binDir, dir, o.build, !o.noFloors); err != nil {
		return d, err
	}
	fmt.Fprintf(log, "binaries: %s\n", d.binsFrom)
	if d.cert, err = scenario.WriteCert(dir); err != nil {
		return d, err
	}
	if o.tlsX25519 {
		d.cert.Client.CurvePreferences = []tls.CurveID{tls.X25519}
	}
	if err = d.startSims(); err != nil {
		return d, err
	}
	if err = d.startGateway(); err != nil {
		return d, err
	}
	if !o.noFloors {
		if err = d.startFloors(); err != nil {
			return d, err
		}
	}
	if o.noRedis {
		d.redisSkipped = "redis not run (-no-redis)"
	} else if err = d.startRedis(log); err != nil {
		return d, err
	}
	if o.noS3 {
		d.blobsSkipped = "object storage not run (-no-s3)"
	} else if err = d.startS3(ctx, root, o.quick, log); err != nil {
		return d, err
	}
	if o.noTracing {
		d.tracedSkipped = "tracing not run (-no-tracing)"
	} else if err = d.startTracing(ctx, root, o.quick, log); err != nil {
		return d, err
	}
	if o.noNginx {
		d.nginxSkipped = "nginx not run (-no-nginx)"
	} else {
		d.startNginx(ctx)
	}
	if d.nginxSkipped != "" {
		fmt.Fprintf(log, "nginx: skipped: %s\n", d.nginxSkipped)
	}
	return d, nil
}

func (d *deployment) startSims() error {
	k := scenario.DefaultKeys
	for i := range simDeployments {
		p, addr, err := startSim(d.bins.sim, d.dir, fmt.Sprintf("sim%d", i+1), [3]string{k.Alpha, k.Beta, k.Gamma})
		if err != nil {
			return err
		}
		d.sims = append(d.sims, p)
		d.simAddrs = append(d.simAddrs, addr)
	}
	return nil
}

func (d *deployment) startGateway() error {
	tlsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	gc := scenario.GatewayConfig{StorePath: filepath.Join(d.dir, "store"),
		ListenTLS: tlsAddr, CertFile: d.cert.CertFile, KeyFile: d.cert.KeyFile}
	d.gateway, d.gwAddr, err = d.launchGateway("gateway", gc)
	d.gwTLSAddr = tlsAddr
	return err
}

// restartGateway restarts the gateway on its address and config, its store
// kept: a process that has seen no call.
func (d *deployment) restartGateway() error {
	if err := d.gateway.stop(); err != nil {
		return err
	}
	p, err := startGateway("gateway", d.bins.gateway, d.dir, filepath.Join(d.dir, "gateway.yaml"), d.gwAddr,
		scenario.DefaultKeys.Gateway)
	if err != nil {
		return err
	}
	d.gateway = p
	return nil
}

// startFloors starts each relay of floorEngines on the gateway's config,
// which names the first simulator as the first beta upstream.
func (d *deployment) startFloors() error {
	for _, e := range floorEngines {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		p, err := startGateway(e.name, d.bins.floor, d.dir, filepath.Join(d.dir, "gateway.yaml"), addr,
			scenario.DefaultKeys.Gateway, e.env)
		if err != nil {
			return err
		}
		d.floors = append(d.floors, floor{name: e.name, addr: addr, p: p})
	}
	return nil
}

// startRedisGateway starts the gateway on the redis engine, if there is a cluster.
func (d *deployment) startRedisGateway() error {
	if d.redis == nil {
		return nil
	}
	gc := scenario.GatewayConfig{Redis: d.redis, RedisPrefix: fmt.Sprintf("bench:%d:", os.Getpid())}
	var err error
	d.redisGw, d.redisGwAddr, err = d.launchGateway("gateway-redis", gc)
	return err
}

// launchGateway writes gc, completed with a free address, the keys and the
// simulators, as name.yaml and starts the gateway process name on it, env
// added to its environment.
func (d *deployment) launchGateway(name string, gc scenario.GatewayConfig, env ...string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	gc.Listen, gc.Keys = addr, scenario.DefaultKeys
	for _, a := range d.simAddrs {
		gc.Sims = append(gc.Sims, "http://"+a)
	}
	text, err := gc.YAML()
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(d.dir, name+".yaml")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		return nil, "", fmt.Errorf("cannot write the %s config: %w", name, err)
	}
	p, err := startGateway(name, d.bins.gateway, d.dir, path, addr, scenario.DefaultKeys.Gateway, env...)
	return p, addr, err
}

// startRedis starts (or reuses) the Redis Cluster of scripts/redis-cluster.sh
// and the gateway on it. A cluster that cannot be had is a skipped target,
// with its reason; a gateway that does not start on it is an error.
func (d *deployment) startRedis(log io.Writer) error {
	_, err := redistest.Run("status", redisPort)
	running := err == nil
	out, err := redistest.Run("start", redisPort)
	if err != nil {
		d.redisSkipped = "redis not available: " + oneLine(err.Error(), 200)
		fmt.Fprintf(log, "redis: skipped: %s\n", d.redisSkipped)
		return nil
	}
	d.redis, d.redisOwned = strings.Fields(out), !running
	fmt.Fprintf(log, "redis: cluster on 127.0.0.1:%d-%d\n", redisPort, redisPort+5)
	return d.startRedisGateway()
}

// startNginx installs nginx if it can and starts it with one worker per core
// (worker_processes auto, as deployed by default), in front of the first
// simulator and, for the affinity scenario, of every simulator by a
// consistent hash of the session id. Any failure leaves a reason in
// nginxSkipped.
func (d *deployment) startNginx(ctx context.Context) {
	bin, err := nginx.Ensure(ctx)
	if err == nil {
		var v [3]int
		if v, err = nginx.Version(bin); err == nil {
			d.nginxVersion = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
		}
	}
	if err == nil {
		d.nginx, err = nginx.Start(nginx.Options{Binary: bin, Upstream: d.simAddrs[0], Sessions: d.simAddrs, WorkerProcesses: -1,
			CertFile: d.cert.CertFile, KeyFile: d.cert.KeyFile, LeastConn: d.simAddrs[len(d.simAddrs)-2:]})
	}
	if err == nil {
		d.nginxPIDs, err = d.nginxWorkers()
	}
	if err != nil {
		d.nginxSkipped = err.Error()
		if !errors.Is(err, nginx.ErrNotAvailable) {
			d.nginxSkipped = "nginx not available: " + d.nginxSkipped
		}
		if d.nginx != nil {
			_ = d.nginx.Stop()
			d.nginx = nil
		}
	}
}

// nginxWorkers waits until nginx has forked its workers, one per core (or,
// after a while, at least one: nginx may count cores otherwise), and returns
// the pids of the master and workers.
func (d *deployment) nginxWorkers() ([]int, error) {
	start := time.Now()
	for {
		pids, err := d.nginx.PIDs()
		if err != nil || len(pids) > runtime.NumCPU() || (len(pids) > 1 && time.Since(start) > 2*time.Second) {
			return pids, err
		}
		if time.Since(start) > startTimeout {
			return nil, fmt.Errorf("nginx has no worker after %v", startTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sampled returns the pids to sample for t now: nginx may have replaced a worker.
func (d *deployment) sampled(t *target) []int {
	if t.Kind != scenario.Proxy || d.nginx == nil {
		return t.pids
	}
	if pids, err := d.nginx.PIDs(); err == nil {
		return pids
	}
	return t.pids
}

// targets returns the targets of the run, the skipped one with its reason.
func (d *deployment) targets() []target {
	ts := []target{
		{Target: scenario.Target{Name: "direct", Kind: scenario.Direct, URL: "http://" + d.simAddrs[0]}, pids: []int{d.sims[0].pid()}},
		{Target: scenario.Target{Name: "gateway", Kind: scenario.Gateway, URL: "http://" + d.gwAddr, TLSURL: "https://" + d.gwTLSAddr,
			RoutedURL: "http://" + d.gwAddr}, pids: []int{d.gateway.pid()}},
	}
	rg := target{Target: scenario.Target{Name: redisTarget, Kind: scenario.Gateway}, skipped: d.redisSkipped, stateful: true}
	if d.redisGw != nil {
		rg.URL, rg.pids = "http://"+d.redisGwAddr, []int{d.redisGw.pid()}
	}
	n := target{Target: scenario.Target{Name: "nginx", Kind: scenario.Proxy}, skipped: d.nginxSkipped}
	if d.nginx != nil {
		n.URL, n.SessionURL, n.TLSURL, n.RoutedURL = d.nginx.URL(), d.nginx.SessionsURL(), d.nginx.TLSURL(), d.nginx.LeastConnURL()
		n.pids = d.nginxPIDs
	}
	for _, f := range d.floors {
		only := floorScenarios
		if slices.Contains(pacedFloors, f.name) {
			only = append(slices.Clone(only), "llm-streams")
		}
		ts = append(ts, target{Target: scenario.Target{Name: f.name, Kind: scenario.Gateway, URL: "http://" + f.addr},
			pids: []int{f.p.pid()}, only: only})
	}
	return append(ts, d.tracedTargetOf(), rg, d.blobsTargetOf(), n)
}

// procs are the run's processes but nginx's, some of them nil.
func (d *deployment) procs() []*proc {
	ps := append([]*proc{d.gateway, d.redisGw, d.blobsGw, d.tracedGw}, d.sims...)
	for _, f := range d.floors {
		ps = append(ps, f.p)
	}
	return ps
}

// redisTarget names the gateway on the redis engine in reports.
const redisTarget = "gateway-redis"

// checkAlive returns an error naming a process of the run that has exited.
func (d *deployment) checkAlive() error {
	for _, p := range d.procs() {
		if p == nil {
			continue
		}
		select {
		case <-p.exited:
			return p.failure(errors.New("exited during the run"))
		default:
		}
	}
	return nil
}

// close stops every process, nginx first, then the gateway, then the
// simulators, and removes the temp dir. Problems are logged, not returned.
func (d *deployment) close(log io.Writer) {
	if d.nginx != nil {
		if err := d.nginx.Stop(); err != nil {
			fmt.Fprintf(log, "warning: %v\n", err)
		}
	}
	for _, p := range d.procs() {
		if p == nil {
			continue
		}
		if err := p.stop(); err != nil {
			fmt.Fprintf(log, "warning: %v\n", err)
		}
	}
	d.stopJaeger(log)
	d.stopS3(log)
	if d.redisOwned {
		if err := redistest.StopPort(redisPort); err != nil {
			fmt.Fprintf(log, "warning: cannot stop the redis cluster: %v\n", err)
		}
	}
	if d.dir != "" {
		if err := os.RemoveAll(d.dir); err != nil {
			fmt.Fprintf(log, "warning: cannot remove %s: %v\n", d.dir, err)
		}
	}
}

// target is a scenario target with the processes sampled while it is measured.
type target struct {
	scenario.Target
	pids    []int
	skipped string
	// stateful: measured on the scenarios that use the store only.
	stateful bool
	// only, when set, names the only scenarios the target is measured on.
	only []string
}

// measures reports whether t is measured on sc.
func (t *target) measures(sc *scenario.Scenario) bool {
	if t.stateful && !sc.Stateful || sc.StoreOnly && t.Kind != scenario.Gateway {
		return false
	}
	// A target without the entry point a scenario needs is left out; a
	// skipped one is listed with its reason.
	if t.skipped == "" && (sc.TLS && t.TLSURL == "" || sc.Routed && t.RoutedURL == "") {
		return false
	}
	return t.only == nil || slices.Contains(t.only, sc.Name)
}
