#!/bin/sh
# Run a command inside a private D-Bus session with a fresh, unlocked
# gnome-keyring (Secret Service), so kernel/keychain and the CLI can be tested
# against a real OS keychain without touching the user's own.
#
#   test/keyring.sh go test -race ./kernel/keychain/...
#   AGENTNODE_REQUIRE_KEYRING=1 test/keyring.sh go test ./kernel/keychain/...
#
# Needs dbus-run-session (dbus, dbus-x11) and gnome-keyring-daemon
# (gnome-keyring); libsecret-tools (secret-tool) lets the tests cross-check
# with a second client. The keyring lives in a temporary XDG_DATA_HOME that is
# removed afterwards; the keyring password is a throwaway.
set -eu

if [ "$#" -eq 0 ]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 2
fi
for tool in dbus-run-session gnome-keyring-daemon; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "$0: $tool not found (install dbus, dbus-x11 and gnome-keyring)" >&2
		exit 2
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentnode-keyring.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$tmp/data" "$tmp/runtime"
chmod 700 "$tmp" "$tmp/runtime"

# No `exec`: the trap must run to remove the keyring. gnome-keyring-daemon
# exits with the session bus when dbus-run-session ends.
status=0
env -u DBUS_SESSION_BUS_ADDRESS -u GNOME_KEYRING_CONTROL \
	XDG_DATA_HOME="$tmp/data" XDG_RUNTIME_DIR="$tmp/runtime" \
	dbus-run-session -- sh -c '
		echo pass | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1 || {
			echo "keyring.sh: gnome-keyring-daemon failed to start" >&2; exit 2; }
		exec "$@"' keyring.sh "$@" || status=$?
exit "$status"
