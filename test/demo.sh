#!/usr/bin/env bash
# make demo: set up a fresh agentnode home and run the main job end to end:
# setup → trust keygen → trust attest → install → run → audit → audit verify.
# Works on a fresh headless machine as root: installs the keychain packages if
# missing and starts a private Secret Service when none is running.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ]; then
  if ! command -v gnome-keyring-daemon >/dev/null || ! command -v dbus-run-session >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
      echo "== installing gnome-keyring and dbus (no keychain on this machine)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnome-keyring dbus dbus-x11 libsecret-tools >/dev/null
    else
      echo "demo: no OS keychain; install gnome-keyring dbus-x11 (as root) and retry" >&2; exit 2
    fi
  fi
  echo "== no Secret Service running: starting a private one for the demo"
  exec test/keyring.sh "$0" "$@"
fi

[ -x bin/agentnode ] || make build
export PATH="$root/bin:$PATH"
demo_home=$(mktemp -d /tmp/agentnode-demo.XXXXXX)
export AGENTNODE_HOME="$demo_home/.agentnode"
export AGENTNODE_NON_INTERACTIVE=1
key="demo-$(date +%s)"
step() { echo; echo "\$ $*"; "$@"; }

step agentnode setup
step agentnode trust keygen --id "$key"
echo; echo "\$ agentnode trust attest test/demo/hello --level curated --key $key > $demo_home/att.json"
agentnode trust attest test/demo/hello --level curated --key "$key" > "$demo_home/att.json"
cat "$demo_home/att.json"
step agentnode install test/demo/hello --attestation "$demo_home/att.json"
step agentnode run hello-demo greet --input '{"name":"world"}' --dry-run
step agentnode run hello-demo greet --input '{"name":"world"}'
step agentnode run hello-demo greet --input '{"name":"world"}' --json
echo; echo "# input inspection: a path traversal attempt is refused (exit 3)"
step agentnode run hello-demo greet --input '{"name":"../../etc/passwd"}' || echo "(exit $?)"
step agentnode audit -n 10
step agentnode audit verify
step agentnode doctor || echo "(doctor exit $?: sandboxed execution arrives with the sandbox backends)"
echo; echo "demo home: $AGENTNODE_HOME"
