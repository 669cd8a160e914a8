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
mkdir -p "$tmp/data/dbus-1/services" "$tmp/runtime"
chmod 700 "$tmp" "$tmp/runtime"

# The Secret Service starts by D-Bus activation, from a service file in
# XDG_DATA_HOME (the first of the session bus's service directories) whose
# command unlocks the login keyring. With Debian's own service file a daemon
# that died mid-run (seen once: gnome-keyring-daemon trapped in GLib during a
# loaded CI run) came back with the keyring locked, and every later test
# failed. Now a replacement comes up unlocked, with the items already saved.
# Its messages go to $tmp/daemon.log, shown at the end if it had to be
# started again.
daemon=$(command -v gnome-keyring-daemon)
printf '#!/bin/sh\necho "keyring.sh: starting gnome-keyring-daemon" >>"%s"\nprintf pass | exec "%s" --foreground --unlock --components=secrets 2>>"%s"\n' \
	"$tmp/daemon.log" "$daemon" "$tmp/daemon.log" >"$tmp/keyring-daemon"
chmod 755 "$tmp/keyring-daemon"
printf '[D-BUS Service]\nName=org.freedesktop.secrets\nExec=%s\n' "$tmp/keyring-daemon" \
	>"$tmp/data/dbus-1/services/org.freedesktop.secrets.service"

# No `exec`: the trap must run to remove the keyring. The daemon exits with
# the session bus when dbus-run-session ends. The ping activates it, so a
# keyring that cannot start fails here rather than in a test.
status=0
env -u DBUS_SESSION_BUS_ADDRESS -u GNOME_KEYRING_CONTROL AGENTNODE_KEYRING_PRIVATE=1 \
	XDG_DATA_HOME="$tmp/data" XDG_RUNTIME_DIR="$tmp/runtime" \
	dbus-run-session -- sh -c '
		dbus-send --session --print-reply --dest=org.freedesktop.secrets \
			/org/freedesktop/secrets org.freedesktop.DBus.Peer.Ping >/dev/null || {
			echo "keyring.sh: gnome-keyring-daemon failed to start" >&2; exit 2; }
		exec "$@"' keyring.sh "$@" || status=$?
if [ "$(grep -c '^keyring.sh: starting' "$tmp/daemon.log" 2>/dev/null)" -gt 1 ]; then
	echo "keyring.sh: gnome-keyring-daemon died and was started again; its log:" >&2
	tail -n 50 "$tmp/daemon.log" >&2
fi
exit "$status"
