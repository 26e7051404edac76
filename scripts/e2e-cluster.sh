#!/usr/bin/env bash
# A single-node cluster on this machine for end-to-end tests: the test control plane
# (scripts/testenv.sh: etcd, kube-apiserver, kube-controller-manager) plus kube-scheduler
# and a kubelet built from the same k8s.io/kubernetes release, and containerd 2.x (with its
# runc shim and ctr) built from its Go module in the same go build (testenv/go.mod), with
# Debian's runc. No image can be pulled: the images are built here and imported into containerd:
#   ghcr.io/sexton-dev/sexton:VERSION (and -slim), sexton-quick-exit:VERSION,
#   kubectl-sexton:VERSION       the images that ship, built by scripts/images.sh (both
#                                platforms; the same digests), and tagged for the e2e
#                                manifests as sexton:e2e, sexton-quick-exit:e2e,
#                                kubectl-sexton:e2e
#   registry.k8s.io/pause:3.10   e2e/pause.c, our own pause       (test fixtures, built with
#   busybox:e2e                  Debian's busybox-static           buildah too)
# Pods use a CNI bridge (10.88.0.0/24, Debian's containernetworking-plugins) or the host
# network; nothing outside this machine is contacted. `kubectl logs` and `kubectl exec` work:
# the API server calls the kubelet on the node's address, the bridge's 10.88.0.1.
#
#   scripts/e2e-cluster.sh up      start (idempotent; the state of a node that never came down
#                                  is removed first); prints `export KUBECONFIG=...`
#   scripts/e2e-cluster.sh env     print `export KUBECONFIG=...` (eval "$(scripts/e2e-cluster.sh env)")
#   scripts/e2e-cluster.sh status  say whether the node is up (exit 1 if not)
#   scripts/e2e-cluster.sh down    stop what up started (and a kruise-manager that a killed
#                                  bench/completion/run.sh left), check that no containerd
#                                  shim is left, remove the state (the test control plane stays)
#   scripts/e2e-cluster.sh ctr ARGS...  the node's ctr, on its containerd (ctr --address ...)
#
# Settings (environment): SEXTON_E2E_STATE (default /tmp/sexton-e2e); those of
# scripts/testenv.sh (SEXTON_TESTENV_STATE, SEXTON_API_PORT, ...). Needs root. Helpers shared
# with testenv.sh: scripts/lib.sh.
#
# Findings that shaped the configuration (a container, cgroup v1, no CAP_SYS_RESOURCE):
#  - containerd's CRI sets the sandbox's oom_score_adj to -998, which needs
#    CAP_SYS_RESOURCE; runc then dies with "can't get final child's PID from pipe".
#    `restrict_oom_score_adj = true` clamps it.
#  - cgroup v1 needs `failCgroupV1: false`; `cgroupsPerQOS: false` keeps the kubelet out
#    of cgroup hierarchies it cannot manage here.
#  - kube-controller-manager runs no node-lifecycle controller, so the node keeps the
#    `node.kubernetes.io/not-ready` taint the kubelet registers it with: up removes it
#    once the node is Ready.
#  - The node's name does not resolve, and the kubelet refuses a loopback node IP: the node
#    IP is the pod bridge's gateway address, which exists on this machine only.
#  - containerd 2.4 (built here) still runs on cgroup v1, with a deprecation warning (support
#    "removed by no later than May 2029"); Kubernetes 1.37's kubelet too, given
#    `failCgroupV1: false` (its default is true since 1.35). Debian's runc 1.1.5 does for
#    containerd 2.4's shim, image volumes included (containerd tests against runc 1.5).
#  - The overlayfs snapshotter, as on real nodes: an image volume is a snapshot prepared on
#    the image's layers, which overlayfs shares between pods (one page cache for the file),
#    where the native snapshotter copied them for each pod.
#  - containerd's shims are daemons: they outlive containerd's call and belong to whoever
#    adopts orphans, here a reaper of our own (lib.sh), not PID 1, which may never reap.
#    A shim exits once containerd has deleted its tasks, so down stops the pods, then
#    containerd, and fails if a shim is left.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
E2E="$E2E_STATE"
lib_init e2e-cluster "$E2E"
NODE="sexton-e2e"
BRIDGE=sxe2e0
NODE_IP=10.88.0.1     # the bridge's address: the pods' gateway and the node's InternalIP
SOCK="$E2E/containerd.sock"
TESTENV="$ROOT/scripts/testenv.sh"
PKI="$TESTENV_STATE/pki"
export KUBECONFIG="$TESTENV_STATE/admin.kubeconfig"

need_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  [ -x /bin/busybox ] || missing+=(busybox-static)
  command -v gcc >/dev/null || missing+=(gcc libc6-dev)
  command -v python3 >/dev/null || missing+=(python3)
  command -v buildah >/dev/null || missing+=(buildah)
  command -v ip >/dev/null || missing+=(iproute2)
  [ ${#missing[@]} -eq 0 ] && return 0
  apt_install "${missing[@]}"
}

# kubectl: the machine's, else the one built from the pinned release (`build` builds it).
kubectl_on_path() {
  command -v kubectl >/dev/null && return 0
  [ "${1:-}" = build ] && "$TESTENV" kubectl-dir >/dev/null
  [ -x "$CACHE/kubectl" ] && PATH="$CACHE:$PATH"
  command -v kubectl >/dev/null
}

api_up() { "$TESTENV" status >/dev/null 2>&1; }

images() {
  shipped_images
  fixture_images
}

# The test fixtures, built from files of this machine with buildah as the shipped images
# are (FROM scratch, one layer) and imported as Docker archives under their names: our
# own pause, and Debian's busybox-static with the applets the manifests call.
fixture_images() {
  local img="$E2E/images" t
  rm -rf "$img"; mkdir -p "$img/pause" "$img/busybox/bin"
  gcc -static -Os -o "$img/pause/pause" "$ROOT/e2e/pause.c"
  cp /bin/busybox "$img/busybox/bin/busybox"
  for t in sh sleep echo cat ls ps kill true false test grep; do
    ln -s busybox "$img/busybox/bin/$t"
  done
  fixture_image registry.k8s.io/pause:3.10 "$img/pause" --entrypoint '["/pause"]'
  fixture_image busybox:e2e "$img/busybox" --cmd '["sh"]'
  rm -rf "$img/buildah"
}

# fixture_image REF DIR [buildah config args...]: DIR's files (and tmp, etc, proc, sys,
# dev) as the image REF on the node.
fixture_image() {
  local ref=$1 dir=$2 c id b=(buildah --root "$E2E/images/buildah" --runroot "$E2E/images/buildah-run" --storage-driver vfs)
  shift 2
  mkdir -p "$dir/tmp" "$dir/etc" "$dir/proc" "$dir/sys" "$dir/dev"
  c=$("${b[@]}" from scratch)
  "${b[@]}" copy "$c" "$dir" / >/dev/null
  "${b[@]}" config --env PATH=/usr/local/bin:/usr/bin:/bin:/sbin "$@" "$c"
  id=$("${b[@]}" commit --quiet --identity-label=false --timestamp 0 "$c")
  "${b[@]}" push --quiet "$id" "docker-archive:$dir.tar:$ref"
  "${b[@]}" rm "$c" >/dev/null
  "${b[@]}" rmi "$id" >/dev/null
  node_ctr -n k8s.io images import "$dir.tar" >/dev/null
}

# The images sexton ships, as scripts/images.sh builds them (it rebuilds what changed): each
# OCI layout imported whole (both platforms) under its shipped reference, checked to have
# the layout's digest on the node, and tagged with the name the e2e manifests use
# (NAME:e2e; the slim tag has none). --digests also names it by digest, so the kubelet
# reports the index's digest as a pod's imageID (e2e scenario 11 checks it).
shipped_images() {
  "$ROOT/scripts/images.sh" >&2
  local dir tag ref want got
  while read -r dir tag ref want; do
    tar -C "$dir" -cf - . | node_ctr -n k8s.io images import --all-platforms --digests \
      --base-name "${ref%:*}" - >/dev/null
    got=$(node_digest "$ref")
    [ "$got" = "$want" ] || die "$ref: the node has ${got:-nothing}, target/images has $want"
    digest_name "$ref" "$want"
    case $tag in *-slim) continue ;; esac
    node_ctr -n k8s.io images tag --force "$ref" "docker.io/library/$(basename "$dir"):e2e" >/dev/null
    got=$(node_digest "docker.io/library/$(basename "$dir"):e2e")
    [ "$got" = "$want" ] || die "$(basename "$dir"):e2e: the node has ${got:-nothing}, target/images has $want"
  done < <("$ROOT/scripts/images.sh" refs)
}

# digest_name REF DIGEST: REPO@DIGEST names the image, and no earlier import's digest is left
# under REPO. The kubelet reports a pod's imageID from the digest names of every image with
# the same content for the node's platform: a node kept up while an image was rebuilt for
# the other platform only (same linux/amd64 manifest, another index) reported the old
# index's digest (found by the e2e scenario shipped-images), and an import whose content was there
# already made no digest name at all.
digest_name() {
  local repo=${1%:*} n stale=()
  while read -r n; do
    [ "$n" = "$repo@$2" ] || stale+=("$n")
  done < <(node_ctr -n k8s.io images ls -q | grep -F "$repo@sha256:")
  [ ${#stale[@]} -eq 0 ] || node_ctr -n k8s.io images rm "${stale[@]}" >/dev/null
  node_ctr -n k8s.io images tag --force "$1" "$repo@$2" >/dev/null
}

# node_digest REF: the digest containerd has for REF (empty if none)
node_digest() {
  node_ctr -n k8s.io images ls "name==$1" | awk 'NR == 2 {print $3}'
}

# The node's address. The API server calls the kubelet (logs, exec) at the node's
# InternalIP. The kubelet refuses a loopback node IP, and this machine's own address would
# expose the kubelet to the network; so the node IP is the gateway address of the pods'
# bridge, set here before the CNI bridge plugin would (it adopts a bridge that already has
# its gateway address). down removes the bridge.
node_address() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

containerd_up() {
  if alive containerd; then
    wait_for containerd 30 node_ctr version
    return 0
  fi
  mkdir -p "$E2E/cni"
  # (version 4: containerd 2.4's own, which it would otherwise migrate to at each start; the
  # CRI is split into the images and runtime plugins, and the sockets are the servers'
  # plugins', without which it listens on the machine's /run/containerd. No imports: the
  # machine's /etc/containerd/conf.d, containerd's default, is not this node's)
  cat > "$E2E/containerd.toml" <<EOF
version = 4
imports = []
root = "$E2E/containerd/root"
state = "$E2E/containerd/state"
[plugins.'io.containerd.server.v1.grpc']
  address = "$SOCK"
[plugins.'io.containerd.server.v1.ttrpc']
  address = "$SOCK.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "registry.k8s.io/pause:3.10"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$E2E/cni"
EOF
  cat > "$E2E/cni/10-sexton.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "sexton-e2e", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/24", "gateway": "$NODE_IP"}]]}},
  {"type": "loopback"}
]}
EOF
  # under a reaper: the shims it starts are adopted and reaped by it (see lib.sh); the
  # shim is found on PATH, beside the containerd built with it
  spawn_reaped containerd env PATH="$CONTAINERD_DIR:$PATH" "$CONTAINERD_DIR/containerd" --config "$E2E/containerd.toml"
  wait_for containerd 30 node_ctr version
}

# The API server's kubelet client certificate (testenv.sh) may call the kubelet API: the
# kubelet asks the API server (webhook authorization) and RBAC answers.
kubelet_api_access() {
  kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sexton-e2e:apiserver-kubelet-client}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
EOF
}

kubelet_up() {
  alive kubelet && return 0
  ports_free kubelet 10248
  port_in_use 10250 "$NODE_IP" && die "port 10250 on $NODE_IP (kubelet) is taken by another process"
  # its client identity (the Node authorizer's system:node:NAME), and its serving
  # certificate, which the API server checks against the same CA
  cert_issue "$PKI" "$E2E/kubelet" "/CN=system:node:$NODE/O=system:nodes" clientAuth
  cert_issue "$PKI" "$E2E/kubelet-serving" "/CN=$NODE" serverAuth "IP:$NODE_IP, DNS:$NODE"
  write_kubeconfig "$E2E/kubelet.kubeconfig" kubelet "$E2E/kubelet"
  # Its API (logs, exec) takes client certificates of the test CA and bearer tokens, no
  # anonymous requests, and asks the API server whether each caller may.
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
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
address: $NODE_IP
port: 10250
tlsCertFile: $E2E/kubelet-serving.crt
tlsPrivateKeyFile: $E2E/kubelet-serving.key
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
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
  spawn kubelet "$CACHE/kubelet" --config "$E2E/kubelet.yaml" --kubeconfig "$E2E/kubelet.kubeconfig" \
    --hostname-override "$NODE" --node-ip "$NODE_IP" --root-dir "$E2E/kubelet" --v=1
}

scheduler_up() {
  alive kube-scheduler && return 0
  ports_free kube-scheduler 10259
  spawn kube-scheduler "$CACHE/kube-scheduler" --kubeconfig "$KUBECONFIG" \
    --authentication-kubeconfig "$KUBECONFIG" --authorization-kubeconfig "$KUBECONFIG" \
    --bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false
}

node_ready() {
  [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

up() {
  [ "$(id -u)" = 0 ] || die "needs root (containerd, runc, network namespaces)"
  need_packages
  "$TESTENV" up >&2
  kubectl_on_path build || die "no kubectl"
  "$TESTENV" build kubelet kube-scheduler containerd >&2
  remove_stale_state
  mkdir -p "$E2E"
  node_address
  containerd_up
  images
  kubelet_api_access
  kubelet_up
  scheduler_up
  wait_for "node $NODE" 90 node_ready
  kubectl taint node "$NODE" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  log "up: node $NODE Ready (KUBECONFIG=$KUBECONFIG)"
  echo "export KUBECONFIG=$KUBECONFIG"
}

status() {
  if alive containerd && alive kubelet && alive kube-scheduler && kubectl_on_path && node_ready 2>/dev/null; then
    echo up
  else
    echo down
    exit 1
  fi
}

tasks() { node_ctr -n k8s.io tasks ls -q 2>/dev/null; }
no_tasks() { [ -z "$(tasks)" ]; }

# The pods go first, through the kubelet: it stops each pod's containers and sandbox through
# the CRI (so the CNI plugin releases the pod's address and network namespace), containerd
# deletes their tasks, and a shim whose tasks are all deleted exits. The scenarios'
# namespaces go too, kubelet or not, so that their pods do not come back with the next node.
remove_pods() {
  api_up && kubectl_on_path || return 0
  kubectl delete namespace -l sexton-e2e=true --wait=false >/dev/null 2>&1 || true
  kubectl delete pods --all-namespaces --field-selector "spec.nodeName=$NODE" \
    --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  alive kubelet || return 0
  # (briefly: the node is going, and kill_tasks kills through containerd what the kubelet
  # has not stopped. Every full run's last pods, the benchmarks', outlived a 60 s wait here,
  # a minute of each run spent waiting)
  wait_until 10 pods_stopped || log "the kubelet left containers running after 10s: killing them"
}
pods_stopped() { no_tasks || ! alive kubelet; }

# Containers the kubelet did not stop (it was down, or slow): killed and deleted through
# containerd, which then shuts their shims down.
kill_tasks() {
  alive containerd || return 0
  local ids c
  ids=$(tasks) || true
  for c in $ids; do
    timeout 10 "$CONTAINERD_DIR/ctr" --address "$SOCK" -n k8s.io tasks delete --force "$c" >/dev/null 2>&1 || true
  done
  wait_until 20 no_tasks || log "containerd still lists tasks: $(tasks | tr '\n' ' ')"
}

# containerd runs under a reaper that adopts its shims (spawn_reaped); the reaper exits once
# containerd and every shim have exited and been reaped. Shims whose tasks were deleted exit
# with containerd; any other (containerd died first) and what runs in it are killed, by PID.
stop_containerd() {
  alive containerd || return 0
  local reaper start left
  read -r reaper start <"$E2E/containerd.pid"
  kill "$reaper" 2>/dev/null || true     # forwarded to containerd
  wait_until 30 not has_child_named containerd "$reaper" || log "containerd ignored SIGTERM for 30s"
  if ! wait_until 5 not alive containerd; then
    left=$(children_of "$reaper" | paste -sd,)
    [ -z "$left" ] || log "still running under containerd's reaper, killed: $(ps -o pid=,args= -p "$left" | cut -c1-100 | paste -sd';')"
    local end=$((SECONDS + 20))
    while alive containerd && [ "$SECONDS" -lt "$end" ]; do
      left=$(children_of "$reaper")
      # shellcheck disable=SC2086
      [ -z "$left" ] || kill -9 $left 2>/dev/null || true
      sleep 0.2
    done
  fi
  if alive containerd; then
    die "containerd's reaper (pid $reaper) still has children: $(children_of "$reaper" | paste -sd' ')"
  fi
  await_reaped "containerd's reaper" "$reaper" "$start"
  rm -f "$E2E/containerd.pid"
}

# has_child_named COMM PID: a running child of PID is called COMM.
has_child_named() {
  local p comm
  for p in $(children_of "$2"); do
    read -r comm 2>/dev/null <"/proc/$p/comm" && [ "$comm" = "$1" ] && running "$p" && return 0
  done
  return 1
}

# Fails if a shim of this node survived: alive (its command line names our socket) or
# defunct (a zombie is reaped only by its parent; ours are the reaper's, gone by now).
# Defunct shims of other parents are reported, not ours to reap.
check_no_shims() {
  local p comm args ours=() defunct=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    read -r comm 2>/dev/null <"/proc/$p/comm" || continue
    [ "$comm" = containerd-shim ] || continue      # containerd-shim-runc-v2, cut to 15 bytes
    stat_of "$p" || continue
    if [ "${STAT[0]}" = Z ]; then
      defunct+=("$p (parent ${STAT[1]})")
    else
      mapfile -d '' -t args 2>/dev/null <"/proc/$p/cmdline" || continue
      [[ " ${args[*]} " == *" -address $SOCK "* ]] && ours+=("$p")
    fi
  done
  [ ${#defunct[@]} -eq 0 ] || log "warning: defunct containerd shims of other parents: ${defunct[*]}"
  [ ${#ours[@]} -eq 0 ] || die "containerd shims of this node survived down:
$(ps -o pid,ppid,stat,args -p "$(IFS=,; echo "${ours[*]}")")"
}

# The network namespaces of pods the kubelet did not stop (it was down): no CNI DEL released
# them. They are the ones at the other end of the bridge's ports.
remove_pod_netns() {
  local ns
  for ns in $(ip -o link show master "$BRIDGE" 2>/dev/null | sed -n 's/.* link-netns \([^ ]*\).*/\1/p'); do
    ip netns delete "$ns" 2>/dev/null || true
  done
}

# the kubelet's and containerd's mounts under the state directory (volumes, sandbox shm)
unmount_state() {
  awk -v d="$E2E/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount -l
}

# A state directory whose containerd, kubelet and scheduler are all gone was left by a node
# that never came down (its run killed, or the machine copied while it ran). Its containerd
# would start again with that run's images, tags and containers: a busybox:1.36 tag left by
# e2e/quickstart.py made containerd name main's image busybox:1.36 in scenario 3. Removed,
# with the pods' addresses and network namespaces, as testenv.sh's up removes its own.
remove_stale_state() {
  if alive containerd || alive kubelet || alive kube-scheduler || [ ! -e "$E2E" ]; then return 0; fi
  log "removing $E2E: the state of a node that never came down"
  remove_pod_netns
  rm -rf /var/lib/cni/networks/sexton-e2e
  unmount_state
  rm -rf "$E2E"
}

down() {
  # (a kruise-manager that bench/completion/run.sh started on this node's API server and did
  # not stop: that run was killed before its exit trap ran)
  stop -t 15 kruise-manager
  remove_pods
  stop -t 10 kube-scheduler kubelet
  kill_tasks
  stop_containerd
  check_no_shims
  rm -rf /var/lib/cni/networks/sexton-e2e   # the CNI plugin's address bookkeeping for our pods
  if api_up && kubectl_on_path; then
    kubectl delete node "$NODE" --wait=false >/dev/null 2>&1 || true
    kubectl delete clusterrolebinding sexton-e2e:apiserver-kubelet-client --ignore-not-found >/dev/null 2>&1 || true
  fi
  remove_pod_netns
  ip link del "$BRIDGE" 2>/dev/null || true
  unmount_state
  rm -rf "$E2E"
  log "down"
}

case "${1:-}" in
  up) up ;;
  env) echo "export KUBECONFIG=$KUBECONFIG" ;;
  status) status ;;
  down) down ;;
  ctr) shift; node_ctr "$@" ;;
  *) echo "usage: $0 up|env|status|down|ctr" >&2; exit 2 ;;
esac
