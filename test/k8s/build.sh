#!/usr/bin/env bash
# build.sh builds the single-node Kubernetes the tests run (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kubectl) and etcd from
# their Go modules through the module proxy (no git clone, no image registry),
# into a cache directory outside the clone keyed by version:
#
#   ${AGENTNODE_K8S_CACHE:-/var/cache/agentnode-k8s}/<k8s version>-etcd<etcd version>/
#
# A cache directory is reused only when its SHA256SUMS (written after a
# successful build) verifies; otherwise it is rebuilt. Prints the directory.
# With --check it only verifies: prints the directory and exits 0 when the
# cache is good, exits 1 (building nothing) when it is not.
#
# k8s.io/kubernetes's go.mod replaces its staging modules (k8s.io/api, ...)
# with ./staging paths its module zip does not hold, and requires them at
# v0.0.0. So the binaries are built from a small module of our own that
# requires k8s.io/kubernetes and replaces every staging module with its
# published v0.X.Y. etcd is built the same way in a module of its own (its
# client version differs from the one kubernetes requires).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.17}
STAGING_VERSION=v0.${K8S_VERSION#v1.}
ROOT=${AGENTNODE_K8S_CACHE:-/var/cache/agentnode-k8s}
OUT=$ROOT/$K8S_VERSION-etcd$ETCD_VERSION
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd)
export PATH=/usr/local/go/bin:$PATH
export GOMAXPROCS=${GOMAXPROCS:-2} GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

if [ -f "$OUT/SHA256SUMS" ] && (cd "$OUT" && sha256sum --quiet -c SHA256SUMS) >/dev/null 2>&1; then
	echo "$OUT"
	exit 0
fi
[ "${1:-}" = --check ] && exit 1

mkdir -p "$ROOT"
work=$(mktemp -d "$ROOT/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/k8s" "$work/etcd" "$work/bin"

staging=$(curl -fsS "$(go env GOPROXY | cut -d, -f1)/k8s.io/kubernetes/@v/$K8S_VERSION.mod" |
	sed -n '/^replace (/,/^)/p' | awk '/=> \.\/staging/{print $1}')
[ -n "$staging" ] || { echo "build.sh: no staging modules in k8s.io/kubernetes@$K8S_VERSION go.mod" >&2; exit 1; }

cd "$work/k8s"
{
	echo "module agentnode.test/k8sbuild"
	echo "go 1.26.0"
	echo "require k8s.io/kubernetes $K8S_VERSION"
	echo "replace ("
	for m in $staging; do
		# sample-* modules are not published; nothing we build imports them.
		case $m in k8s.io/sample-*) continue ;; esac
		echo "	$m => $m $STAGING_VERSION"
	done
	echo ")"
} >go.mod
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	minor=${K8S_VERSION#v1.}
	ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=${minor%%.*} -X $p.gitTreeState=clean"
done
pkgs=()
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
go mod download k8s.io/kubernetes
go get "${pkgs[@]}"
nice -n 10 go build -p "$GOMAXPROCS" -trimpath -ldflags "$ldflags" -o "$work/bin/" "${pkgs[@]}"

cd "$work/etcd"
printf 'module agentnode.test/etcdbuild\ngo 1.26.0\n' >go.mod
go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
nice -n 10 go build -p "$GOMAXPROCS" -trimpath -ldflags "-s -w" -o "$work/bin/etcd" go.etcd.io/etcd/server/v3

for b in "${BINS[@]}"; do
	case $b in kubectl) "$work/bin/$b" version --client >/dev/null ;; *) "$work/bin/$b" --version >/dev/null ;; esac
done
rm -rf "$OUT"
mkdir -p "$OUT"
mv "$work/bin/"* "$OUT/"
(cd "$OUT" && sha256sum "${BINS[@]}" >SHA256SUMS)
echo "$OUT"
