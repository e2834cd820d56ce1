package nginx

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelgate/gateway/bench/load"
)

// Defaults of Options.
const (
	DefaultKeepAlive    = 256
	DefaultStartTimeout = 10 * time.Second
	stopTimeout         = 5 * time.Second
	portAttempts        = 3
)

// Options shape Start. Upstream is required; the zero value of every other
// field means its default.
type Options struct {
	// Binary is the nginx to run; empty means Find().
	Binary string
	// Upstream is the loopback host:port to proxy to.
	Upstream string
	// Sessions, when not empty, are loopback host:ports that a second port
	// (Server.SessionsAddr) spreads its requests over by a consistent hash
	// of the x-session-id header. The first port is the same without them.
	Sessions []string
	// CertFile and KeyFile, when set, are the PEM certificate and key of a
	// third port (Server.TLSAddr) that speaks TLS and proxies as the first.
	CertFile, KeyFile string
	// LeastConn, when not empty, are loopback host:ports that a fourth port
	// (Server.LeastConnAddr) spreads its requests over by `least_conn`.
	LeastConn []string
	// WorkerProcesses is the number of workers: 0 means 1, negative means
	// auto (one per core). See the package doc for the choice.
	WorkerProcesses int
	// KeepAlive is the upstream keep-alive pool size per worker (default 256).
	KeepAlive int
	// WorkerConnections bounds each worker's connections; 0 means as many as
	// the open-files hard limit allows.
	WorkerConnections int
	// Dir holds config, logs and pid file; empty means a new temp dir that
	// Stop removes.
	Dir string
	// StartTimeout bounds the wait for the port to answer (default 10 s).
	StartTimeout time.Duration
}

// Server is one running nginx. Its methods are safe for concurrent use.
type Server struct {
	// Addr is the 127.0.0.1:port nginx listens on.
	Addr string
	// SessionsAddr is the 127.0.0.1:port of the session-affinity server,
	// empty when Options.Sessions was.
	SessionsAddr string
	// TLSAddr is the 127.0.0.1:port of the TLS server, empty when
	// Options.CertFile was.
	TLSAddr string
	// LeastConnAddr is the 127.0.0.1:port of the least_conn server, empty
	// when Options.LeastConn was.
	LeastConnAddr string
	// Dir holds nginx.conf, error.log, stderr.log and nginx.pid.
	Dir string

	cmd       *exec.Cmd
	exited    chan struct{} // closed when cmd.Wait returns
	waitErr   error         // set before exited is closed
	removeDir bool
	stopOnce  sync.Once
	stopErr   error
}

// URL returns the http:// base URL of the proxy.
func (s *Server) URL() string { return "http://" + s.Addr }

// SessionsURL returns the http:// base URL of the session-affinity server,
// or "" when there is none.
func (s *Server) SessionsURL() string {
	if s.SessionsAddr == "" {
		return ""
	}
	return "http://" + s.SessionsAddr
}

// TLSURL returns the https:// base URL of the TLS server, or "" when there is none.
func (s *Server) TLSURL() string {
	if s.TLSAddr == "" {
		return ""
	}
	return "https://" + s.TLSAddr
}

// LeastConnURL returns the http:// base URL of the least_conn server, or ""
// when there is none.
func (s *Server) LeastConnURL() string {
	if s.LeastConnAddr == "" {
		return ""
	}
	return "http://" + s.LeastConnAddr
}

// Start writes a config and starts nginx in front of opts.Upstream on a free
// loopback port (and in front of opts.Sessions on another), and returns once
// its ports accept connections. The caller must Stop it.
func Start(opts Options) (*Server, error) {
	ups := append([]string{opts.Upstream}, opts.Sessions...)
	for _, up := range append(ups, opts.LeastConn...) {
		if err := load.CheckLoopback(up); err != nil {
			return nil, fmt.Errorf("cannot proxy to %q: %w", up, err)
		}
	}
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = Find(); err != nil {
			return nil, err
		}
	}
	dir, removeDir := opts.Dir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "bench-nginx-")
		if err != nil {
			return nil, fmt.Errorf("cannot create nginx dir: %w", err)
		}
		dir, removeDir = d, true
	}
	var err error
	for range portAttempts {
		var s *Server
		if s, err = startOnce(bin, dir, &opts); err == nil {
			s.removeDir = removeDir
			return s, nil
		}
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	if removeDir {
		_ = os.RemoveAll(dir)
	}
	return nil, err
}

var errAddrInUse = errors.New("nginx: address already in use")

// startOnce starts nginx on ports that were free a moment ago.
func startOnce(bin, dir string, opts *Options) (*Server, error) {
	addrs, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	cfg := newConfig(addrs, dir, opts)
	if err := writeFiles(dir, cfg.Render()); err != nil {
		return nil, err
	}
	args, err := commandArgs(bin, dir)
	if err != nil {
		return nil, err
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		return nil, fmt.Errorf("cannot create nginx stderr log: %w", err)
	}
	defer stderr.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	// Its own process group, so Stop can end the workers with the master.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: cannot start %s: %v", ErrNotAvailable, bin, err)
	}
	s := &Server{Addr: cfg.Listen, SessionsAddr: cfg.SessionsListen, TLSAddr: cfg.TLSListen,
		LeastConnAddr: cfg.LeastConnListen, Dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(startTimeout(opts)); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// newConfig returns the config of opts on addrs: the first for the proxy,
// the second, when there are sessions, for the session-affinity server, the
// third for the TLS server and the fourth for the least_conn one, when asked for.
func newConfig(addrs []string, dir string, opts *Options) *Config {
	c := &Config{
		Listen:            addrs[0],
		Upstream:          opts.Upstream,
		Sessions:          opts.Sessions,
		Dir:               dir,
		WorkerProcesses:   max(opts.WorkerProcesses, 0),
		KeepAlive:         opts.KeepAlive,
		WorkerConnections: opts.WorkerConnections,
		RlimitNofile:      fileHardLimit(),
	}
	if len(opts.Sessions) > 0 {
		c.SessionsListen = addrs[1]
	}
	if opts.CertFile != "" {
		c.TLSListen, c.CertFile, c.KeyFile = addrs[2], opts.CertFile, opts.KeyFile
	}
	if len(opts.LeastConn) > 0 {
		c.LeastConnListen, c.LeastConn = addrs[3], opts.LeastConn
	}
	if opts.WorkerProcesses == 0 {
		c.WorkerProcesses = 1
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.WorkerConnections <= 0 {
		c.WorkerConnections = int(max(c.RlimitNofile, 1088) - 64)
	}
	return c
}

// fileHardLimit returns this process's hard RLIMIT_NOFILE, which nginx inherits.
func fileHardLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Max > 1<<20 {
		return 1 << 20
	}
	return lim.Max
}

func startTimeout(opts *Options) time.Duration {
	if opts.StartTimeout > 0 {
		return opts.StartTimeout
	}
	return DefaultStartTimeout
}

// writeFiles writes nginx.conf into dir and lets the workers, which drop
// root for nobody, reach the temp paths nginx creates in it.
func writeFiles(dir string, conf []byte) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("cannot open up nginx dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "temp"), 0o755); err != nil {
		return fmt.Errorf("cannot create nginx temp dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), conf, 0o644); err != nil {
		return fmt.Errorf("cannot write nginx.conf: %w", err)
	}
	return nil
}

// commandArgs returns the arguments that keep nginx inside dir; -e (1.19.5)
// also keeps its first log lines, before the config is read, out of /var/log.
func commandArgs(bin, dir string) ([]string, error) {
	v, err := Version(bin)
	if err != nil {
		return nil, err
	}
	args := []string{"-p", dir + "/", "-c", filepath.Join(dir, "nginx.conf")}
	if atLeast(v, 1, 19, 5) {
		args = append(args, "-e", filepath.Join(dir, "error.log"))
	}
	return args, nil
}

// freePorts returns n 127.0.0.1 addresses whose ports were free just now,
// all different: each is held until all are found.
func freePorts(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cannot find a free port: %w", err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// waitReady waits until nginx has written its pid file, which it does once
// its sockets are bound, and Addr and SessionsAddr answer; or until nginx
// exits or timeout passes.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	backoff := 2 * time.Millisecond
	for !s.ready() {
		select {
		case <-s.exited:
			return s.startError(fmt.Errorf("exited: %v", s.waitErr))
		case <-time.After(backoff):
		}
		if time.Now().After(deadline) {
			return s.startError(fmt.Errorf("port %s did not answer within %v", strings.Join(s.addrs(), " or "), timeout))
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
	return nil
}

// ready reports whether the pid file names our nginx and every address accepts.
func (s *Server) ready() bool {
	b, err := os.ReadFile(filepath.Join(s.Dir, "nginx.pid"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(s.cmd.Process.Pid) {
		return false
	}
	for _, addr := range s.addrs() {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
	}
	return true
}

// addrs returns the addresses nginx listens on.
func (s *Server) addrs() []string {
	addrs := []string{s.Addr}
	for _, a := range []string{s.SessionsAddr, s.TLSAddr, s.LeastConnAddr} {
		if a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// startError wraps cause with the end of nginx's logs.
func (s *Server) startError(cause error) error {
	var logs []byte
	for _, name := range []string{"stderr.log", "error.log"} {
		if b, err := os.ReadFile(filepath.Join(s.Dir, name)); err == nil {
			logs = append(logs, lastLines(b, 5)...)
			logs = append(logs, ' ')
		}
	}
	if bytes.Contains(logs, []byte("Address already in use")) {
		return fmt.Errorf("%w: %s", errAddrInUse, bytes.TrimSpace(logs))
	}
	return fmt.Errorf("cannot start nginx: %v: %s", cause, bytes.TrimSpace(logs))
}

// PIDs returns the master's pid and its workers', for load.StartSampler.
func (s *Server) PIDs() ([]int, error) {
	master := s.cmd.Process.Pid
	kids, err := load.Children(master)
	if err != nil {
		return nil, err
	}
	return append([]int{master}, kids...), nil
}

// Stop ends nginx: SIGTERM (fast shutdown, which also ends held streams),
// then SIGKILL to its process group if it has not exited within 5 s. It
// removes the dir if Start created it. Later calls return the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
	pid := s.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	var err error
	select {
	case <-s.exited:
	case <-t.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-s.exited
		err = fmt.Errorf("nginx did not stop within %v; killed", stopTimeout)
	}
	if s.removeDir {
		if rmErr := os.RemoveAll(s.Dir); rmErr != nil && err == nil {
			err = fmt.Errorf("cannot remove nginx dir: %w", rmErr)
		}
	}
	return err
}
