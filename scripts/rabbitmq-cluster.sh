#!/usr/bin/env bash
# A three-node RabbitMQ cluster on loopback from the Debian rabbitmq-server
# package, beside (never touching) the machine's shared broker on :5672:
# nodes NAME-1..3@localhost, AMQP ports BASE+1..3, distribution
# ports BASE+11..13, data, logs, config and an Erlang cookie of their own
# under DIR (HOME is DIR/home, so rabbitmqctl here cannot reach another
# node), one scheduler and 256 MiB memory watermark each.
#
#   scripts/rabbitmq-cluster.sh start    # prints AMQP_URL=amqp://...,amqp://...,amqp://...
#   scripts/rabbitmq-cluster.sh ctl N ARGS...   # rabbitmqctl on node N (e.g. stop_app)
#   scripts/rabbitmq-cluster.sh stop     # stops the nodes (by their PID files), removes DIR
#
# Env: BORDA_RMQ_CLUSTER_DIR (default /tmp/borda-rmq-cluster),
#      BORDA_RMQ_CLUSTER_BASE (default 46000),
#      BORDA_RMQ_CLUSTER_NAME (node-name prefix, default borda-cluster): two
#      clusters on one machine need different names, bases and directories.
set -euo pipefail
dir=${BORDA_RMQ_CLUSTER_DIR:-/tmp/borda-rmq-cluster}
base=${BORDA_RMQ_CLUSTER_BASE:-46000}
name=${BORDA_RMQ_CLUSTER_NAME:-borda-cluster}
case $name in
'' | *[!a-z0-9-]*) echo "rabbitmq-cluster: BORDA_RMQ_CLUSTER_NAME must be lower-case letters, digits and dashes" >&2; exit 2 ;;
rabbit) echo "rabbitmq-cluster: BORDA_RMQ_CLUSTER_NAME must not be the shared node's name" >&2; exit 2 ;;
esac
case $base in '' | *[!0-9]*) echo "rabbitmq-cluster: BORDA_RMQ_CLUSTER_BASE must be a port number" >&2; exit 2 ;; esac
if [ "$base" -ge 5659 ] && [ "$base" -le 5671 ] || [ "$base" -gt 65500 ]; then
	echo "rabbitmq-cluster: BORDA_RMQ_CLUSTER_BASE $base would use the shared broker's port 5672 or run past 65535" >&2
	exit 2
fi
bin=/usr/lib/rabbitmq/bin

nodeenv() { # N: the environment of node N
	local d=$dir/$1
	echo HOME="$dir/home" RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" RABBITMQ_NODENAME="$name-$1@localhost" \
		RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$((base + $1)) RABBITMQ_DIST_PORT=$((base + 10 + $1)) \
		RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" RABBITMQ_PID_FILE="$d/pid" ERL_EPMD_ADDRESS=127.0.0.1
}
ctl() { local n=$1; shift; env $(nodeenv "$n") "$bin/rabbitmqctl" -n "$name-$n@localhost" "$@"; }

case ${1:-} in
start)
	[ -x "$bin/rabbitmq-server" ] || { echo "rabbitmq-cluster: the Debian rabbitmq-server is not installed" >&2; exit 1; }
	mkdir -p "$dir/home"
	if [ ! -f "$dir/home/.erlang.cookie" ]; then
		head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F >"$dir/home/.erlang.cookie"
		chmod 400 "$dir/home/.erlang.cookie"
	fi
	for n in 1 2 3; do
		d=$dir/$n
		mkdir -p "$d"
		: >"$d/rabbitmq-env.conf"
		echo '[].' >"$d/enabled_plugins"
		printf 'listeners.tcp.default = 127.0.0.1:%d\nvm_memory_high_watermark.absolute = 256MiB\ndisk_free_limit.absolute = 50MB\nloopback_users = none\n' $((base + n)) >"$d/rabbitmq.conf"
		env $(nodeenv $n) RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+S 1:1 -kernel inet_dist_use_interface {127,0,0,1}" \
			setsid "$bin/rabbitmq-server" </dev/null >>"$d/server.out" 2>&1 &
	done
	# await_startup fails at once while a node has not registered with
	# epmd yet: retry it until the node is up, for at most 90 s each.
	for n in 1 2 3; do
		for try in $(seq 90); do
			ctl $n await_startup --timeout 90 >/dev/null 2>&1 && break
			! grep -q 'Kernel pid terminated' "$dir/$n/server.out" 2>/dev/null ||
				{ echo "rabbitmq-cluster: node $n exited at start: $(tail -c 300 "$dir/$n/server.out")" >&2; exit 1; }
			[ "$try" -lt 90 ] || { echo "rabbitmq-cluster: node $n did not start; see $dir/$n/server.out" >&2; exit 1; }
			sleep 1
		done
	done
	for n in 2 3; do
		if ! ctl $n cluster_status 2>/dev/null | grep -q "$name-1@localhost"; then
			ctl $n stop_app >/dev/null
			ctl $n join_cluster "$name-1@localhost" >/dev/null
			ctl $n start_app >/dev/null
		fi
	done
	echo "AMQP_URL=amqp://guest:guest@127.0.0.1:$((base + 1))/,amqp://guest:guest@127.0.0.1:$((base + 2))/,amqp://guest:guest@127.0.0.1:$((base + 3))/"
	;;
ctl)
	shift
	ctl "$@"
	;;
stop)
	for n in 3 2 1; do
		if [ -s "$dir/$n/pid" ]; then
			pid=$(cat "$dir/$n/pid")
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
		fi
	done
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 start|stop|ctl N ARGS..." >&2
	exit 2
	;;
esac
