// Command gateway runs the model routing gateway.
//
//	gateway -config gateway.yaml     serve with a config file (also: gateway serve -config ...)
//	gateway                          serve the offline demo: no provider, the bundled simulator
//	gateway check -config FILE       validate a config and exit (also: gateway check FILE)
//	gateway hash-key [KEY]           print the sha256 form of a key (from stdin when not given)
//	gateway keys COMMAND [ID]        manage callers' keys through the admin API (docs/keys.md)
//	gateway -version                 print the version
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy"
	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/edgetls"
	"github.com/modelgate/gateway/proxy/ratelimit"
	"github.com/modelgate/gateway/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "gateway:", err)
	var ue usageError
	if errors.As(err, &ue) {
		os.Exit(2)
	}
	os.Exit(1)
}

// usageError is a command line the gateway does not understand: main prints
// it, after the usage, and exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "serve":
			args = args[1:]
		case "check":
			return check(args[1:], stdout, stderr)
		case "hash-key":
			return hashKey(args[1:], stdout)
		case "keys":
			return keysCommand(args[1:], stdout, stderr)
		case "help":
			usage(stdout, newFlags(new(flags)))
			return nil
		case "version":
			fmt.Fprintln(stdout, "gateway", version)
			return nil
		default:
			usage(stderr, newFlags(new(flags)))
			return usageError{fmt.Sprintf("unknown command %q; the commands are serve, check, hash-key, keys, help and version", args[0])}
		}
	}
	var f flags
	fs := newFlags(&f)
	if err := parseFlags(fs, args, stdout, stderr, usage); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if f.showVersion {
		fmt.Fprintln(stdout, "gateway", version)
		return nil
	}
	return serveCommand(f, stdout, stderr)
}

// flags are the process knobs of serving.
type flags struct {
	configPath, listen, logFormat, accessLog, adminListen string
	demoData                                              string // "": ./data, or a temporary directory when ./data is held
	grace                                                 time.Duration
	showVersion                                           bool
}

func newFlags(f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.StringVar(&f.configPath, "config", "", "routing config `file` (YAML): keys, upstreams, models; reloaded on SIGHUP.\nWithout it the gateway serves the offline demo against the bundled upstream simulator")
	fs.StringVar(&f.listen, "listen", "", "`address` to listen on for clients, e.g. 127.0.0.1:8080; overrides the config's listen")
	fs.StringVar(&f.logFormat, "log-format", "text", "`format` of the operational log on stderr: text or json")
	fs.StringVar(&f.accessLog, "access-log", "text", "`format` of the access log on stdout, one line per request when it ends: text, json or off.\nIt names the caller by key id and the session by a hash; never a key or a body")
	fs.StringVar(&f.adminListen, "admin-listen", defaultAdminListen, "`address` of the admin listener: /status (a page for a person), /metrics (Prometheus),\n/healthz and /readyz; off to run without it. /status and /metrics are never served on the\nclient listener; /healthz and /readyz are on both")
	fs.StringVar(&f.demoData, "data", "", "`directory` of the offline demo's store (without -config; default ./data, or a\ntemporary directory, removed at exit, when another process holds ./data)")
	fs.DurationVar(&f.grace, "grace", 30*time.Second, "on SIGTERM/SIGINT, how long in-flight requests and streams may take to finish;\nwhat is still open after it is cut when the process exits")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	return fs
}

// parseFlags parses args into fs. -help prints the usage to stdout; a flag
// error or a stray argument prints it to stderr and is a usageError.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, usage func(io.Writer, *flag.FlagSet)) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout, fs)
		return flag.ErrHelp
	case err != nil:
		usage(stderr, fs)
		return usageError{err.Error()}
	case fs.NArg() > 0:
		usage(stderr, fs)
		return usageError{fmt.Sprintf("unexpected argument %q: flags come as -name value, and a command (serve, check, hash-key) only first", fs.Arg(0))}
	}
	return nil
}

// serveCommand loads the config (or starts the demo) and serves until a signal.
func serveCommand(f flags, stdout, stderr io.Writer) error {
	log, err := newLogger(f.logFormat, stderr)
	if err != nil {
		return err
	}
	access, err := newAccessLogger(f.accessLog, stdout)
	if err != nil {
		return err
	}
	o := serveOptions{configPath: f.configPath, adminListen: f.adminListen, grace: f.grace, log: log, access: access}
	var cfg *config.Config
	if f.configPath == "" {
		demo, err := startDemo(f.demoData)
		if err != nil {
			return err
		}
		defer demo.Close()
		cfg, o.demo = demo.cfg, demo
	} else if f.demoData != "" {
		return usageError{"-data is the offline demo's store; with -config, the config's store section names the store"}
	} else if cfg, err = config.Load(f.configPath); err != nil {
		return err
	}
	if f.listen != "" {
		cfg.Listen = f.listen
	}
	return serve(cfg, o)
}

// usage is the -help text: every form of the command, every flag, the signals.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `gateway routes client calls of the alpha (messages, files), beta (chat, responses,
images, files) and gamma (generateContent) provider APIs to upstream deployments.

Usage:
  gateway [serve] -config FILE [flags]  serve with a config file
  gateway [serve] [flags]               serve the offline demo: no provider, the bundled simulator
  gateway check -config FILE            validate a config file as start would, print a summary
                                        and exit (1 when invalid); also: gateway check FILE
  gateway hash-key [KEY]                print the sha256 form of KEY for keys[].sha256 (KEY from
                                        stdin when not given)
  gateway keys COMMAND [ID] [flags]     manage callers' keys through the admin API: create,
                                        list, get, update, block, unblock, rotate, delete
                                        (gateway keys -help; docs/keys.md)
  gateway version, gateway -version     print the version and exit
  gateway help, gateway -help           print this help

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Signals:
  SIGHUP           reload the config file: keys, upstreams and models swap atomically;
                   requests in flight finish on the old config; an invalid file is refused
                   with a log line naming the field, and the old config stays in force;
                   listen, listen_tls, tls and the store section take effect on restart
                   only; the certificate, key and client CA that tls names are read again
                   (a broken pair is refused with a log line; the one in force stays)
  SIGTERM, SIGINT  stop accepting, mark /readyz not ready, let requests and streams in
                   flight finish within -grace, close the store, exit 0

Operations (no key needed): GET /healthz (alive) and GET /readyz (this node can serve: store
open and reachable and a healthy deployment in at least one family; JSON detail per family, and
why not) on both listeners; GET /status (deployments, health, load, store, config; HTML) and
GET /metrics (Prometheus) on the admin listener only.

Store (config store.engine): pebble, embedded in store.path, for one node; or redis, a Redis
Cluster at store.addrs shared by many nodes (docs/multi-node.md). A Redis Cluster that does not
answer at start does not stop the gateway: the calls that need no state serve, those that do
answer 503 with Retry-After, /readyz says why, and the store connects by itself when Redis is up.
`)
}

// serveOptions are the process knobs of serve.
type serveOptions struct {
	configPath  string
	adminListen string
	grace       time.Duration
	log         *slog.Logger
	access      *accesslog.Log // nil: no access log
	demo        *demoUpstream  // the offline demo, or nil
}

func serve(cfg *config.Config, o serveOptions) error {
	log := o.log
	// Take the signals before anything is announced: a SIGHUP that arrives
	// right after "listening" must reload, not kill the process.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	st, wired, err := openStore(cfg, log)
	if o.demo != nil {
		st, wired, err = o.demo.orTempStore(cfg, st, wired, err, log)
	}
	if err != nil {
		return err // it names the store and says why, once
	}
	certs, err := edgeCerts(cfg, log)
	if err != nil {
		st.Close()
		return err
	}
	gw, err := proxy.New(cfg, proxy.Options{Store: st, Keys: wired.keys, Limits: wired.limits, Logger: log, AccessLog: o.access, Version: version, Metrics: certsMetrics(certs)})
	if err != nil {
		st.Close()
		return err
	}
	for _, h := range proxy.BaseURLHints(cfg) {
		log.Warn(h)
	}
	lns, err := listen(cfg.Listen, o.adminListen)
	if err != nil {
		st.Close()
		return err
	}
	tln, err := listenTLS(cfg.ListenTLS, certs)
	if err != nil {
		closeAll(lns)
		st.Close()
		return err
	}
	// Only now, with the store open and the listeners bound, does a line say
	// that the gateway serves: a port or store error comes before any.
	r := start(gw, st, lns, tln, log)
	if r.certs = certs; certs != nil {
		defer certs.WatchExpiry(time.Hour)()
	}
	if o.demo != nil {
		log.Warn("no provider configured: serving the offline demo against the bundled upstream simulator",
			"simulator", o.demo.addr, "demo_key", o.demo.key, "models", o.demo.models)
	}
	log.Info("gateway listening", append(listenAttrs(lns[0], tln), append(storeAttrs(cfg.Store), "version", version)...)...)
	return r.wait(sigs, o)
}

// storeWiring is what the gateway keeps in the store's engine besides its
// records (proxy.Options.Keys and Limits).
type storeWiring struct {
	keys   store.KeyStore    // the callers' keys the admin API manages
	limits ratelimit.Options // the redis engine's cluster: the keys' rate limits, shared by every node
}

// openStore opens the engine the config names. The redis engine opens even
// when no node answers: the gateway then serves what needs no state, /readyz
// says why it is not ready, and the engine connects in the background.
func openStore(cfg *config.Config, log *slog.Logger) (store.Store, storeWiring, error) {
	st, wired, err := openRecords(cfg, log)
	if err != nil || cfg.Store.Blobs == nil {
		return st, wired, err
	}
	st, err = openBlobs(cfg.Store.Blobs, st, log)
	return st, wired, err
}

// openRecords opens the engine of store.engine, and wires the callers' keys
// to it, and on redis the keys' rate limits to its cluster.
func openRecords(cfg *config.Config, log *slog.Logger) (store.Store, storeWiring, error) {
	if cfg.Store.Engine == "redis" {
		o, err := cfg.Store.RedisOptions(cfg.Responses.Retention)
		if err != nil {
			return nil, storeWiring{}, err
		}
		r, err := store.OpenRedisLazy(o, log)
		if err != nil {
			return nil, storeWiring{}, err
		}
		return r, storeWiring{keys: r, limits: ratelimit.Options{Redis: r.Client, KeyPrefix: r.KeyPrefix()}}, nil
	}
	durability, _ := store.ParseDurability(cfg.Store.Durability) // validated with the config
	p, err := store.OpenPebble(cfg.Store.Path, store.PebbleOptions{Logger: store.SlogLogger(log), Durability: durability})
	if err != nil {
		return nil, storeWiring{}, err
	}
	return p, storeWiring{keys: p}, nil
}

// openBlobs puts the file bytes of records in the object storage of b. A service that
// does not answer is logged, not fatal: uploads and inlining answer 503 until it does.
func openBlobs(b *config.StoreBlobs, records store.Store, log *slog.Logger) (store.Store, error) {
	o, err := b.S3Options()
	if err == nil {
		var bl *store.Blobs
		if bl, err = store.OpenBlobs(records, o); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if cerr := bl.CheckBucket(ctx); cerr != nil {
				log.Warn("store: object storage does not answer; uploads and file inlining fail until it does",
					"endpoint", b.Endpoint, "bucket", b.Bucket, "err", cerr)
			}
			return bl, nil
		}
	}
	records.Close()
	return nil, fmt.Errorf("store.blobs: %w", err)
}

// storeAttrs describes the store for the log: never a credential.
func storeAttrs(s config.Store) []any {
	var a []any
	if s.Engine == "redis" {
		a = []any{"store", "redis", "redis_addrs", strings.Join(s.Addrs, ","), "replicas", *s.Replicas}
	} else {
		a = []any{"store", s.Path, "durability", s.Durability}
	}
	if s.Blobs != nil {
		a = append(a, "blobs", s.Blobs.Endpoint+"/"+s.Blobs.Bucket)
	}
	return a
}

// running is a started gateway: its servers, store and janitor.
type running struct {
	gw          *proxy.Gateway
	st          io.Closer
	srv, admin  *fasthttp.Server // admin is nil without an admin listener
	served      chan error
	stopJanitor func()
	certs       *edgetls.Certs // the TLS of listen_tls, or nil
}

// start serves gw on lns (the client listener, nil when listen is off, then
// the admin one if any) and on tln (listen_tls, or nil), and starts the
// janitor. Every listener retries a failed accept: a server returns only
// once its listener is closed.
func start(gw *proxy.Gateway, st io.Closer, lns []net.Listener, tln net.Listener, log *slog.Logger) *running {
	r := &running{gw: gw, st: st, served: make(chan error, 3), srv: gw.NewServer()}
	if lns[0] != nil {
		go func() { r.served <- r.srv.Serve(gw.Listener(lns[0])) }()
	}
	if tln != nil {
		go func() { r.served <- r.srv.Serve(gw.Listener(tln)) }()
	}
	if len(lns) > 1 {
		r.admin = gw.NewAdminServer()
		go func() { r.served <- r.admin.Serve(gw.AdminListener(lns[1])) }()
		log.Info("admin listening", "addr", lns[1].Addr().String())
	}
	stopJanitor, stopKeys := gw.StartJanitor(), gw.StartKeys()
	r.stopJanitor = func() { stopKeys(); stopJanitor() }
	return r
}

// wait serves until a server fails or a signal stops the gateway: SIGHUP
// reloads the config, SIGINT and SIGTERM drain and shut down.
func (r *running) wait(sigs <-chan os.Signal, o serveOptions) error {
	log := o.log
	for {
		select {
		case err := <-r.served:
			r.srv.Shutdown()
			r.gw.WaitStreams(context.Background()) // as Shutdown waits for its requests
			if r.admin != nil {
				r.admin.Shutdown()
			}
			r.stopJanitor()
			r.gw.Close()
			r.st.Close()
			return err
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				reload(r.gw, o.configPath, log)
				if r.certs != nil {
					r.certs.Reload() // it logs what it did
				}
				continue
			}
			log.Info("shutting down", "signal", sig.String(), "grace", o.grace.String())
			r.gw.Drain()
			err := shutdown(r.gw, r.srv, r.admin, o.grace, log)
			flushTraces(r.gw, log)
			r.stopJanitor()
			r.gw.Close()
			if cerr := r.st.Close(); cerr != nil {
				log.Error("cannot close store", "err", cerr)
			}
			if err != nil {
				return err
			}
			log.Info("stopped")
			return nil
		}
	}
}

// flushTraces exports the spans of the last calls, within 5 s.
func flushTraces(gw *proxy.Gateway, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := gw.FlushTraces(ctx); err != nil {
		log.Warn("cannot export the last traces", "err", err)
	}
}

// defaultAdminListen is the admin listener's address unless -admin-listen
// says otherwise: loopback, so operational pages stay off the network.
const defaultAdminListen = "127.0.0.1:9091"

// listen opens the client listener, unless addr is "off" (nil then), and,
// unless adminAddr is "off", the admin one.
func listen(addr, adminAddr string) ([]net.Listener, error) {
	var ln net.Listener
	if addr != config.ListenOff {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
		}
	}
	if adminAddr == "off" {
		return []net.Listener{ln}, nil
	}
	aln, err := net.Listen("tcp", adminAddr)
	if err != nil {
		closeAll([]net.Listener{ln})
		return nil, fmt.Errorf("cannot listen on %s (-admin-listen): %w", adminAddr, err)
	}
	return []net.Listener{ln, aln}, nil
}

// shutdown stops the client server: it accepts no more connections, and those
// open get until grace to finish their requests and streams (the streams gw
// writes outside the server included). Then the admin server, which answered
// /readyz as not ready meanwhile, stops too.
func shutdown(gw *proxy.Gateway, srv, admin *fasthttp.Server, grace time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	err := srv.ShutdownWithContext(ctx)
	if err == nil {
		err = gw.WaitStreams(ctx)
	}
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("grace period over: the requests still open are cut", "grace", grace.String())
		err = nil
	}
	if admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		admin.ShutdownWithContext(ctx)
		cancel()
	}
	return err
}

func reload(gw *proxy.Gateway, configPath string, log *slog.Logger) {
	if configPath == "" {
		log.Warn("reload ignored: the demo has no config file")
		return
	}
	cfg, err := config.Load(configPath)
	if err == nil {
		old := gw.Config()
		keepListeners(cfg, old, log)
		if !reflect.DeepEqual(cfg.Store, old.Store) {
			log.Warn("reload: the store section changed; like listen, it takes effect on restart: the store in force stays")
			cfg.Store = old.Store
		}
		err = gw.Reload(cfg)
	}
	if err != nil {
		log.Error("reload refused: the old config stays in force", "err", err)
		return
	}
	log.Info("config reloaded", "path", configPath)
}

// newAccessLogger returns the access log in format, or nil when it is off:
// the lines slog's text or JSON handler would write, without slog.
func newAccessLogger(format string, w io.Writer) (*accesslog.Log, error) {
	switch format {
	case "off":
		return nil, nil
	case "text":
		return accesslog.New(w, accesslog.Text), nil
	case "json":
		return accesslog.New(w, accesslog.JSON), nil
	}
	return nil, fmt.Errorf("-access-log must be text, json or off, not %q", format)
}

func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("-log-format must be text or json, not %q", format)
}

func check(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway check", flag.ContinueOnError)
	configPath := fs.String("config", "", "config `file` to validate")
	checkUsage := func(w io.Writer, fs *flag.FlagSet) {
		fmt.Fprint(w, "Usage: gateway check -config FILE   (or: gateway check FILE)\n\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	// check FILE: one positional file stands for -config FILE.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append([]string{"-config"}, args...)
	}
	if err := parseFlags(fs, args, stdout, stderr, checkUsage); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *configPath == "" {
		checkUsage(stderr, fs)
		return usageError{"check needs a config file: gateway check -config FILE"}
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	if cfg.Store.Engine == "pebble" {
		if err := checkStoreDir(cfg.Store.Path); err != nil {
			return fmt.Errorf("config %s:\n%w", *configPath, err)
		}
	}
	// What start builds from the config (routes, affinity rings), without a
	// store or a listener: no connection is made.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := proxy.New(cfg, proxy.Options{Logger: quiet}); err != nil {
		return fmt.Errorf("config %s:\n%w", *configPath, err)
	}
	if _, err := edgeCerts(cfg, quiet); err != nil {
		return fmt.Errorf("config %s:\n%w", *configPath, err)
	}
	for _, h := range proxy.BaseURLHints(cfg) {
		fmt.Fprintln(stderr, "warning:", h)
	}
	for _, id := range cfg.Unpriced() {
		fmt.Fprintf(stderr, "warning: model %q has no pricing (models[].pricing) on every deployment: its calls cost 0 to the keys' budgets\n", id)
	}
	fmt.Fprintf(stdout, "config ok: %d keys, %d upstreams, %d models\n", len(cfg.Keys), len(cfg.Upstreams), len(cfg.Models))
	return nil
}

// checkStoreDir checks what start would need of store.path: that it is a
// directory, or can be made one, in which this process can write. It leaves
// nothing behind, and does not take the store's lock: a running gateway may
// hold it.
func checkStoreDir(dir string) error {
	d := dir
	for {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("store.path: %s is not a directory", d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("store.path: %w", err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	f, err := os.CreateTemp(d, ".gateway-check-*")
	if err != nil {
		return fmt.Errorf("store.path: cannot write in %s: %w", d, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

func hashKey(args []string, stdout io.Writer) error {
	var key string
	if len(args) > 1 {
		return usageError{"hash-key takes one key (or none, to read it from stdin)"}
	}
	if len(args) > 0 {
		key = args[0]
	} else {
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		key = strings.TrimRight(line, "\r\n")
	}
	if key == "" {
		return errors.New("hash-key: empty key")
	}
	fmt.Fprintln(stdout, proxy.HashKey(key))
	return nil
}
