#!/usr/bin/env bash
# Installs the load bench's outside tools from the distribution's packages
# when they are missing: wrk (the saturation generator) and nginx-light (the
# reference row, and the static upstream). Issue 5 asks for nginx "installed
# from the distribution's packages when missing"; this is that step, kept out
# of the Go benches so that they never run a package manager by themselves.
#
# Exit status 0 whether or not the install worked: without root, apt-get or a
# reachable package mirror it says what is missing and the benches fall back
# (the Go generator and upstream; no nginx row). Installing nginx-light does
# not leave a server running: the package's own service is stopped by its PID
# file if dpkg started one, since the benches start their own nginx.
set -uo pipefail

missing=()
command -v wrk >/dev/null || missing+=(wrk)
{ command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; } || missing+=(nginx-light)
[ ${#missing[@]} -eq 0 ] && { echo "bench-deps: wrk and nginx present"; exit 0; }

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "bench-deps: missing ${missing[*]} (install them with: apt-get install -y ${missing[*]})"
	exit 0
fi
echo "bench-deps: installing ${missing[*]} from the distribution's packages"
export DEBIAN_FRONTEND=noninteractive
if ! timeout 120 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
	timeout 120 apt-get update -qq >/dev/null 2>&1
	timeout 180 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		echo "bench-deps: could not install ${missing[*]}: the benches fall back without them"
fi
# dpkg may start the packaged nginx (policy-rc.d permitting); the benches run
# their own on other ports, so stop that one by its PID file only.
if [ -s /run/nginx.pid ]; then
	kill "$(cat /run/nginx.pid)" 2>/dev/null || true
fi
command -v wrk >/dev/null && echo "bench-deps: wrk $(wrk -v 2>&1 | head -n1 | cut -d' ' -f2)"
[ -x /usr/sbin/nginx ] && echo "bench-deps: $(/usr/sbin/nginx -v 2>&1)"
exit 0
