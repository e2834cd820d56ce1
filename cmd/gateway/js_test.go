package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// jsDir holds the end-to-end tests with the official JS SDKs (openai,
// @anthropic-ai/sdk, @google/genai), pinned in its package.json and
// package-lock.json.
const jsDir = "testdata/js"

// TestJSSDKs runs jsDir's node tests against the offline demo: the gateway
// binary with its bundled simulator, as a new user starts it. It installs the
// pinned SDKs with npm ci; it skips only when node and npm cannot be had.
func TestJSSDKs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the JS SDK tests install packages and start node")
	}
	node := installJS(t)
	g := launch(t, t.TempDir(), []string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "json"}, nil)
	runJS(t, node, g, "GATEWAY_URL="+g.base, "GATEWAY_KEY="+demoKey)
}

// installJS installs jsDir's pinned SDKs with npm ci and returns node's
// path; it skips the test when node and npm cannot be had.
func installJS(t *testing.T) string {
	t.Helper()
	npm := needTool(t, "npm", "npm")
	node := needTool(t, "node", "nodejs")
	ci := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	ci.Dir = jsDir
	if out, err := ci.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", jsDir, err, out)
	}
	return node
}

// runJS runs jsDir's node tests against g with env added to the process's.
func runJS(t *testing.T, node string, g *gateway, env ...string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(jsDir, "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no JS tests in %s: %v", jsDir, err)
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	run := exec.Command(node, append([]string{"--test", "--test-reporter=spec", "--test-concurrency=1"}, files...)...)
	run.Dir = jsDir
	run.Env = append(append(os.Environ(), env...), "NO_COLOR=1")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s\ngateway log:\n%s", err, out, g.stderr.String())
	}
	summary := string(out)
	if i := strings.LastIndex(summary, "ℹ tests"); i >= 0 {
		summary = summary[i:]
	}
	t.Logf("JS SDK tests:\n%s", summary)
}

// runScript runs jsDir's script with node against g, with env added to the
// process's, and logs its output.
func runScript(t *testing.T, node string, g *gateway, script string, env ...string) {
	t.Helper()
	run := exec.Command(node, script)
	run.Dir = jsDir
	run.Env = append(append(os.Environ(), env...), "NO_COLOR=1")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s with %q: %v\n%s\ngateway log:\n%s", script, env, err, out, g.stderr.String())
	}
	t.Logf("%s", out)
}

// needTool returns the path of command, installing the Debian package pkg
// with .ci/apt-install when it is missing; it skips the test, saying why,
// when that fails.
func needTool(t *testing.T, command, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(command); err == nil {
		return p
	}
	out, err := exec.Command("../../.ci/apt-install", command, pkg).CombinedOutput()
	if err != nil {
		t.Skipf("%s is not installed and the Debian package %s could not be installed: %v\n%s", command, pkg, err, out)
	}
	p, err := exec.LookPath(command)
	if err != nil {
		t.Skipf("%s not on the PATH after installing %s: %v", command, pkg, err)
	}
	return p
}
