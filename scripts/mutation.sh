#!/usr/bin/env bash
# Mutation testing of Borda's core packages with gremlins
# (github.com/go-gremlins/gremlins): each mutant (a flipped condition, a
# moved boundary, an arithmetic swap) is built and the package's tests run
# against it; a mutant the tests do not fail "lived". Test efficacy is
# killed / (killed + lived). The figures go into docs/testing.md, between
# the "mutation:begin" and "mutation:end" markers, one row per package
# measured (rows of packages not measured in this run are kept).
#
#   scripts/mutation.sh                      # every core package
#   scripts/mutation.sh cookies identity     # some of them
#
# Slow (minutes per package, the whole test suite of the package runs per
# mutant), so it is not part of .ci/run. It runs niced, one worker by default;
# BORDA_MUTATION_TIMEOUT_COEFFICIENT (default 3) scales gremlins' per-test
# timeout, BORDA_MUTATION_TAGS passes build tags, and each package's run is
# bounded by BORDA_MUTATION_MAX (default 10m, a `timeout` duration): a run
# cut short records "not measured (timed out)". Tests that need Redis,
# RabbitMQ or PostgreSQL skip when those are down, which lets more mutants
# live: run it with the services up. The JSON of each run is left in
# $BORDA_MUTATION_OUT (default .mutation/, ignored by git) to read the
# surviving mutants: `jq '.files[].mutations[] | select(.status=="LIVED")'`.
#
# BORDA_MUTATION_SKIP=REGEXP skips the tests it matches (go test -skip,
# through GOFLAGS; no spaces): the few slow tests of a package (a private
# broker node, a memory alarm) that make each mutant cost a minute. Like
# -short, it can only let more mutants live; a survivor is then checked
# against the skipped tests by hand before it is called equivalent.
#
# BORDA_MUTATION_PARALLEL=N runs each mutant's tests with -parallel N
# (through GOFLAGS): a package whose tests wait on clocks and servers more
# than they compute (ratelimit: 27 s at the default of one per CPU, 10 s
# at 16 on two cores) costs less per mutant.
#
# BORDA_MUTATION_WORKERS=N (default 1) runs N mutants at once (gremlins
# --workers; each worker builds in its own copy of the module): a package
# whose tests mostly wait on servers and timers goes nearly N times faster
# on two cores. A test that fails falsely on a loaded machine would count
# a mutant as killed, so use it only for a package whose -short suite is
# green run beside another copy of itself.
#
# BORDA_MUTATION_EXCLUDE=REGEXP leaves out the files it matches (gremlins
# --exclude-files, on the file's path under the package's directory:
# "limiter.go", "relaxaudit/apply.go"): a package too large for one
# sitting is measured in parts, each recorded on its own row, named
# BORDA_MUTATION_PART when set ("`ratelimit` part `sync`"), else by the
# expression ("`ratelimit` without `sync`"); the parts add up to the package.
#
# BORDA_MUTATION_SHORT=1 runs the tests with -short (through GOFLAGS),
# which skips the few real-time soak tests (each says so in its skip
# message): a mutant only a soak test would kill then lives, so the
# figure can only come out lower, never flattered.
set -euo pipefail

GREMLINS_VERSION=v0.6.0
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

core=(cookies identity ratelimit gateway webhook/ingress webhook/forward webhook/publish telemetry)
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=("${core[@]}")

gremlins=$(go env GOPATH)/bin/gremlins
if ! [ -x "$gremlins" ] || ! go version -m "$gremlins" | grep -q "gremlins[[:space:]]*${GREMLINS_VERSION}"; then
	go install "github.com/go-gremlins/gremlins/cmd/gremlins@${GREMLINS_VERSION}"
fi

out=${BORDA_MUTATION_OUT:-$root/.mutation}
mkdir -p "$out"
coef=${BORDA_MUTATION_TIMEOUT_COEFFICIENT:-3}
workers=${BORDA_MUTATION_WORKERS:-1}
case "$workers" in *[!0-9]* | "" | 0) echo "BORDA_MUTATION_WORKERS must be a positive number" >&2; exit 2 ;; esac
max=${BORDA_MUTATION_MAX:-10m}
tags=${BORDA_MUTATION_TAGS:-}
if [ "${BORDA_MUTATION_SHORT:-}" = 1 ]; then
	export GOFLAGS="${GOFLAGS:+$GOFLAGS }-short"
fi
if [ -n "${BORDA_MUTATION_PARALLEL:-}" ]; then
	case "$BORDA_MUTATION_PARALLEL" in *[!0-9]* | "") echo "BORDA_MUTATION_PARALLEL must be a number" >&2; exit 2 ;; esac
	export GOFLAGS="${GOFLAGS:+$GOFLAGS }-parallel=$BORDA_MUTATION_PARALLEL"
fi
if [ -n "${BORDA_MUTATION_SKIP:-}" ]; then
	case "$BORDA_MUTATION_SKIP" in *" "*) echo "BORDA_MUTATION_SKIP must hold no space (it goes into GOFLAGS)" >&2; exit 2 ;; esac
	export GOFLAGS="${GOFLAGS:+$GOFLAGS }-skip=$BORDA_MUTATION_SKIP"
fi
doc=docs/testing.md
today=$(date -u +%Y-%m-%d)

row() { # package json -> a table row
	jq -r --arg p "$1" --arg d "$today" '
		"| `\($p)` | \(.mutants_killed) | \(.mutants_lived) | \(.mutants_not_covered) | \(.mutants_not_viable) | \(.mutants_timed_out // 0) | \(.test_efficacy | floor) % | \(.mutations_coverage | floor) % | \($d) |"' "$2"
}

for p in "${pkgs[@]}"; do
	json=$out/$(echo "$p" | tr / _).json
	rm -f "$json"
	echo "== $p" >&2
	args=(unleash --workers "$workers" --timeout-coefficient "$coef" --output "$json")
	[ -z "$tags" ] || args+=(--tags "$tags")
	label=$p
	if [ -n "${BORDA_MUTATION_EXCLUDE:-}" ]; then
		args+=(--exclude-files "$BORDA_MUTATION_EXCLUDE")
		label="$p\` without \`$BORDA_MUTATION_EXCLUDE"
		[ -z "${BORDA_MUTATION_PART:-}" ] || label="$p\` part \`$BORDA_MUTATION_PART"
	fi
	if nice -n 10 timeout "$max" "$gremlins" "${args[@]}" "./$p" >&2 && [ -s "$json" ]; then
		r=$(row "$label" "$json")
	else
		r="| \`$label\` | | | | | | not measured (timed out or failed) | | $today |"
	fi
	# Replace this package's row in the table (or append it before the end marker).
	python3 - "$doc" "$label" "$r" <<'EOF'
import re, sys
doc, pkg, row = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(doc).read()
begin, end = "<!-- mutation:begin -->", "<!-- mutation:end -->"
head, rest = text.split(begin, 1)
table, tail = rest.split(end, 1)
lines = [l for l in table.strip("\n").split("\n") if l]
key = "| `%s` |" % pkg
for i, l in enumerate(lines):
    if l.startswith(key):
        lines[i] = row
        break
else:
    lines.append(row)
open(doc, "w").write(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail)
EOF
	echo "$r" >&2
done
