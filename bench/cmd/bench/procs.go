package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// Bounds on starting and stopping the processes.
const (
	startTimeout = 20 * time.Second
	stopTimeout  = 5 * time.Second
	buildTimeout = 5 * time.Minute
)

// proc is one child process: started in its own process group, so a Ctrl-C
// at the terminal reaches the harness only and the harness stops it in order,
// and killed by the kernel should the harness die first.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has been waited for
	waitErr error         // set before exited is closed
}

// startProc starts bin with args, and env added to the harness's
// environment; its stderr (and stdout, unless stdout is given) go to logPath.
func startProc(name, logPath string, stdout io.Writer, env []string, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("cannot create the log of %s: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = logf
	cmd.Stdout = logf
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s (%s): %w", name, bin, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits; after stopTimeout it kills the process group.
func (p *proc) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t.C:
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("%s did not stop within %v: killed", p.name, stopTimeout)
	}
}

// failure describes why the process is not usable: how it exited and the end of its log.
func (p *proc) failure(cause error) error {
	b, _ := os.ReadFile(p.logPath)
	b = bytes.TrimSpace(b)
	if i := len(b) - 600; i > 0 {
		b = b[i:]
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v): %w: %s", p.name, p.waitErr, cause, b)
	default:
		return fmt.Errorf("%s: %w: %s", p.name, cause, b)
	}
}

var errNotReady = errors.New("not ready in time")

// binaries are the paths of the programs the harness runs.
type binaries struct {
	gateway, sim, floor string
}

// findBinaries returns the programs in dir, or builds them into tmp when
// asked to or when dir lacks them; the floor only when withFloor.
func findBinaries(ctx context.Context, root, dir, tmp string, build, withFloor bool) (binaries, string, error) {
	if dir == "" {
		dir = filepath.Join(root, "bin")
	}
	b := binaries{gateway: filepath.Join(dir, "gateway"), sim: filepath.Join(dir, "upstream-sim"), floor: filepath.Join(dir, "floor")}
	type pkg struct{ out, pkg string }
	var builds []pkg
	from := "prebuilt in " + dir
	if build || !isExecutable(b.gateway) || !isExecutable(b.sim) {
		b.gateway, b.sim = filepath.Join(tmp, "gateway"), filepath.Join(tmp, "upstream-sim")
		builds = append(builds, pkg{b.gateway, "./cmd/gateway"}, pkg{b.sim, "./cmd/upstream-sim"})
		from = "built from source for this run"
	}
	if withFloor && (build || !isExecutable(b.floor)) {
		// A -bin directory made by hand (a profiling build) seldom has it.
		b.floor = filepath.Join(tmp, "floor")
		builds = append(builds, pkg{b.floor, "./bench/cmd/floor"})
		if len(builds) == 1 {
			from += "; the floor relays built for this run"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	for _, t := range builds {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", t.out, t.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, "", fmt.Errorf("cannot build %s: %v: %s", t.pkg, err, bytes.TrimSpace(out))
		}
	}
	return b, from, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// repoRoot returns the directory of the gateway's go.mod, searched from the
// working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/modelgate/gateway\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the gateway's go.mod from the working directory: run from the repository")
		}
		dir = parent
	}
}

// startSim starts one simulator deployment on a free loopback port and
// returns it with its address, which it prints on its first line.
func startSim(bin, dir, name string, keys [3]string) (*proc, string, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	defer pr.Close()
	p, err := startProc(name, filepath.Join(dir, name+".log"), pw, nil, bin,
		"-listen", "127.0.0.1:0", "-name", name, "-alpha-key", keys[0], "-beta-key", keys[1], "-gamma-key", keys[2],
		"-no-record")
	pw.Close()
	if err != nil {
		return nil, "", err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(pr).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case addr := <-line:
		if _, _, err := net.SplitHostPort(addr); err != nil {
			_ = p.stop()
			return nil, "", p.failure(fmt.Errorf("printed %q, not its address", addr))
		}
		return p, addr, nil
	case <-time.After(startTimeout):
		_ = p.stop()
		return nil, "", p.failure(errNotReady)
	}
}

// startGateway starts the gateway (or a floor relay, which takes its flags)
// with the config at configPath on addr, env added to its environment, and
// waits until it answers the model list to the key. Its access log is off,
// as nginx's is (bench/nginx renders access_log off): neither proxy pays for
// a line per request.
func startGateway(name, bin, dir, configPath, addr, key string, env ...string) (*proc, error) {
	p, err := startProc(name, filepath.Join(dir, name+".log"), nil, env, bin,
		"-config", configPath, "-listen", addr, "-admin-listen", "off", "-grace", "2s", "-access-log", "off")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(startTimeout)
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		if gatewayAnswers(addr, key) {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, p.failure(errNotReady)
		case <-time.After(backoff):
		}
		if time.Now().After(deadline) {
			_ = p.stop()
			return nil, p.failure(errNotReady)
		}
	}
}

func gatewayAnswers(addr, key string) bool {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + addr + "/v1/models")
	req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+key)
	err := fasthttp.DoTimeout(req, resp, time.Second)
	return err == nil && resp.StatusCode() == fasthttp.StatusOK
}

// freeAddr returns a 127.0.0.1 address whose port was free just now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("cannot find a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// openFiles returns the number of open descriptors of pid.
func openFiles(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}
