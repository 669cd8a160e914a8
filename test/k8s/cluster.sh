#!/usr/bin/env bash
# cluster.sh runs a private single-node Kubernetes for the tests:
#
#   cluster.sh up DIR            start it; prints the admin kubeconfig path
#   cluster.sh down DIR          stop it and prove nothing of it is left
#   cluster.sh image DIR NAME ARGV...
#                                build a one-layer image holding the host's
#                                static busybox (entrypoint ARGV, user
#                                1000:1000), import it into the cluster's
#                                containerd and print NAME@sha256:<digest>
#
# Everything is private to DIR: certificates and kubeconfigs, etcd's data,
# a containerd of its own (root, state, runc root, socket, netns mounts),
# the kubelet's root and pod logs. Processes run in a cgroup of their own
# (agentnode-k8s-<id> in every v1 hierarchy; pods under its kubepods), pods
# get addresses from a CNI bridge of their own, and the node's address lives
# on a veth pair made here (never the machine's interface). <id> and the
# port block are derived from DIR, so clusters of two checkouts on one
# machine do not clash. TLS everywhere but etcd (loopback only), RBAC and
# the Node authorizer on. The binaries come from build.sh.
set -euo pipefail
# (no `grep -q` after a pipe: with pipefail the writer's SIGPIPE would turn a
# match into a failure)

here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
[ $# -ge 2 ] || { echo "usage: cluster.sh up|down|image DIR ..." >&2; exit 2; }
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
shift 2

ID=$(printf %s "$DIR" | sha256sum | cut -c1-8)
CG=agentnode-k8s-$ID
NODE=agentnode-$ID
NET=agentnode-$ID
BR=ankb$ID
VETH=ankv$ID
VPEER=ankp$ID
X=$((0x${ID:0:4} % 250 + 2))
NODEIP=10.251.$X.1
PODNET=10.252.$X.0/24
SVCNET=10.253.$X.0/24
SOCK=$DIR/containerd/containerd.sock
HIER=(blkio cpu cpuacct cpuset devices freezer memory pids systemd)
export PATH=/usr/local/sbin:/usr/sbin:/sbin:$PATH

log() { echo "cluster.sh: $*" >&2; }

ports() {
	local base=$((40000 + (0x${ID:4:4} % 1500) * 10)) try p busy
	for try in $(seq 0 30); do
		busy=
		for p in $(seq "$base" $((base + 9))); do
			if ss -Htan "( sport = :$p )" | grep . >/dev/null; then busy=1; break; fi
		done
		[ -z "$busy" ] && { echo "$base"; return; }
		base=$((base + 10))
	done
	log "no free port block"; return 1
}

# each cgroup directory of ours, deepest first
cgdirs() {
	local h
	for h in "${HIER[@]}" unified; do
		[ -d "/sys/fs/cgroup/$h/$CG" ] && find "/sys/fs/cgroup/$h/$CG" -depth -type d
	done
	return 0
}

cgpids() { cat /sys/fs/cgroup/pids/$CG/cgroup.procs $(find "/sys/fs/cgroup/pids/$CG" -mindepth 2 -name cgroup.procs 2>/dev/null) 2>/dev/null || true; }

mkcgroup() {
	local h d
	for h in "${HIER[@]}"; do
		for d in "$CG" "$CG/system"; do
			mkdir -p "/sys/fs/cgroup/$h/$d"
			if [ "$h" = cpuset ]; then
				cat "/sys/fs/cgroup/cpuset/$(dirname "$d")/cpuset.cpus" >"/sys/fs/cgroup/cpuset/$d/cpuset.cpus"
				cat "/sys/fs/cgroup/cpuset/$(dirname "$d")/cpuset.mems" >"/sys/fs/cgroup/cpuset/$d/cpuset.mems"
			fi
		done
	done
}

# start NAME ARGV...: runs ARGV in our cgroup, output to logs/NAME.log
start() {
	local name=$1
	shift
	(
		for h in "${HIER[@]}"; do echo "$BASHPID" >"/sys/fs/cgroup/$h/$CG/system/cgroup.procs"; done
		exec "$@"
	) </dev/null >"$DIR/logs/$name.log" 2>&1 &
	echo $! >"$DIR/run/$name.pid"
}

# waitfor WHAT SECONDS CMD...: until CMD succeeds
waitfor() {
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 10; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	log "$what not up after ${secs}s"
	return 1
}

cert() { # cert NAME SUBJ [SAN]
	local name=$1 subj=$2 san=${3:-}
	openssl ecparam -name prime256v1 -genkey -noout -out "$P/$name.key" 2>/dev/null
	openssl req -new -key "$P/$name.key" -subj "$subj" -out "$P/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth"; echo "subjectAltName=$san"; else echo "extendedKeyUsage=clientAuth"; fi
	} >"$P/$name.ext"
	openssl x509 -req -in "$P/$name.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial \
		-days 7 -sha256 -extfile "$P/$name.ext" -out "$P/$name.crt" 2>/dev/null
	rm -f "$P/$name.csr" "$P/$name.ext"
}

kubeconfig() { # kubeconfig FILE CERTNAME
	cat >"$1" <<K
apiVersion: v1
kind: Config
clusters:
- name: $NODE
  cluster: {certificate-authority: $P/ca.crt, server: "https://$NODEIP:$APIPORT"}
users:
- name: $2
  user: {client-certificate: $P/$2.crt, client-key: $P/$2.key}
contexts:
- name: $NODE
  context: {cluster: $NODE, user: $2}
current-context: $NODE
K
}

# image NAME ARGV...: a one-layer OCI image of the host's busybox
image() {
	local name=$1 w ref argv diffid ldig lsize cdig csize mdig msize
	shift
	w=$(mktemp -d "$DIR/images/.XXXXXX")
	mkdir -p "$w/root/bin" "$w/root/tmp" "$w/root/etc" "$w/oci/blobs/sha256"
	install -m 0755 /bin/busybox "$w/root/bin/busybox"
	for a in sh cat cut echo env grep head id ls sleep touch; do ln -s busybox "$w/root/bin/$a"; done
	printf 'root:x:0:0:root:/:/bin/sh\nsandbox:x:1000:1000:sandbox:/tmp:/bin/sh\n' >"$w/root/etc/passwd"
	chmod 1777 "$w/root/tmp"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=ustar -C "$w/root" -cf "$w/layer.tar" .
	diffid=$(sha256sum <"$w/layer.tar" | cut -d' ' -f1)
	gzip -n -c "$w/layer.tar" >"$w/layer.tgz"
	ldig=$(sha256sum <"$w/layer.tgz" | cut -d' ' -f1)
	lsize=$(stat -c %s "$w/layer.tgz")
	mv "$w/layer.tgz" "$w/oci/blobs/sha256/$ldig"
	argv=$(printf '"%s",' "$@")
	printf '{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","config":{"User":"1000:1000","Env":["PATH=/bin"],"Entrypoint":[%s],"WorkingDir":"/tmp"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"${argv%,}" "$diffid" >"$w/config.json"
	cdig=$(sha256sum <"$w/config.json" | cut -d' ' -f1)
	csize=$(stat -c %s "$w/config.json")
	mv "$w/config.json" "$w/oci/blobs/sha256/$cdig"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
		"$cdig" "$csize" "$ldig" "$lsize" >"$w/manifest.json"
	mdig=$(sha256sum <"$w/manifest.json" | cut -d' ' -f1)
	msize=$(stat -c %s "$w/manifest.json")
	mv "$w/manifest.json" "$w/oci/blobs/sha256/$mdig"
	ref=agentnode.test/$name
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s:k8s","org.opencontainers.image.ref.name":"k8s"}}]}' \
		"$mdig" "$msize" "$ref" >"$w/oci/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$w/oci/oci-layout"
	tar -C "$w/oci" -cf "$w/image.tar" .
	ctr --address "$SOCK" -n k8s.io images import "$w/image.tar" >&2
	# The CRI resolves an image reference only by the names containerd
	# holds: a pod naming the image by digest needs the digest name too
	# (a pull would have made it).
	ctr --address "$SOCK" -n k8s.io images tag --force "$ref:k8s" "$ref@sha256:$mdig" >&2
	rm -rf "$w"
	echo "$ref@sha256:$mdig"
}

up() {
	BIN=$("$here/build.sh")
	if [ -f "$DIR/cluster.env" ]; then log "$DIR already holds a cluster (down it first)"; return 1; fi
	# the subnets derive from <id>; the next free ones if another cluster holds them
	local try
	for try in $(seq 0 250); do
		ip -o addr show | grep -E " 10\.25[123]\.$X\." >/dev/null || break
		[ "$try" -lt 250 ] || { log "no free 10.251-253.X.0/24"; return 1; }
		X=$(((X - 2 + 1) % 250 + 2))
	done
	NODEIP=10.251.$X.1 PODNET=10.252.$X.0/24 SVCNET=10.253.$X.0/24
	BASE=$(ports)
	APIPORT=$BASE ETCDPORT=$((BASE + 1)) PEERPORT=$((BASE + 2)) KUBELETPORT=$((BASE + 3))
	HEALTHZPORT=$((BASE + 4)) CMPORT=$((BASE + 5)) SCHEDPORT=$((BASE + 6))
	# a DIR that held a cluster before starts afresh (its mounts are gone: down proved it)
	rm -rf "$DIR"/{pki,etcd,containerd,cni,kubelet,pod-logs,logs,run,images}
	mkdir -p "$DIR"/{pki,etcd,containerd,cni/net.d,cni/ipam,kubelet,pod-logs,logs,run,images}
	chmod 0700 "$DIR/pki" "$DIR/etcd"
	cat >"$DIR/cluster.env" <<E
ID=$ID
NODE=$NODE
NODEIP=$NODEIP
APIPORT=$APIPORT
BIN=$BIN
KUBECONFIG=$DIR/admin.kubeconfig
SOCK=$SOCK
E
	P=$DIR/pki

	ip link add "$VETH" type veth peer name "$VPEER"
	ip addr add "$NODEIP/24" dev "$VETH"
	ip link set "$VETH" up
	ip link set "$VPEER" up
	mkcgroup

	openssl ecparam -name prime256v1 -genkey -noout -out "$P/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$P/ca.key" -subj "/CN=agentnode-test-ca-$ID" -days 7 -sha256 \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$P/ca.crt" 2>/dev/null
	cert apiserver "/CN=kube-apiserver" "IP:$NODEIP,IP:127.0.0.1,IP:${SVCNET%.0/24}.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	cert kubelet-serving "/CN=$NODE" "IP:$NODEIP,DNS:$NODE"
	cert admin "/O=system:masters/CN=agentnode-test-admin"
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	cert controller-manager "/CN=system:kube-controller-manager"
	cert scheduler "/CN=system:kube-scheduler"
	cert kubelet "/O=system:nodes/CN=system:node:$NODE"
	openssl ecparam -name prime256v1 -genkey -noout -out "$P/sa.key" 2>/dev/null
	openssl ec -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
	for c in admin controller-manager scheduler kubelet; do kubeconfig "$DIR/$c.kubeconfig" "$c"; done

	start etcd "$BIN/etcd" --name "$NODE" --data-dir "$DIR/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCDPORT" --advertise-client-urls "http://127.0.0.1:$ETCDPORT" \
		--listen-peer-urls "http://127.0.0.1:$PEERPORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEERPORT" \
		--initial-cluster "$NODE=http://127.0.0.1:$PEERPORT" --log-level warn --quota-backend-bytes 1073741824
	waitfor etcd 30 curl -fsS "http://127.0.0.1:$ETCDPORT/health"

	start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCDPORT" \
		--bind-address "$NODEIP" --advertise-address "$NODEIP" --secure-port "$APIPORT" \
		--tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" --client-ca-file "$P/ca.crt" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --anonymous-auth=false \
		--service-cluster-ip-range "$SVCNET" --service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$P/sa.pub" --service-account-signing-key-file "$P/sa.key" \
		--kubelet-client-certificate "$P/apiserver-kubelet-client.crt" --kubelet-client-key "$P/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$P/ca.crt" --kubelet-preferred-address-types InternalIP \
		--allow-privileged=false --profiling=false
	waitfor kube-apiserver 90 "$BIN/kubectl" --kubeconfig "$DIR/admin.kubeconfig" get --raw /readyz

	start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$DIR/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$DIR/controller-manager.kubeconfig" --authorization-kubeconfig "$DIR/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$CMPORT" --leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt" --profiling=false
	start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$DIR/scheduler.kubeconfig" \
		--authentication-kubeconfig "$DIR/scheduler.kubeconfig" --authorization-kubeconfig "$DIR/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$SCHEDPORT" --leader-elect=false --profiling=false

	cat >"$DIR/cni/net.d/10-agentnode.conflist" <<C
{"cniVersion":"0.4.0","name":"$NET","plugins":[
 {"type":"bridge","bridge":"$BR","isGateway":true,"ipMasq":false,"hairpinMode":false,
  "ipam":{"type":"host-local","dataDir":"$DIR/cni/ipam","ranges":[[{"subnet":"$PODNET"}]]}},
 {"type":"loopback"}]}
C
	cat >"$DIR/containerd/config.toml" <<T
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "agentnode.test/pause:k8s"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$DIR/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
T
	start containerd containerd --config "$DIR/containerd/config.toml"
	waitfor containerd 30 ctr --address "$SOCK" version
	image pause /bin/busybox sleep 2147483647 >/dev/null

	cat >"$DIR/kubelet/config.yaml" <<Y
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODEIP
port: $KUBELETPORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $HEALTHZPORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $P/kubelet-serving.crt
tlsPrivateKeyFile: $P/kubelet-serving.key
cgroupDriver: cgroupfs
cgroupRoot: /$CG
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
podLogsDir: $DIR/pod-logs
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
Y
	start kubelet "$BIN/kubelet" --config "$DIR/kubelet/config.yaml" --kubeconfig "$DIR/kubelet.kubeconfig" \
		--root-dir "$DIR/kubelet" --cert-dir "$DIR/kubelet/pki" --hostname-override "$NODE" --node-ip "$NODEIP"
	waitfor "node $NODE Ready" 120 ready
	echo "$DIR/admin.kubeconfig"
}

ready() {
	[ "$("$BIN/kubectl" --kubeconfig "$DIR/admin.kubeconfig" get node "$NODE" \
		-o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# mounts under DIR, deepest first
ourmounts() { awk -v d="$DIR/" '{ m=$5; gsub(/\\040/," ",m); if (index(m, d) == 1) print m }' /proc/self/mountinfo | sort -r; }

leftovers() {
	local bad=0 p
	if [ -n "$(ourmounts)" ]; then log "still mounted:"; ourmounts >&2; bad=1; fi
	if [ -n "$(cgdirs)" ]; then log "cgroups left: $(cgdirs | tr '\n' ' ')"; bad=1; fi
	for p in /proc/[0-9]*; do
		if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -F -- "$DIR/" >/dev/null; then log "process left: ${p#/proc/} $(tr '\0' ' ' <"$p/cmdline")"; bad=1; fi
	done
	for l in "$VETH" "$VPEER" "$BR"; do
		if ip link show "$l" >/dev/null 2>&1; then log "link left: $l"; bad=1; fi
	done
	return $bad
}

down() {
	local i pids m d
	# stop the kubelet first so that it does not restart what is killed
	for n in kubelet kube-scheduler kube-controller-manager kube-apiserver; do
		[ -f "$DIR/run/$n.pid" ] && kill -TERM "$(cat "$DIR/run/$n.pid")" 2>/dev/null || true
	done
	# containerd 1.6's shims listen on /run/containerd/s/<sha256 of
	# "<containerd address>/<namespace>/<id>">, whatever its state dir; a
	# killed shim leaves its socket there.
	local socks=() pid id
	for pid in $(cgpids); do
		id=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | awk 'p { print; exit } $0 == "-id" { p = 1 }') || true
		if [ -n "$id" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep 'containerd-shim' >/dev/null; then
			socks+=("/run/containerd/s/$(printf %s "$SOCK/k8s.io/$id" | sha256sum | cut -d' ' -f1)")
		fi
	done
	# every process left in our cgroup (containerd, its shims, the pods, etcd)
	for ((i = 0; i < 100; i++)); do
		pids=$(cgpids)
		[ -z "$pids" ] && break
		kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
	[ -z "$(cgpids)" ] || log "processes survive in $CG: $(cgpids | tr '\n' ' ')"
	for ((i = 0; i < 5; i++)); do
		for m in $(ourmounts); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
		[ -z "$(ourmounts)" ] && break
		sleep 0.2
	done
	for d in $(cgdirs); do rmdir "$d" 2>/dev/null || true; done
	for l in "$VETH" "$BR"; do ip link del "$l" 2>/dev/null || true; done
	rm -rf /var/lib/cni/results/"$NET"-* "$DIR/cluster.env"
	[ ${#socks[@]} -eq 0 ] || rm -f "${socks[@]}"
	leftovers
}

case $cmd in
up)
	trap 'rc=$?; if [ $rc -ne 0 ]; then log "up failed; logs in $DIR/logs"; tail -n 5 "$DIR"/logs/*.log >&2 || true; down || true; fi' EXIT
	up
	;;
down) down ;;
image) image "$@" ;;
*) echo "usage: cluster.sh up|down|image DIR ..." >&2; exit 2 ;;
esac
