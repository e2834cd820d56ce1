#!/usr/bin/env bash
# jaeger.sh build|start|stop|status DIR: a real Jaeger (github.com/jaegertracing/jaeger
# v1.76.0 cmd/jaeger, an OpenTelemetry Collector distribution) on loopback for the trace
# tests: an OTLP receiver and the query API, in-memory storage, its config, pidfile and log
# under DIR.
#
#   build       build the binary into .cache/bin/jaeger of the repository when it is missing,
#               from the module proxy (a tools module under .cache/jaeger-tool: jaeger's
#               go.mod has a replace directive, which `go install pkg@version` refuses).
#   start DIR   build when missing, start Jaeger, wait until its query API answers, and print
#               the OTLP/HTTP endpoint and the query API's base URL, one a line. A Jaeger
#               running from DIR is reused.
#   stop DIR    stop the Jaeger started from DIR (by the pid in its pidfile), nothing else.
#   status DIR  exit 1 when the Jaeger of DIR is not up.
#
# Environment: JAEGER_PORT (first port, default 14318: OTLP/HTTP on it, OTLP/gRPC on +1,
# the query API's HTTP on +2 and gRPC on +3, the health check on +4), JAEGER_WAIT (seconds
# to wait for it to answer, default 60).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.cache/bin/jaeger
version=v1.76.0
port0=${JAEGER_PORT:-$(cat "$dir/port" 2>/dev/null || echo 14318)}
wait_s=${JAEGER_WAIT:-60}

log() { echo "jaeger: $*" >&2; }

build() {
	[[ -x $bin ]] && return
	log "building github.com/jaegertracing/jaeger/cmd/jaeger@$version into $bin (a few minutes)"
	local tool=$root/.cache/jaeger-tool
	mkdir -p "$tool" "$root/.cache/bin"
	if [[ ! -f $tool/go.mod ]]; then
		cat >"$tool/go.mod" <<MOD
module jaegertool

go 1.26.8

// As jaeger's own go.mod replaces it.
replace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0
MOD
	fi
	(cd "$tool" && go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >&2 &&
		GOBIN=$root/.cache/bin go install github.com/jaegertracing/jaeger/cmd/jaeger >&2)
}

running() {
	local state
	state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $state != Z* ]]
}

alive() { [[ -f $dir/jaeger.pid ]] && running "$(cat "$dir/jaeger.pid")"; }

# answers: the query API serves its service list.
answers() {
	curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$((port0 + 2))/api/services"
}

config() {
	cat <<YAML
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
    traces:
      level: none
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$((port0 + 4))
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$((port0 + 2))
    grpc:
      endpoint: 127.0.0.1:$((port0 + 3))
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$port0
      grpc:
        endpoint: 127.0.0.1:$((port0 + 1))
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
}

start() {
	build
	mkdir -p "$dir"
	if ! alive; then
		echo "$port0" >"$dir/port"
		config >"$dir/config.yaml"
		# Jaeger's own spans go to its own receiver, not to whatever listens on :4317.
		OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$((port0 + 1)) nohup "$bin" --config "$dir/config.yaml" >"$dir/jaeger.log" 2>&1 &
		echo $! >"$dir/jaeger.pid"
	fi
	local deadline=$((SECONDS + wait_s))
	until answers; do
		if ! alive; then
			log "exited; its log:"
			tail -20 "$dir/jaeger.log" >&2
			exit 1
		fi
		if ((SECONDS > deadline)); then
			log "no answer on 127.0.0.1:$((port0 + 2)) after ${wait_s}s"
			exit 1
		fi
		sleep 0.2
	done
	echo "http://127.0.0.1:$port0"
	echo "http://127.0.0.1:$((port0 + 2))"
}

stop() {
	alive || return 0
	local pid
	pid=$(cat "$dir/jaeger.pid")
	kill "$pid"
	for _ in $(seq 100); do
		running "$pid" || break
		sleep 0.1
	done
	running "$pid" && kill -9 "$pid"
	rm -f "$dir/jaeger.pid"
}

case $cmd in
build) build ;;
start | stop | status)
	if [[ -z $dir ]]; then
		echo "usage: $0 start|stop|status DIR" >&2
		exit 2
	fi
	case $cmd in
	start) start ;;
	stop) stop ;;
	status) alive && answers ;;
	esac
	;;
*)
	echo "usage: $0 build|start DIR|stop DIR|status DIR" >&2
	exit 2
	;;
esac
