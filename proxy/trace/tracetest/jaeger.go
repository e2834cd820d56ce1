package tracetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Jaeger is a Jaeger started by scripts/jaeger.sh for one test binary.
type Jaeger struct {
	Dir      string
	Port     int    // first port (see the script)
	OTLPHTTP string // base URL of its OTLP/HTTP receiver
	Query    string // base URL of its query API
}

// StartJaeger starts (or reuses) the Jaeger on port, stopped when t ends. It
// skips t when Jaeger cannot be had (it is not built), or fails it under
// GATEWAY_REQUIRE_JAEGER=1.
func StartJaeger(t testing.TB, port int) *Jaeger {
	t.Helper()
	j := &Jaeger{Dir: filepath.Join(os.TempDir(), fmt.Sprintf("gateway-jaeger-%d", port)), Port: port}
	var out string
	_, err := os.Stat(Binary())
	if err != nil {
		// A build takes minutes: longer than a test should wait.
		err = fmt.Errorf("%s is not built (scripts/jaeger.sh build): %w", Binary(), err)
	}
	// A port another process holds makes Jaeger exit: then other ports.
	for try := 0; err == nil || try < 3 && strings.Contains(err.Error(), "address already in use"); try++ {
		if try > 0 {
			j.Port = portFrom(j.Port + 397*try)
			j.Dir = filepath.Join(os.TempDir(), fmt.Sprintf("gateway-jaeger-%d", j.Port))
		}
		if out, err = j.run("start"); err == nil {
			break
		}
	}
	if err != nil {
		if os.Getenv("GATEWAY_REQUIRE_JAEGER") == "1" {
			t.Fatalf("no Jaeger: %v", err)
		}
		t.Skipf("no Jaeger: %v", err)
	}
	urls := strings.Fields(out)
	if len(urls) != 2 {
		t.Fatalf("jaeger.sh start printed %q", out)
	}
	j.OTLPHTTP, j.Query = urls[0], urls[1]
	t.Cleanup(func() {
		if j.Stop() == nil && !t.Failed() {
			os.RemoveAll(j.Dir) // a failed test keeps Jaeger's log
		}
	})
	return j
}

// Stop stops the Jaeger: exports to it then fail.
func (j *Jaeger) Stop() error {
	_, err := j.run("stop")
	return err
}

func (j *Jaeger) run(cmd string) (string, error) {
	c := exec.Command("bash", script(), cmd, j.Dir)
	c.Env = append(os.Environ(), fmt.Sprintf("JAEGER_PORT=%d", j.Port))
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("jaeger.sh %s: %v: %s", cmd, err, stderr.String())
	}
	return string(out), nil
}

// root returns the repository's root directory.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// script returns the path of scripts/jaeger.sh.
func script() string { return filepath.Join(root(), "scripts", "jaeger.sh") }

// Binary returns the path the script builds Jaeger to.
func Binary() string { return filepath.Join(root(), ".cache", "bin", "jaeger") }

// Port is a first port for the Jaeger of this test binary, apart from those
// of other test processes running at once and below the ephemeral ports.
func Port() int { return portFrom(os.Getpid()) }

func portFrom(n int) int { return 10000 + n%4000*5 }

// Spans returns every span of service that Jaeger holds, read through its
// query API (/api/traces).
func (j *Jaeger) Spans(service string) ([]Span, error) {
	resp, err := http.Get(j.Query + "/api/traces?limit=10000&lookback=1h&service=" + url.QueryEscape(service))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == 404 {
		return nil, nil // no trace of the service yet
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("jaeger query: %s", resp.Status)
	}
	var body struct{ Data []jaegerTrace }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var spans []Span
	for _, tr := range body.Data {
		for i := range tr.Spans {
			spans = append(spans, tr.Spans[i].span(tr.Processes))
		}
	}
	return spans, nil
}

// jaegerTrace is a trace as Jaeger's query API returns it.
type jaegerTrace struct {
	Spans     []jaegerSpan
	Processes map[string]struct{ ServiceName string }
}

// jaegerSpan is a span of a jaegerTrace.
type jaegerSpan struct {
	TraceID, SpanID, OperationName string
	ProcessID                      string
	References                     []struct{ RefType, TraceID, SpanID string }
	Tags                           []struct {
		Key   string
		Value any
	}
	Logs []struct {
		Fields []struct {
			Key   string
			Value any
		}
	}
}

// span returns s as a Span, its service named by processes.
func (s *jaegerSpan) span(processes map[string]struct{ ServiceName string }) Span {
	sp := Span{TraceID: s.TraceID, SpanID: s.SpanID, Name: s.OperationName,
		Service: processes[s.ProcessID].ServiceName, Attrs: map[string]string{}}
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			sp.ParentID = r.SpanID
		}
	}
	for _, tag := range s.Tags {
		v := fmt.Sprint(tag.Value)
		if tag.Key == "span.kind" {
			sp.Kind = v
		}
		sp.Attrs[tag.Key] = v
	}
	for _, l := range s.Logs {
		for _, f := range l.Fields {
			if f.Key == "event" {
				sp.Events = append(sp.Events, fmt.Sprint(f.Value))
			}
		}
	}
	return sp
}
