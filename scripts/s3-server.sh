#!/usr/bin/env bash
# s3-server.sh start|stop|status DIR: a real S3 server (versitygw on its posix backend) on
# loopback for the tests of object storage, with its pidfile, log and objects under DIR.
#
#   start DIR   build versitygw into .cache/s3/ of the repository when it is missing (from the
#               Go module proxy: minutes on a small machine, once), start it on loopback, wait
#               until it answers, and print its endpoint (http://127.0.0.1:PORT). A server
#               already running from DIR is reused.
#   stop DIR    stop the server started from DIR (by the pid in its pidfile), nothing else.
#   status DIR  print the endpoint; exit 1 when the server does not answer.
#   build       build the binary only, and print its path.
#
# The credentials are S3_SERVER_ACCESS and S3_SERVER_SECRET (default gatewaytest and
# gatewaytestsecret). Environment: S3_SERVER_PORT (default the port DIR was started with,
# else 7400), S3_SERVER_WAIT (seconds to wait for it to answer, default 60).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [[ -z $cmd || ($cmd != build && -z $dir) ]]; then
	echo "usage: $0 start|stop|status DIR | build" >&2
	exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=$repo/.cache/s3
bin=$cache/versitygw
version=v1.8.0
port=${S3_SERVER_PORT:-$(cat "$dir/port" 2>/dev/null || echo 7400)}
access=${S3_SERVER_ACCESS:-gatewaytest}
secret=${S3_SERVER_SECRET:-gatewaytestsecret}
wait_s=${S3_SERVER_WAIT:-60}
endpoint=http://127.0.0.1:$port

log() { echo "s3-server: $*" >&2; }

build() {
	[[ -x $bin ]] && return
	mkdir -p "$cache"
	log "building versitygw $version into $cache (once)"
	# Outside the repository, so that its go.mod does not take part.
	(cd "$cache" && GOBIN=$cache GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$version") >&2 ||
		{ log "cannot build versitygw"; exit 3; }
}

# running PID: the process runs and is no zombie.
running() {
	local state
	state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $state != Z* ]]
}

alive() { [[ -f $dir/pid ]] && running "$(cat "$dir/pid")"; }

# answers: the server answers HTTP on its port (any status: an unsigned request is refused).
answers() { curl -s -o /dev/null -m 2 "$endpoint/" 2>/dev/null; }

start() {
	build
	mkdir -p "$dir/data" "$dir/meta"
	echo "$port" >"$dir/port"
	if ! alive; then
		# The server closes every inherited descriptor but the standard ones: one that kept,
		# say, the lock file a test run holds (flock) would hold the lock for its whole life.
		(
			for fd in $(ls /proc/$BASHPID/fd); do
				((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
			done
			ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret exec setsid "$bin" --port "127.0.0.1:$port" --quiet --keep-alive \
				posix --sidecar "$dir/meta" "$dir/data"
		) >"$dir/server.log" 2>&1 </dev/null &
		echo $! >"$dir/pid"
	fi
	local deadline=$((SECONDS + wait_s))
	until answers; do
		if ! alive || ((SECONDS >= deadline)); then
			log "server on port $port does not answer; log in $dir/server.log:"
			tail -20 "$dir/server.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "$endpoint"
}

stop() {
	if alive; then
		local pid
		pid=$(cat "$dir/pid")
		kill "$pid"
		while running "$pid"; do sleep 0.05; done
		log "stopped the server of $dir"
	fi
}

status() {
	alive && answers || exit 1
	echo "$endpoint"
}

case $cmd in
build) build; echo "$bin" ;;
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 start|stop|status DIR | build" >&2; exit 2 ;;
esac
