package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// No container engine runs in the test environment, so the Dockerfile is
// checked as a build file: its stages, that what it copies exists, that its
// Go image matches go.mod, and that its build command is the Makefile's.

const repoRoot = "../.."

// dockerInstr is one instruction of a Dockerfile, continuation lines joined.
type dockerInstr struct{ op, args string }

func readDockerfile(t *testing.T) []dockerInstr {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dockerInstr
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cur += line
		op, args, _ := strings.Cut(cur, " ")
		out = append(out, dockerInstr{strings.ToUpper(op), strings.TrimSpace(args)})
		cur = ""
	}
	if cur != "" {
		t.Fatalf("Dockerfile ends in a continuation: %q", cur)
	}
	return out
}

func TestDockerfile(t *testing.T) {
	instrs := readDockerfile(t)
	known := map[string]bool{"FROM": true, "WORKDIR": true, "COPY": true, "RUN": true, "ARG": true,
		"USER": true, "VOLUME": true, "EXPOSE": true, "ENTRYPOINT": true, "CMD": true, "ENV": true, "LABEL": true}
	stages := map[string]bool{}
	var froms []string
	var build string
	for _, in := range instrs {
		if !known[in.op] {
			t.Errorf("unknown instruction %s %s", in.op, in.args)
		}
		switch in.op {
		case "FROM":
			froms = append(froms, in.args)
			if image, name, ok := strings.Cut(in.args, " AS "); ok {
				stages[name] = true
				checkGoImage(t, image)
			}
		case "COPY":
			checkCopy(t, in.args, stages, len(froms) == 1)
		case "RUN":
			if strings.Contains(in.args, "go build") {
				build = in.args
			}
		}
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[1], "gcr.io/distroless/static") {
		t.Errorf("want a build stage and a distroless static stage, got %q", froms)
	}
	checkBuildMatchesMakefile(t, build)
}

// checkGoImage checks that the build stage's Go is the one go.mod names.
func checkGoImage(t *testing.T, image string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil || image != "golang:"+string(m[1]) {
		t.Errorf("build image %q, go.mod says go %s", image, m[1])
	}
}

// checkCopy checks that a COPY's sources exist: in the repository for the
// build stage, in a named stage for --from.
func checkCopy(t *testing.T, args string, stages map[string]bool, buildStage bool) {
	t.Helper()
	fields := strings.Fields(args)
	var from string
	for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
		if v, ok := strings.CutPrefix(fields[0], "--from="); ok {
			from = v
		}
		fields = fields[1:]
	}
	if len(fields) < 2 {
		t.Errorf("COPY %s: want sources and a destination", args)
		return
	}
	if from != "" {
		if !stages[from] {
			t.Errorf("COPY --from=%s: no such stage", from)
		}
		return
	}
	if !buildStage {
		t.Errorf("COPY %s: the final stage copies only from the build stage", args)
	}
	for _, src := range fields[:len(fields)-1] {
		if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
			t.Errorf("COPY source %s: %v", src, err)
		}
	}
}

// checkBuildMatchesMakefile compares the Dockerfile's go build with the one
// `make -n build` prints for the gateway, the version aside.
func checkBuildMatchesMakefile(t *testing.T, docker string) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	out, err := exec.Command("make", "-s", "-n", "-C", repoRoot, "build", "VERSION=V").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	var mk string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "./cmd/gateway") {
			mk = line
		}
	}
	norm := func(s string) string {
		s = strings.ReplaceAll(s, "${VERSION}", "V")
		s = strings.NewReplacer(`"`, "", "'", "", "-o bin/gateway", "-o OUT", "-o /out/gateway", "-o OUT").Replace(s)
		s, _, _ = strings.Cut(s, "&&")
		return strings.Join(strings.Fields(s), " ")
	}
	if mk == "" || norm(mk) != norm(docker) {
		t.Errorf("the Dockerfile builds with\n  %s\nthe Makefile with\n  %s", norm(docker), norm(mk))
	}
}

// TestMakeRunArgs: make run passes a config, a listen address and any other
// flags through.
func TestMakeRunArgs(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	out, err := exec.Command("make", "-s", "-n", "-C", repoRoot, "run", "CONFIG=g.yaml", "LISTEN=127.0.0.1:9000", "ARGS=-access-log off").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "bin/gateway -config g.yaml -listen 127.0.0.1:9000 -access-log off") {
		t.Fatalf("make run runs:\n%s", out)
	}
}

// TestDockerignore: what git ignores (builds, the store, the JS tests'
// node_modules after make test) stays out of the Docker build context too.
func TestDockerignore(t *testing.T) {
	read := func(name string) []string {
		b, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		var pats []string
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				pats = append(pats, strings.Trim(line, "/"))
			}
		}
		return pats
	}
	docker := read(".dockerignore")
	for _, g := range read(".gitignore") {
		covered := false
		for _, d := range docker {
			// git matches a pattern without a slash at any depth; Docker only
			// with a leading **/.
			covered = covered || d == g || strings.HasPrefix(g, d+"/") || (!strings.Contains(g, "/") && d == "**/"+g)
		}
		if !covered {
			t.Errorf(".gitignore has %s, .dockerignore does not", g)
		}
	}
}
