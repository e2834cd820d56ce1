// Package nginx runs nginx as the reference reverse proxy of the benchmark
// harness: it finds (or, as root, installs) the binary, writes a config into
// a temp dir, starts nginx as a child in the foreground on a free loopback
// port in front of a given upstream (and, when given session upstreams, on a
// second port that spreads requests over them by a consistent hash of
// x-session-id), and stops it.
//
// It touches no system configuration: the pid file, logs and temp paths live
// in the run's dir, the config is passed with -c and the prefix with -p.
//
// Worker processes: one by default. The benchmark machine has two cores,
// shared by the load generator, the upstream simulator and the proxy under
// test, so a proxy with one worker (one core at most) is the fair peer of a
// gateway run with GOMAXPROCS=1; give both the same budget (WorkerProcesses:
// 2, or -1 for auto, alongside GOMAXPROCS=2) to compare them with more.
//
// It does not measure anything: bench/load drives and samples it.
package nginx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// ErrNotAvailable is wrapped by every error that leaves no nginx to run; its
// text starts the line the harness prints when it skips the nginx target.
var ErrNotAvailable = errors.New("nginx not available")

// DefaultBinary is where Debian and Ubuntu install nginx.
const DefaultBinary = "/usr/sbin/nginx"

// InstallTimeout bounds Ensure's apt-get run.
const InstallTimeout = 5 * time.Minute

// Find returns the path of the nginx binary: DefaultBinary, else nginx on PATH.
func Find() (string, error) {
	if fi, err := os.Stat(DefaultBinary); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return DefaultBinary, nil
	}
	path, err := exec.LookPath("nginx")
	if err != nil {
		return "", fmt.Errorf("%w: no %s and none on PATH", ErrNotAvailable, DefaultBinary)
	}
	return path, nil
}

// Ensure returns the path of nginx. When it is missing and this process runs
// as root, it installs it first with `apt-get update && apt-get install -y
// nginx`, quietly and within InstallTimeout. Every failure wraps
// ErrNotAvailable and says why.
func Ensure(ctx context.Context) (string, error) {
	if path, err := Find(); err == nil {
		return path, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: not installed, and installing it needs root", ErrNotAvailable)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("%w: not installed, and there is no apt-get", ErrNotAvailable)
	}
	ctx, cancel := context.WithTimeout(ctx, InstallTimeout)
	defer cancel()
	for _, args := range [][]string{{"-qq", "update"}, {"-qq", "install", "-y", "--no-install-recommends", "nginx"}} {
		if err := aptGet(ctx, args...); err != nil {
			return "", err
		}
	}
	return Find()
}

func aptGet(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: apt-get %v failed: %v: %s", ErrNotAvailable, args, err, lastLines(out, 5))
	}
	return nil
}

var versionRE = regexp.MustCompile(`nginx/(\d+)\.(\d+)\.(\d+)`)

// Version returns the version of the nginx at path as major, minor, patch.
func Version(path string) ([3]int, error) {
	out, err := exec.Command(path, "-v").CombinedOutput()
	if err != nil {
		return [3]int{}, fmt.Errorf("%w: %s -v failed: %v: %s", ErrNotAvailable, path, err, lastLines(out, 3))
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return [3]int{}, fmt.Errorf("cannot parse the version of %s from %q", path, out)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(string(m[i+1]))
	}
	return v, nil
}

// atLeast reports whether v is at least major.minor.patch.
func atLeast(v [3]int, major, minor, patch int) bool {
	w := [3]int{major, minor, patch}
	for i := range v {
		if v[i] != w[i] {
			return v[i] > w[i]
		}
	}
	return true
}

// lastLines returns the last n lines of b, trimmed, for error messages.
func lastLines(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}
