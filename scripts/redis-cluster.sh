#!/usr/bin/env bash
# redis-cluster.sh start|stop|status DIR: a Redis Cluster of 6 nodes (3 masters, 3 replicas)
# on loopback for the store tests, with its pidfiles, logs and data under DIR.
#
#   start DIR   install Debian's redis-server and redis-tools when missing (as root), start the
#               nodes, create the cluster, wait until it is ok with every replica linked, and
#               print the addresses, one a line. A running cluster of the same DIR is reused.
#   stop DIR    stop the nodes started from DIR (by the pids in its pidfiles), nothing else.
#   status DIR  print cluster_state and the addresses; exit 1 when the cluster is not up.
#
# Environment: REDIS_CLUSTER_PORT (first port; the nodes use 6 ports from it; default the port
# DIR was started with, else 7001),
# REDIS_CLUSTER_NODE_TIMEOUT (cluster-node-timeout in ms, default 5000: a failover takes about
# that long; a failover test sets less, a loaded machine wants more), REDIS_CLUSTER_WAIT (seconds to wait for the cluster, default 120).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [[ -z $cmd || -z $dir ]]; then
	echo "usage: $0 start|stop|status DIR" >&2
	exit 2
fi
# The first port: from the environment, else the one DIR was started with, else 7001.
port0=${REDIS_CLUSTER_PORT:-$(cat "$dir/port" 2>/dev/null || echo 7001)}
node_timeout=${REDIS_CLUSTER_NODE_TIMEOUT:-5000}
wait_s=${REDIS_CLUSTER_WAIT:-120}
ports=()
for i in 0 1 2 3 4 5; do ports+=($((port0 + i))); done

log() { echo "redis-cluster: $*" >&2; }

install_redis() {
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
		return
	fi
	if [[ $(id -u) -ne 0 ]]; then
		log "redis-server or redis-cli is missing and this is not root: cannot install them"
		exit 3
	fi
	log "installing redis-server and redis-tools"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq redis-server redis-tools >&2
}

# running PID: the process runs and is no zombie (a killed daemon whose parent, init, does
# not reap it stays one).
running() {
	local state
	state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $state != Z* ]]
}

# alive PORT: the node started from DIR on PORT is running.
alive() {
	local pidfile="$dir/$1/redis.pid"
	[[ -f $pidfile ]] && running "$(cat "$pidfile")"
}

start_node() {
	local port=$1 ndir="$dir/$1"
	mkdir -p "$ndir"
	alive "$port" && return
	# A node that is not running restarts from its own nodes.conf and append-only file.
	redis-server --port "$port" --bind 127.0.0.1 --dir "$ndir" --daemonize yes \
		--pidfile "$ndir/redis.pid" --logfile "$ndir/redis.log" \
		--cluster-enabled yes --cluster-config-file nodes.conf \
		--cluster-node-timeout "$node_timeout" --appendonly yes --save '' \
		--repl-diskless-sync-delay 0 --protected-mode no >&2
}

cli() { redis-cli -h 127.0.0.1 -p "$@"; }

# ready: the cluster is ok, has 3 masters, and every replica's link to its master is up.
ready() {
	local info slaves links
	info=$(cli "${ports[0]}" cluster info 2>/dev/null) || return 1
	grep -q '^cluster_state:ok' <<<"$info" || return 1
	grep -q '^cluster_size:3' <<<"$info" || return 1
	slaves=0
	links=0
	for p in "${ports[@]}"; do
		local repl
		repl=$(cli "$p" info replication 2>/dev/null) || return 1
		if grep -q '^role:slave' <<<"$repl"; then
			slaves=$((slaves + 1))
			grep -q '^master_link_status:up' <<<"$repl" && links=$((links + 1))
		fi
	done
	[[ $slaves -eq 3 && $links -eq 3 ]]
}

wait_ready() {
	local deadline=$((SECONDS + wait_s))
	until ready; do
		if ((SECONDS >= deadline)); then
			log "cluster on ports ${ports[0]}..${ports[5]} not ready after ${wait_s}s; logs in $dir/*/redis.log"
			return 1
		fi
		sleep 0.2
	done
}

print_addrs() { for p in "${ports[@]}"; do echo "127.0.0.1:$p"; done; }

start() {
	install_redis
	mkdir -p "$dir"
	echo "$port0" >"$dir/port"
	for p in "${ports[@]}"; do start_node "$p"; done
	for p in "${ports[@]}"; do
		local deadline=$((SECONDS + wait_s))
		until cli "$p" ping >/dev/null 2>&1; do
			((SECONDS < deadline)) || { log "node $p does not answer"; exit 1; }
			sleep 0.1
		done
	done
	if ! cli "${ports[0]}" cluster info | grep -q '^cluster_known_nodes:6'; then
		local addrs=()
		for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
			{ log "cluster create failed:"; cat "$dir/create.log" >&2; exit 1; }
	fi
	wait_ready
	print_addrs
}

stop() {
	local pids=()
	for p in "${ports[@]}"; do
		local pidfile="$dir/$p/redis.pid"
		if alive "$p"; then
			pids+=("$(cat "$pidfile")")
			kill "$(cat "$pidfile")"
		fi
	done
	for pid in "${pids[@]}"; do
		while running "$pid"; do sleep 0.05; done
	done
	log "stopped ${#pids[@]} nodes of $dir"
}

status() {
	cli "${ports[0]}" cluster info 2>/dev/null | grep '^cluster_state' || { echo "cluster_state:down"; exit 1; }
	ready || exit 1
	print_addrs
}

case $cmd in
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 start|stop|status DIR" >&2; exit 2 ;;
esac
