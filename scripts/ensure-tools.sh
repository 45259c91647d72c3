#!/usr/bin/env bash
# Installs the Debian packages the test suite uses when they are missing:
# promtool (package prometheus) checks the exported metrics and the alert rules;
# chromium runs the console's browser tests; redis-server coordinates the fleet's tests;
# h2load (nghttp2-client) drives HTTP/2 at the edge. With --bench, also what the
# benchmarks compare against: nginx (nginx-light) and openssl (s_time, certificates).
set -euo pipefail
need=()
if [ "${1:-}" = --bench ]; then
  command -v nginx >/dev/null 2>&1 || need+=(nginx-light)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
fi
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# The console's tests drive Debian's Chromium (playwright-core never downloads a browser).
[ -x /usr/bin/chromium ] || need+=(chromium)
# The fleet's tests run three gateways against one Redis (Debian's redis-server).
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# HTTP/2 at the edge is tested with a client nobody here wrote: h2load (nghttp2-client).
command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "The tests and benchmarks need: ${need[*]}. Install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing ${need[*]} (Debian packages) for the tests and benchmarks" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
