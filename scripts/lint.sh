#!/usr/bin/env bash
# Static checks: go vet, staticcheck (always) and govulncheck (when its
# vulnerability database is reachable). Installs both tools at pinned
# versions into $(go env GOPATH)/bin when missing or at another version.
#
#   scripts/lint.sh                # whole module
#   scripts/lint.sh ./gateway/...  # some packages
#
# govulncheck needs a vulnerability database: https://vuln.go.dev, or a
# local copy. When vuln.go.dev is unreachable (this project's CI machine
# reaches only the package registries) the script takes the database's
# source module, golang.org/x/vulndb, from the Go module proxy: its
# data/osv directory is a flat set of OSV entries, which govulncheck reads
# as a local database (-db file://…). The snapshot's version is printed;
# it trails vuln.go.dev by at most the time since its last commit. Point
# BORDA_VULNDB at a mirror (an https:// URL, or file:///abs/path) to
# choose; when no database can be had the scan is SKIPPED, saying so, and
# BORDA_REQUIRE_VULNCHECK=1 (set by .ci/run) turns that into a failure.
#
# The scan checks the standard library of the Go that builds: run with the
# toolchain go.mod pins (GOTOOLCHAIN=auto where the local default is
# "local"; .ci/run does).
set -euo pipefail

STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}   # staticcheck 2026.2.2: the first line that builds and runs with Go 1.26
GOVULNCHECK_VERSION=${GOVULNCHECK_VERSION:-v1.9.0}
VULNDB=${BORDA_VULNDB:-https://vuln.go.dev}

cd "$(dirname "$0")/.."
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)
bin=$(go env GOPATH)/bin

# install NAME MODULE@VERSION VERSION-STRING-IN-OUTPUT
install() {
	local name=$1 mod=$2 want=$3
	if [ -x "$bin/$name" ] && "$bin/$name" -version 2>/dev/null | grep -q -- "$want"; then
		return
	fi
	echo "lint: installing $mod"
	GOFLAGS=-mod=mod go install "$mod"
}

echo "lint: go vet ${pkgs[*]}"
go vet "${pkgs[@]}"

install staticcheck "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" "(${STATICCHECK_VERSION#v})"
echo "lint: staticcheck $("$bin/staticcheck" -version)"
"$bin/staticcheck" "${pkgs[@]}"

install govulncheck "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION" "govulncheck@$GOVULNCHECK_VERSION"
reachable=0
case $VULNDB in
file://*) # a vuln.go.dev copy, or a flat directory of OSV entries (an empty one would pass any scan)
	d=${VULNDB#file://}
	{ [ -f "$d/index/modules.json" ] || compgen -G "$d/GO-*.json" >/dev/null; } && reachable=1 ;;
*) curl -fsS --max-time 5 -o /dev/null "$VULNDB/index/db.json.gz" 2>/dev/null && reachable=1 ;;
esac
if [ $reachable = 0 ] && [ -z "${BORDA_VULNDB:-}" ]; then
	tmp=$(mktemp -d)
	dl=$(cd "$tmp" && GOFLAGS=-mod=mod timeout 300 go mod download -json golang.org/x/vulndb@latest 2>/dev/null || true)
	rmdir "$tmp"
	dir=$(printf '%s\n' "$dl" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	ver=$(printf '%s\n' "$dl" | sed -n 's/^[[:space:]]*"Version": "\(.*\)",$/\1/p')
	if [ -n "$dir" ] && [ -d "$dir/data/osv" ]; then
		echo "lint: $VULNDB unreachable; using golang.org/x/vulndb@$ver (data/osv) from the module proxy"
		VULNDB="file://$dir/data/osv"
		reachable=1
	fi
fi
if [ $reachable = 1 ]; then
	echo "lint: govulncheck -db $VULNDB ($(go env GOVERSION))"
	"$bin/govulncheck" -db "$VULNDB" "${pkgs[@]}"
else
	echo "lint: govulncheck SKIPPED: vulnerability database $VULNDB unreachable (offline?)." >&2
	echo "lint:   run it where vuln.go.dev is reachable, or set BORDA_VULNDB to a mirror." >&2
	if [ "${BORDA_REQUIRE_VULNCHECK:-0}" = 1 ]; then
		exit 1
	fi
fi
echo "lint: ok"
