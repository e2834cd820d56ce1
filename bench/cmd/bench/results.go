package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/modelgate/gateway/bench/report"
	"github.com/modelgate/gateway/bench/scenario"
)

// readmeFile is what the results directory shows first: the latest table.
const readmeFile = "README.md"

// notes describe the machine, the processes and their CPU budgets.
func (r *runner) notes() []string {
	cores := runtime.NumCPU()
	notes := []string{
		fmt.Sprintf("Mode %s: per scenario, a warm-up of %v per target, then %d rounds; in each round every target runs %v, "+
			"the targets taking turns at going first. req/s is the median of the rounds; percentiles are over all rounds. "+
			"The machine is shared: compare targets within one run, as ratios, and prefer the full mode's longer rounds.",
			r.o.mode(), r.o.warmup, r.o.rounds, r.o.duration),
		fmt.Sprintf("Machine: %d cores (nproc), %s, %s/%s. The load generator, %d simulator processes, the gateway and nginx all share these cores.",
			cores, runtime.Version(), runtime.GOOS, runtime.GOARCH, simDeployments),
		fmt.Sprintf("CPU budget as each proxy is deployed by default: the gateway runs with Go's default GOMAXPROCS (= %d, the cores; "+
			"GOMAXPROCS unset in its environment: %t); nginx runs worker_processes auto (%s). The harness itself runs with GOMAXPROCS %d.",
			cores, os.Getenv("GOMAXPROCS") == "", r.nginxWorkers(), runtime.GOMAXPROCS(0)),
		fmt.Sprintf("Targets: direct is the upstream simulator itself (the floor); gateway is bin/gateway in front of it; "+
			"nginx is a keep-alive reverse proxy with buffering off in front of the same simulator%s; in the affinity scenario, "+
			"in front of all %d simulators with hash $http_x_session_id consistent, as the gateway spreads sessions over them.",
			r.nginxVersion(), simDeployments),
		"Heads as in production: every request carries the headers its family's Go SDK sends (User-Agent, Accept, eight X-Stainless-*, " +
			"Accept-Encoding), and the simulator answers with its provider's (request id, rate limits, organisation, front-end " +
			"headers: 17 to 20 in all, names in lower case).",
		"CPU µs/req and peak RSS are those of the target's own processes while it is measured: the simulator process for direct, " +
			"the gateway process for gateway, the nginx master and workers for nginx.",
		fmt.Sprintf("Gateway config: one key; an alpha and a beta upstream per simulator, max_conns %d per deployment "+
			"(the default 512 would queue the idle scenario's streams); an embedded Pebble store in a temp dir.", scenario.DefaultMaxConns),
		"Access logs are off on both proxies: nginx's config says access_log off, the gateway runs with -access-log off " +
			"(its default writes a line per request to stdout).",
		"The gateway is restarted before each scenario, its store directory kept, so the memory a scenario shows is its own, " +
			"not what earlier scenarios left in the process.",
	}
	notes = append(notes, "Paced streams (llm-streams): at each size, every target in turn opens all its streams at once and reads "+
		"each to its end, one goroutine per stream in the harness; the sizes are lowered to what the open-files hard limit "+
		"leaves a proxy, which holds two descriptors per stream. RSS per stream is the target's RSS at the sample "+
		"with the most streams open, less its RSS before its first paced stream of the run (a process keeps most memory it "+
		"took, so the RSS before a later round is no base), over that count; CPU per event is the target's CPU time over the events received; "+
		"an event's delay is its read time here less the send stamp the simulator put in it (same clock).")
	curves := "Go's defaults (X25519MLKEM768 first, which the gateway picks; nginx's OpenSSL 3.0 picks X25519)"
	if r.o.tlsX25519 {
		curves = "X25519 alone (-tls-x25519), the key exchange of both proxies"
	}
	notes = append(notes, "TLS scenarios (chat-tls, chat-tls-handshake): the gateway's listen_tls and nginx's ssl listener "+
		"present the run's self-signed ECDSA P-256 certificate; the load generator speaks TLS 1.3 with "+curves+
		", and without a session cache, so every new connection is a full handshake, as Go's HTTP client by default.")
	notes = append(notes, "gateway-traced (on chat and chat-stream) is the gateway with tracing: {sample_ratio: 1.0} exporting "+
		"every call's spans over OTLP/HTTP to a real Jaeger (scripts/jaeger.sh, in-memory storage) on loopback; its CPU µs/req "+
		"less the gateway's is what tracing adds per call. Jaeger's own CPU is not counted.")
	notes = append(notes, "Idle streams: each target is measured once, not in rounds. A simulator notices a closed idle stream "+
		"only at its next frame, so direct holds its streams at the second simulator process (a copy of the first), "+
		"leaving the first, behind the proxies, room under the open-files limit.")
	if len(r.d.floors) > 0 {
		notes = append(notes, "go-relay and fasthttp-relay (bench/cmd/floor, in the gateway's place, on the chat scenarios and alpha's streamed messages: "+
			strings.Join(floorScenarios, ", ")+"; fasthttp-relay also on llm-streams) are the least a proxy in Go can do: each relays a call to the first simulator "+
			"with the upstream's key and nothing else (no authentication, peek, routing, usage, metrics or bounds). go-relay "+
			"reads the request by its Content-Length and sends the upstream's bytes back as they came (a stream chunk by chunk, "+
			"each burst already read in one write), a goroutine and an upstream connection per client connection; "+
			"fasthttp-relay is fasthttp's own reverse proxy (a fasthttp server whose handler calls a HostClient; a stream's body "+
			"streamed as fasthttp streams one). Both use the gateway's socket layer (proxy/rawio). Between go-relay and "+
			"fasthttp-relay is what fasthttp costs a proxy; between fasthttp-relay and the gateway, the gateway's own work.")
	}
	if r.d.nginxSkipped != "" {
		notes = append(notes, "nginx skipped: "+r.d.nginxSkipped)
	}
	if r.d.redisSkipped != "" {
		notes = append(notes, "gateway-redis skipped: "+r.d.redisSkipped)
	} else {
		notes = append(notes, "gateway-redis is the same binary and config on the redis store engine (replicas: 1: each write "+
			"waits for one replica), on a 6-node Redis Cluster (3 masters, 3 replicas, appendonly) of scripts/redis-cluster.sh "+
			"on the same cores; measured in the scenarios that use the store only (responses-create, responses-retrieve, upload).")
	}
	if r.d.blobsSkipped != "" {
		notes = append(notes, "gateway-redis-s3 skipped: "+r.d.blobsSkipped)
	} else {
		notes = append(notes, "gateway-redis-s3 is gateway-redis with store.blobs: the files' bytes in a bucket of a real S3 "+
			"server (versitygw of scripts/s3-server.sh, posix backend, on 127.0.0.1:7431 and the same disk and cores), "+
			"Redis keeping the files' records; measured in the scenarios that use the store only. "+
			"files-upload-* are measured on the gateway's store engines alone: the simulator has no part in an upload.")
	}
	return notes
}

func (r *runner) nginxWorkers() string {
	if r.d.nginx == nil {
		return "not running"
	}
	return fmt.Sprintf("%d workers", max(len(r.d.nginxPIDs)-1, 0))
}

func (r *runner) nginxVersion() string {
	if r.d.nginxVersion == "" {
		return ""
	}
	return " (nginx " + r.d.nginxVersion + " from Debian)"
}

// plotName matches the plots report.WritePlots writes, so stale ones go.
var plotName = regexp.MustCompile(`^\d\d-.+-(latency|throughput|memory|cpu|delay)\.png$`)

// writeResults writes the plots, results.json and README.md into dir:
// README.md is the report's markdown with the goals of the issue inserted
// after the tables.
func writeResults(dir string, run *report.Run, scs []scenario.Scenario) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if plotName.MatchString(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := report.WriteAll(dir, run); err != nil {
		return err
	}
	mdPath := filepath.Join(dir, report.MarkdownFile)
	md, err := os.ReadFile(mdPath)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	head, plots, _ := strings.Cut(string(md), "\n## ")
	b.WriteString(head)
	b.WriteString("\n")
	writeGoals(&b, run, scs)
	writeGoals41(&b, run)
	writeScenarios(&b, scs)
	b.WriteString(reproduce)
	if plots != "" {
		b.WriteString("## Plots\n\n### ")
		b.WriteString(strings.ReplaceAll(plots, "\n## ", "\n### "))
	}
	if err := os.WriteFile(filepath.Join(dir, readmeFile), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", readmeFile, err)
	}
	return os.Remove(mdPath)
}

// writeScenarios lists what each scenario sends, the idle one included,
// which has no plots.
func writeScenarios(b *bytes.Buffer, scs []scenario.Scenario) {
	b.WriteString("## Scenarios\n\n")
	for _, sc := range scs {
		fmt.Fprintf(b, "- **%s**: %s\n", sc.Name, sc.Description)
	}
	b.WriteString("\n")
}

const reproduce = "## How to run\n\n" +
	"`make bench` (quick, under 3 minutes) or `make bench-full`; both rebuild `bin/` first. " +
	"`go run ./bench/cmd/bench -h` lists the flags: `-scenarios a,b`, `-rounds N`, `-duration D`, `-out DIR`. " +
	"results.json holds every round's raw result, HDR histograms included.\n\n"
