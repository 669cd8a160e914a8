#!/usr/bin/env bash
# make demo: agentnode's whole job on a fresh machine, end to end, on the
# embedded libcontainer sandbox (no daemon):
#   setup → sandbox build → a curated package on the host → the same kind of
#   tool from a package nobody vouches for, in the sandbox → its escape
#   attempts failing → an input refused by inspection → an unavailable
#   sandbox refusing instead of falling back → a Python toolpack in
#   AgentNode's shape, sandboxed in the Python image → audit, audit verify,
#   doctor.
# `make demo` installs what it needs first (test/deps.sh demo) and builds.
# Runs as root (libcontainer needs root); as a normal user it shows the host
# path only and says so. Starts a private Secret Service when none runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ]; then
  echo "== no Secret Service running: starting a private one for the demo"
  exec test/keyring.sh "$0" "$@"
fi

[ -x bin/agentnode ] || make build
export PATH="$root/bin:$PATH"
demo_home=$(mktemp -d /tmp/agentnode-demo.XXXXXX)
export AGENTNODE_HOME="$demo_home/.agentnode"
export AGENTNODE_LOCKFILE="$demo_home/agentnode.lock"
export AGENTNODE_NON_INTERACTIVE=1
key="demo-$(date +%s)"
httpd_pid=
cleanup() { [ -z "$httpd_pid" ] || kill "$httpd_pid" 2>/dev/null || true; }
trap cleanup EXIT

step() { echo; echo "\$ $*"; "$@"; }
# refused: the command must fail with exit 3 (a refusal); anything else
# stops the demo.
refused() {
  echo; echo "\$ $*"
  local rc=0
  "$@" || rc=$?
  if [ "$rc" != 3 ]; then
    echo "demo: expected a refusal (exit 3), got exit $rc" >&2
    exit 1
  fi
  echo "(refused: exit 3)"
}
# expect TEXT: the previous step's output (in $out) must contain TEXT.
capture() {
  echo; echo "\$ $*"
  local rc=0
  out=$("$@") || rc=$?
  echo "$out"
  if [ "$rc" != 0 ]; then echo "demo: exit $rc" >&2; exit 1; fi
}
expect() {
  case "$out" in *"$1"*) ;; *) echo "demo: expected '$1' in the output above" >&2; exit 1 ;; esac
}

echo "== 1. set up a fresh agentnode home"
step agentnode setup

sandbox=0
if [ "$(id -u)" = 0 ]; then
  sandbox=1
  echo; echo "== 2. build the sandbox image (reproducible, pinned by digest)"
  step agentnode sandbox build
else
  echo; echo "== 2. skipped: the embedded libcontainer sandbox needs root (run make demo as root)"
fi

echo; echo "== 3. a curated package runs on the host, confined (Landlock + seccomp)"
step agentnode trust keygen --id "$key"
echo; echo "\$ agentnode trust attest test/demo/hello --level curated --key $key > $demo_home/att.json"
agentnode trust attest test/demo/hello --level curated --key "$key" >"$demo_home/att.json"
step agentnode install test/demo/hello --attestation "$demo_home/att.json"
step agentnode run hello-demo greet --input '{"name":"world"}' --dry-run
capture agentnode run hello-demo greet --input '{"name":"world"}' --json
expect '"placement":"host"'
expect 'hello, world'

echo; echo "== 4. input inspection: a path traversal in the input is refused"
refused agentnode run hello-demo greet --input '{"name":"../../etc/passwd"}'

if [ "$sandbox" = 1 ]; then
  echo; echo "== 5. the same tool from a publisher nobody vouches for runs only in the sandbox"
  echo "# community code is allowed to run at all only because we say so:"
  step agentnode config set trust.minimum_trust_level unknown
  step agentnode install test/demo/stranger
  capture agentnode run stranger-demo greet --input '{"name":"world"}' --json
  expect '"placement":"sandbox"'
  expect '"backend":"libcontainer"'
  expect '"trust":"unknown"'
  expect 'hello, world'

  echo; echo "== 6. its escape attempts fail inside the sandbox"
  # A server on the host's loopback that the host itself can reach.
  port=$((20000 + RANDOM % 20000))
  mkdir -p "$demo_home/www" && echo "host secret page" >"$demo_home/www/index.html"
  busybox httpd -f -p "127.0.0.1:$port" -h "$demo_home/www" &
  httpd_pid=$!
  for _ in $(seq 1 50); do busybox wget -q -O /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
  capture busybox wget -q -O - "http://127.0.0.1:$port/"
  expect 'host secret page'
  capture agentnode run stranger-demo escape --input "{\"port\":$port}" --json
  expect '"write-package":"blocked"'
  expect '"write-root":"blocked"'
  expect '"host-loopback":"blocked"'
  expect '"whoami-root":"blocked"'
  case "$out" in *ESCAPED*) echo "demo: an escape attempt succeeded" >&2; exit 1 ;; esac

  echo; echo "== 7. no sandbox, no run: a backend that is not installed refuses, never the host"
  step agentnode config set sandbox.backend firecracker
  refused agentnode run stranger-demo greet --input '{"name":"world"}'
  step agentnode config set sandbox.backend libcontainer

  echo; echo "== 8. a Python toolpack shaped like AgentNode's (ANP 0.1 package-level entrypoint, src/ layout)"
  echo "# runs unmodified, sandboxed in the Python runtime image (Debian's python3, built offline, pinned by digest)"
  step agentnode sandbox build --python
  step agentnode install sdk/python/testdata/text-stats-pack
  capture agentnode run text-stats-pack text_stats --input '{"text":"to be or not to be"}' --json
  expect '"placement":"sandbox"'
  expect '"ok":true'
  expect '"words":6'
fi

echo; echo "== 9. every decision is in the hash-chained audit log"
step agentnode audit -n 12
step agentnode audit verify
if [ "$sandbox" = 1 ]; then
  step agentnode doctor
else
  agentnode doctor || echo "(doctor exit $?: sandboxed execution needs root here)"
fi
echo; echo "demo home: $AGENTNODE_HOME"
