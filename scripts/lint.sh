#!/usr/bin/env bash
# Static checks: go vet, staticcheck (always) and govulncheck (when its
# vulnerability database is reachable). Installs both tools at pinned
# versions into $(go env GOPATH)/bin when missing or at another version.
#
#   scripts/lint.sh                # whole module
#   scripts/lint.sh ./gateway/...  # some packages
#
# govulncheck needs https://vuln.go.dev (or a local copy). Offline it fails
# with "fetching vulnerabilities: ... no such host", which says nothing
# about the code, so this script probes the database first and SKIPS the
# scan, saying so, when it cannot reach it. Point BORDA_VULNDB at a mirror
# (an https:// URL, or file:///abs/path of an unpacked vuln.go.dev copy) to
# scan offline; BORDA_REQUIRE_VULNCHECK=1 turns a skip into a failure.
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
file://*) [ -f "${VULNDB#file://}/index/modules.json" ] || [ -f "${VULNDB#file://}/index/modules.json.gz" ] && reachable=1 ;;
*) curl -fsS --max-time 5 -o /dev/null "$VULNDB/index/db.json.gz" 2>/dev/null && reachable=1 ;;
esac
if [ $reachable = 1 ]; then
	echo "lint: govulncheck -db $VULNDB"
	"$bin/govulncheck" -db "$VULNDB" "${pkgs[@]}"
else
	echo "lint: govulncheck SKIPPED: vulnerability database $VULNDB unreachable (offline?)." >&2
	echo "lint:   run it where vuln.go.dev is reachable, or set BORDA_VULNDB to a mirror." >&2
	if [ "${BORDA_REQUIRE_VULNCHECK:-0}" = 1 ]; then
		exit 1
	fi
fi
echo "lint: ok"
