#!/usr/bin/env bash
# Short versions of the load, ingress, soak, fault and chaos benches (about 4 minutes
# together on 2 CPUs, once built), so the harness never rots. CI calls this from
# .ci/run; the full runs are in docs/performance.md and docs/reliability.md.
#
# Needs the local Redis (127.0.0.1:6379), RabbitMQ (127.0.0.1:5672) and PostgreSQL
# (127.0.0.1:5432, or BORDA_TEST_DATABASE_URL: the chaos run creates and drops a
# database of its own there), the Debian rabbitmq-server (the fault and chaos runs
# start private nodes),
# redis-server on PATH (the fault bench starts its own), nginx for the load
# bench's reference row and upstream, and wrk for its saturation figures;
# scripts/bench-deps.sh installs those two from the distribution's packages
# when missing (else the nginx row is skipped, and said so, and the Go
# generator is used). Load
# figures never fail CI (they depend on the machine); the soak's flatness
# and the accounting of the ingress, soak and fault benches (lost = 0) and of the
# chaos run (every 200 delivered or dead-lettered exactly once) do.
# BORDA_BIN=path reuses an already built borda.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
borda=${BORDA_BIN:-}
if [ -z "$borda" ]; then
	echo "bench-smoke: building borda"
	borda=$work/borda
	go build -o "$borda" ./cmd/borda
fi
go build -o "$work/load" ./bench/cmd/load
go build -o "$work/soak" ./bench/cmd/soak
go build -o "$work/faults" ./bench/cmd/faults
go build -o "$work/ingress" ./bench/cmd/ingress
go build -o "$work/chaos" ./bench/cmd/chaos

scripts/bench-deps.sh
targets=upstream,bare-go,nginx,borda,borda-3rules
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
	echo "bench-smoke: nginx not installed (apt-get install -y nginx-light): skipping its row"
	targets=upstream,bare-go,borda,borda-3rules
fi

start=$SECONDS
echo "bench-smoke: load"
timeout 90 "$work/load" -ci -borda "$borda" -targets "$targets"
echo "bench-smoke: ingress"
timeout 60 "$work/ingress" -ci -borda "$borda"
echo "bench-smoke: soak"
timeout 120 "$work/soak" -ci -borda "$borda"
echo "bench-smoke: faults"
timeout 90 "$work/faults" -ci -borda "$borda"
echo "bench-smoke: chaos"
# About 70 s on a quiet machine; the bound is for a loaded one (the run's own
# recovery bound is 90 s per fault).
timeout 300 "$work/chaos" -ci -borda "$borda"
echo "bench-smoke: ok in $((SECONDS - start)) s (after building)"
