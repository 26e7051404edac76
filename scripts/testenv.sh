#!/usr/bin/env bash
# A real Kubernetes control plane for tests, on 127.0.0.1 only:
# etcd + kube-apiserver (RBAC on) + kube-controller-manager (service accounts, namespaces,
# garbage collection, Jobs), built from Go modules (testenv/go.mod) and cached outside the
# repository. The API server is also set up to call kubelets (logs, exec) for the node of
# scripts/e2e-cluster.sh. Helpers shared with it: scripts/lib.sh.
#
#   scripts/testenv.sh up      build if needed, start, wait until ready (idempotent)
#   scripts/testenv.sh env     print `export KUBECONFIG=...` (eval "$(scripts/testenv.sh env)")
#   scripts/testenv.sh down    stop what `up` started (by PID) and remove its state
#   scripts/testenv.sh build   only build/cache the binaries
#   scripts/testenv.sh status  say whether it is up
#   scripts/testenv.sh restart-apiserver   restart the API server alone (etcd data kept)
#   scripts/testenv.sh kubectl-dir         build kubectl (same release) if needed, print its directory
#                                          (`build kube-apiserver ... kubectl` builds it with the
#                                          others: one go build, the packages they share compiled once)
#   scripts/testenv.sh helm [--cached]     build helm (testenv/go.mod's version) if needed, print
#                                          its path (`build ... helm`: with the others, in one go
#                                          build; --cached: exit 1 if it is not built)
#   scripts/testenv.sh old-webhook         build the old-style admission webhook of the webhook
#                                          tests (testenv/old-webhook) if needed, print its path
#   scripts/testenv.sh vendor-webhook      build the stand-ins of the vendors' sidecar injectors
#                                          (testenv/vendor-webhook) if needed, print its path
#
# Settings (environment): SEXTON_TESTENV_CACHE (default ~/.cache/sexton-testenv),
# SEXTON_TESTENV_STATE (default /tmp/sexton-testenv), SEXTON_API_PORT (16443),
# SEXTON_ETCD_PORT (23790; the peer port is +10), SEXTON_TESTENV_PROFILING (true: the API
# server serves /debug/pprof, as bench/scale/run.sh --profile needs; default false).
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
STATE="$TESTENV_STATE"
lib_init testenv "$STATE"
ETCD_PORT="${SEXTON_ETCD_PORT:-23790}"
ETCD_PEER_PORT=$((ETCD_PORT + 10))
KUBECONFIG_FILE="$STATE/admin.kubeconfig"
PROFILING="${SEXTON_TESTENV_PROFILING:-false}"
case "$PROFILING" in true|false) ;; *) die "SEXTON_TESTENV_PROFILING must be true or false, not '$PROFILING'" ;; esac

# helm's file in $CACHE names its version, which testenv/go.mod may change without Kubernetes'.
HELM_BIN="helm-$HELM_VERSION"

build() {
  local bins=(kube-apiserver kube-controller-manager etcd) missing=() b
  [ $# -gt 0 ] && bins=("$@")
  for b in "${!bins[@]}"; do [ "${bins[$b]}" != helm ] || bins[b]=$HELM_BIN; done
  for b in "${bins[@]}"; do
    case "$b" in
      containerd) [ -x "$CONTAINERD_DIR/containerd-shim-runc-v2" ] || missing+=("$b") ;;
      *) [ -x "$CACHE/$b" ] || missing+=("$b") ;;
    esac
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v go >/dev/null || die "go is needed to build ${missing[*]} (Go >= 1.24)"
  log "building ${missing[*]} $K8S_VERSION into $CACHE (cold: ~6 min and ~2 GB RAM on 2 cores)"
  mkdir -p "$CACHE"
  local major minor ld
  major="$(echo "$K8S_VERSION" | cut -d. -f1 | tr -d v)"; minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ld+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  local start=$SECONDS pkgs=()
  # helm's version, as helm's Makefile sets it (without it, `helm version` says "v4.3").
  # The Kubernetes version `helm template` and `helm lint` assume (the chart's kubeVersion
  # checks it) helm 4.3 reads from its build's k8s.io/client-go module (0.37 -> 1.37).
  ld+=" -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
  local p
  # containerd's version as its Makefile sets it: the CRI reports it to the kubelet, which
  # publishes it as the node's nodeInfo.containerRuntimeVersion (containerd://v2.4.2), the
  # field the admission webhook reads to choose a binary source
  local cpkg=github.com/containerd/containerd/v2
  ld+=" -X $cpkg/version.Version=$CONTAINERD_VERSION -X $cpkg/version.Revision=$CONTAINERD_VERSION"
  for b in "${missing[@]}"; do
    case "$b" in
      etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
      "$HELM_BIN") pkgs+=(helm.sh/helm/v4/cmd/helm) ;;
      containerd) pkgs+=("$cpkg/cmd/containerd" "$cpkg/cmd/containerd-shim-runc-v2" "$cpkg/cmd/ctr") ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
    esac
  done
  # One `go build` of every binary: their packages are compiled once and the links run in
  # parallel (the -X flags name only Kubernetes' variables; the linker ignores them in etcd).
  # go names each binary after its package, etcd's after go.etcd.io/etcd/server: "server".
  rm -rf "$CACHE/.build" && mkdir -p "$CACHE/.build"
  (
    cd "$ROOT/testenv"
    export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
    go build -trimpath -gcflags "$GO_GCFLAGS" -ldflags "$ld" -o "$CACHE/.build/" "${pkgs[@]}"
  )
  for b in "${missing[@]}"; do
    case "$b" in
      etcd) mv "$CACHE/.build/server" "$CACHE/etcd" ;;
      "$HELM_BIN") mv "$CACHE/.build/helm" "$CACHE/$b" ;;
      containerd)
        mkdir -p "$CONTAINERD_DIR"
        for p in containerd containerd-shim-runc-v2 ctr; do mv "$CACHE/.build/$p" "$CONTAINERD_DIR/$p"; done ;;
      *) mv "$CACHE/.build/$b" "$CACHE/$b" ;;
    esac
  done
  rmdir "$CACHE/.build"
  log "built in $((SECONDS - start))s"
}

# The machine's kubectl, else the one of the same release built here (`build kubectl`).
need_kubectl() { command -v kubectl >/dev/null; }
kubectl_path() { command -v kubectl || echo "$CACHE/kubectl"; }

ready() {
  [ -f "$KUBECONFIG_FILE" ] && KUBECONFIG="$KUBECONFIG_FILE" "$(kubectl_path)" get --raw /readyz >/dev/null 2>&1
}

default_sa_exists() {
  KUBECONFIG="$KUBECONFIG_FILE" "$(kubectl_path)" -n default get serviceaccount default -o name >/dev/null 2>&1
}

certs() {
  local d="$STATE/pki"
  mkdir -p "$d"
  ca_create "$d" sexton-testenv-ca
  cert_issue "$d" "$d/apiserver" /CN=kube-apiserver serverAuth \
    "IP:127.0.0.1, IP:10.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local"
  cert_issue "$d" "$d/admin" /CN=admin/O=system:masters clientAuth
  cert_issue "$d" "$d/controller-manager" /CN=system:kube-controller-manager clientAuth
  # The API server's identity when it calls a kubelet (logs, exec, port-forward). Not in
  # system:masters: scripts/e2e-cluster.sh grants it system:kubelet-api-admin, which the
  # kubelet checks through the API (webhook authorization).
  cert_issue "$d" "$d/apiserver-kubelet-client" /CN=kube-apiserver-kubelet-client clientAuth
  quietly openssl genrsa -out "$d/sa.key" 2048
  quietly openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub"
}

up() {
  # (a state without the kubelet client certificate was made by an older testenv.sh:
  # its API server cannot reach kubelets, so it is replaced)
  if alive etcd && alive kube-apiserver && ready && [ -f "$STATE/pki/apiserver-kubelet-client.crt" ]; then
    log "already up (KUBECONFIG=$KUBECONFIG_FILE)"
    return 0
  fi
  local bins=(kube-apiserver kube-controller-manager etcd)
  need_kubectl || bins+=(kubectl)   # (ready() asks with it)
  build "${bins[@]}"
  # Leftovers of a half-started run are ours to clean; a foreign listener is not.
  down_quiet
  ports_free "set SEXTON_API_PORT / SEXTON_ETCD_PORT" "$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT"
  mkdir -p "$STATE"
  certs
  write_kubeconfig "$KUBECONFIG_FILE" admin "$STATE/pki/admin"
  write_kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager "$STATE/pki/controller-manager"

  spawn etcd "$CACHE/etcd" --name default --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --quota-backend-bytes 1073741824
  wait_for etcd 30 port_in_use "$ETCD_PORT"

  start_apiserver

  spawn kube-controller-manager "$CACHE/kube-controller-manager" \
    --kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false \
    --service-account-private-key-file "$STATE/pki/sa.key" --root-ca-file "$STATE/pki/ca.crt" \
    --use-service-account-credentials=true \
    --controllers serviceaccount-controller,serviceaccount-token-controller,namespace-controller,garbage-collector-controller,job-controller,ttl-after-finished-controller,root-ca-certificate-publisher-controller
  # the default ServiceAccount appearing proves the controller manager works
  wait_for kube-controller-manager 60 default_sa_exists
  log "up: kube-apiserver $K8S_VERSION on https://127.0.0.1:$API_PORT (KUBECONFIG=$KUBECONFIG_FILE)"
}

# The kubelet flags only matter when a kubelet registers (scripts/e2e-cluster.sh): the API
# server reaches it at the node's InternalIP (the node's name does not resolve), checks its
# serving certificate against the test CA, and authenticates with its own client certificate.
start_apiserver() {
  spawn kube-apiserver "$CACHE/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$STATE/pki/apiserver.crt" --tls-private-key-file "$STATE/pki/apiserver.key" \
    --client-ca-file "$STATE/pki/ca.crt" \
    --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$STATE/pki/sa.pub" --service-account-signing-key-file "$STATE/pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true --profiling="$PROFILING" \
    --enable-priority-and-fairness=false --endpoint-reconciler-type none \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --kubelet-certificate-authority "$STATE/pki/ca.crt" \
    --kubelet-client-certificate "$STATE/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$STATE/pki/apiserver-kubelet-client.key"
  wait_for kube-apiserver 120 ready
}

# Stops and starts the API server alone, keeping etcd's data and the certificates (tests
# of clients that must survive an API server restart).
restart_apiserver() {
  alive etcd || die "not up"
  stop -t 10 kube-apiserver
  wait_for "the API server's port $API_PORT to be free" 30 not port_in_use "$API_PORT"
  start_apiserver
  log "kube-apiserver restarted"
}

down_quiet() {
  stop kube-controller-manager kube-apiserver etcd   # in this order: clients first
  rm -rf "$STATE"
}

case "${1:-}" in
  up) up ;;
  down) down_quiet; log "down" ;;
  env) echo "export KUBECONFIG=$KUBECONFIG_FILE" ;;
  build) shift; build "$@" ;;
  status) if alive kube-apiserver && ready; then echo "up"; else echo "down"; exit 1; fi ;;
  restart-apiserver) restart_apiserver ;;
  kubectl-dir)
    # (`kubectl-dir --no-build`: the directory only, for a PATH set before a background
    # `build ... kubectl` has made it, as scripts/test.sh does)
    [ "${2:-}" = --no-build ] || build kubectl
    echo "$CACHE" ;;
  helm)
    if [ "${2:-}" = --cached ]; then [ -x "$CACHE/$HELM_BIN" ] || exit 1; else build helm; fi
    echo "$CACHE/$HELM_BIN" ;;
  old-webhook|vendor-webhook)
    # cached by the contents of its recipe (its Go files and go.mod), so an edit rebuilds it
    src="$ROOT/testenv/$1"
    key=$(cat "$src"/*.go "$src/go.mod" | sha256sum | cut -c1-12)
    bin="$CACHE_ROOT/$1/$key/$1"
    if [ ! -x "$bin" ]; then
      mkdir -p "$(dirname "$bin")"
      (cd "$src" && GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 \
        go build -trimpath -gcflags "$GO_GCFLAGS" -ldflags "-s -w" -o "$bin.tmp.$$" .) >&2
      mv "$bin.tmp.$$" "$bin"
    fi
    echo "$bin" ;;
  *) echo "usage: $0 up|down|env|build|status|restart-apiserver|kubectl-dir|helm|old-webhook|vendor-webhook" >&2; exit 2 ;;
esac
