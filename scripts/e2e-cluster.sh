#!/usr/bin/env bash
# A single-node cluster on this machine for end-to-end tests: the test control plane
# (scripts/testenv.sh: etcd, kube-apiserver, kube-controller-manager) plus kube-scheduler,
# containerd + runc (Debian packages) and a kubelet built from the same k8s.io/kubernetes
# release. No image can be pulled: the images are built here from local files
# (e2e/mkimage.py) and imported into containerd:
#   registry.k8s.io/pause:3.10   e2e/pause.c, our own pause
#   sexton:e2e                   the release binary at /sexton
#   sexton-quick-exit:e2e        the same, entrypoint `sexton quick-exit`, UID 65532
#   busybox:e2e                  Debian's busybox-static
# Pods use a CNI bridge (10.88.0.0/24, Debian's containernetworking-plugins) or the host
# network; nothing outside this machine is contacted.
#
#   scripts/e2e-cluster.sh up      start (idempotent); prints the KUBECONFIG to use
#   scripts/e2e-cluster.sh down    stop what up started (the test control plane stays)
#
# Findings that shaped the configuration (this machine: a container, cgroup v1, no
# CAP_SYS_RESOURCE):
#  - containerd's CRI sets the sandbox's oom_score_adj to -998, which needs
#    CAP_SYS_RESOURCE; runc then dies with "can't get final child's PID from pipe".
#    `restrict_oom_score_adj = true` clamps it.
#  - cgroup v1 needs `failCgroupV1: false`; `cgroupsPerQOS: false` keeps the kubelet out
#    of cgroup hierarchies it cannot manage here.
#  - kube-controller-manager runs no node-lifecycle controller, so the node keeps the
#    `node.kubernetes.io/not-ready` taint the kubelet registers it with: up removes it
#    once the node is Ready.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
E2E="${SEXTON_E2E_STATE:-/tmp/sexton-e2e}"
NODE=sexton-e2e
SOCK="$E2E/containerd.sock"
TESTENV="$ROOT/scripts/testenv.sh"

log() { echo "e2e-cluster: $*" >&2; }
die() { echo "e2e-cluster: error: $*" >&2; exit 1; }
alive() { [ -f "$E2E/$1.pid" ] && kill -0 "$(cat "$E2E/$1.pid")" 2>/dev/null; }

wait_for() { # what seconds command...
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || die "$what not ready after ${secs}s (logs in $E2E)"
    sleep 0.5
  done
}

need_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  [ -x /bin/busybox ] || missing+=(busybox-static)
  command -v gcc >/dev/null || missing+=(gcc libc6-dev)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  [ -f /var/lib/apt/lists/lock ] || true
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

images() {
  local sexton="$ROOT/target/x86_64-unknown-linux-gnu/release/sexton" img="$E2E/images"
  mkdir -p "$img"
  # the in-pod binary as shipped: built alone (see Cargo.toml on feature unification)
  (cd "$ROOT" && cargo build --release -p sexton >&2)
  gcc -static -Os -o "$img/pause" "$ROOT/e2e/pause.c"
  local mk="python3 $ROOT/e2e/mkimage.py"
  $mk "$img/pause.tar" registry.k8s.io/pause:3.10 --entrypoint '["/pause"]' "$img/pause:/pause"
  $mk "$img/sexton.tar" sexton:e2e --entrypoint '["/sexton"]' "$sexton:/sexton"
  $mk "$img/quick-exit.tar" sexton-quick-exit:e2e --entrypoint '["/sexton","quick-exit"]' \
    --user 65532:65532 "$sexton:/sexton"
  local links=()
  for t in sh sleep echo cat ls ps kill true false test grep; do
    links+=(--symlink "/bin/$t=busybox")
  done
  $mk "$img/busybox.tar" busybox:e2e --cmd '["sh"]' "${links[@]}" /bin/busybox:/bin/busybox
  for t in pause sexton quick-exit busybox; do
    ctr --address "$SOCK" -n k8s.io images import "$img/$t.tar" >/dev/null
  done
}

containerd_up() {
  alive containerd && return 0
  mkdir -p "$E2E/cni"
  cat > "$E2E/containerd.toml" <<EOF
version = 2
root = "$E2E/containerd/root"
state = "$E2E/containerd/state"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$E2E/cni"
EOF
  cat > "$E2E/cni/10-sexton.conflist" <<'EOF'
{"cniVersion": "0.4.0", "name": "sexton-e2e", "plugins": [
  {"type": "bridge", "bridge": "sxe2e0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/24"}]]}},
  {"type": "loopback"}
]}
EOF
  containerd --config "$E2E/containerd.toml" > "$E2E/containerd.log" 2>&1 &
  echo $! > "$E2E/containerd.pid"
  wait_for containerd 30 ctr --address "$SOCK" version
}

kubelet_up() {
  alive kubelet && return 0
  local pki=/tmp/sexton-testenv/pki
  (
    cd "$E2E"
    printf '[ext]\nbasicConstraints = CA:FALSE\nkeyUsage = digitalSignature, keyEncipherment\nextendedKeyUsage = clientAuth\n' > client.cnf
    openssl req -newkey rsa:2048 -nodes -subj "/CN=system:node:$NODE/O=system:nodes" \
      -keyout kubelet.key -out kubelet.csr 2>/dev/null
    openssl x509 -req -in kubelet.csr -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -days 365 -extfile client.cnf -extensions ext -out kubelet.crt 2>/dev/null
  )
  cat > "$E2E/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://127.0.0.1:${SEXTON_API_PORT:-16443}", certificate-authority: $pki/ca.crt}
users:
- name: kubelet
  user: {client-certificate: $E2E/kubelet.crt, client-key: $E2E/kubelet.key}
contexts:
- name: e2e
  context: {cluster: e2e, user: kubelet}
current-context: e2e
EOF
  cat > "$E2E/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzPort: 10248
clusterDomain: cluster.local
resolvConf: ""
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
podPidsLimit: -1
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
EOF
  "$CACHE/kubelet" --config "$E2E/kubelet.yaml" --kubeconfig "$E2E/kubelet.kubeconfig" \
    --hostname-override "$NODE" --root-dir "$E2E/kubelet" --v=1 > "$E2E/kubelet.log" 2>&1 &
  echo $! > "$E2E/kubelet.pid"
}

scheduler_up() {
  alive scheduler && return 0
  local kc=/tmp/sexton-testenv/admin.kubeconfig
  "$CACHE/kube-scheduler" --kubeconfig "$kc" --authentication-kubeconfig "$kc" \
    --authorization-kubeconfig "$kc" --bind-address 127.0.0.1 --secure-port 10259 \
    --leader-elect=false > "$E2E/scheduler.log" 2>&1 &
  echo $! > "$E2E/scheduler.pid"
}

node_ready() {
  [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

up() {
  [ "$(id -u)" = 0 ] || die "needs root (containerd, runc, network namespaces)"
  need_packages
  "$TESTENV" up >&2
  eval "$("$TESTENV" env)"
  export KUBECONFIG
  command -v kubectl >/dev/null || PATH="$("$TESTENV" kubectl-dir):$PATH"
  "$TESTENV" build kubelet kube-scheduler >&2
  CACHE="$(dirname "$("$TESTENV" kubectl-dir)/kubectl")"
  mkdir -p "$E2E"
  containerd_up
  images
  kubelet_up
  scheduler_up
  wait_for "node $NODE" 90 node_ready
  kubectl taint node "$NODE" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  log "up: node $NODE Ready (KUBECONFIG=$KUBECONFIG)"
  echo "export KUBECONFIG=$KUBECONFIG"
}

down() {
  export KUBECONFIG=/tmp/sexton-testenv/admin.kubeconfig
  # the scenarios' namespaces first, so their pods do not come back with the next node
  kubectl delete namespace -l sexton-e2e=true --wait=false >/dev/null 2>&1 || true
  kubectl delete pods --all-namespaces --field-selector "spec.nodeName=$NODE" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1 || true
  for name in scheduler kubelet; do
    alive "$name" && kill "$(cat "$E2E/$name.pid")" && log "stopped $name"
  done
  # the pods' containers, then containerd
  if alive containerd; then
    for c in $(ctr --address "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$SOCK" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
    done
    kill "$(cat "$E2E/containerd.pid")" && log "stopped containerd"
  fi
  pkill -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $SOCK" 2>/dev/null || true
  ip link del sxe2e0 2>/dev/null || true
  grep -q " $E2E" /proc/mounts && awk -v d="$E2E" '$2 ~ "^"d {print $2}' /proc/mounts | sort -r | xargs -r umount -l
  rm -rf "$E2E"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
