// Package serverscript runs the scripts under scripts/ that start, stop and
// report on the real servers of the tests (the Redis Cluster, the S3 server):
// each server listens on a port of its own and keeps its data in a directory
// fixed by that port, so that a server a test process left running is found
// and reused.
//
// It owns the running of the scripts and the start-once of a server; what a
// server prints and how its tests use it are the business of redistest and
// s3test.
package serverscript

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Script is one script of scripts/, with the commands start, stop and status
// and the data directory as its argument.
type Script struct {
	File    string   // the file under scripts/
	Dir     string   // the data directory's name under os.TempDir(), before -port
	PortEnv string   // the environment variable that passes the port
	Env     []string // added to the environment of every run
}

// DataDir is the data directory of the server on port.
func (s Script) DataDir(port int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d", s.Dir, port))
}

// Run runs the script with cmd (start, stop, status) on the server of port,
// with env added to the environment, and returns its output.
func (s Script) Run(cmd string, port int, env ...string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	c := exec.Command("bash", filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", s.File), cmd, s.DataDir(port))
	c.Env = append(os.Environ(), fmt.Sprintf("%s=%d", s.PortEnv, port))
	c.Env = append(c.Env, s.Env...)
	c.Env = append(c.Env, env...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", s.File, cmd, err, stderr.String())
	}
	return string(out), nil
}

// Stop stops the server of port and removes its data directory.
func (s Script) Stop(port int) error {
	if _, err := s.Run("stop", port); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return err
	}
	return os.RemoveAll(s.DataDir(port))
}

// Server is the server of one port, started once on first use. The zero
// value is ready to use; it is safe for concurrent use.
type Server struct {
	once    sync.Once
	out     string
	err     error
	started bool // by this process: stopped by Stop
}

// Start starts the server of port with s, reusing one found running, on the
// first call, and returns what the script's start printed. When there is no
// server, it fails t if one of the environment variables require is 1 and
// skips it otherwise, saying no what.
func (v *Server) Start(t testing.TB, s Script, port int, what string, require ...string) string {
	t.Helper()
	v.once.Do(func() {
		_, err := s.Run("status", port)
		running := err == nil
		v.out, v.err = s.Run("start", port)
		v.started = v.err == nil && !running
	})
	if v.err != nil {
		for _, env := range require {
			if os.Getenv(env) == "1" {
				t.Fatalf("no %s: %v", what, v.err)
			}
		}
		t.Skipf("no %s: %v", what, v.err)
	}
	return v.out
}

// Stop stops the server of port and removes its data if Start started it.
func (v *Server) Stop(s Script, port int) {
	if v.started {
		s.Stop(port)
	}
}
