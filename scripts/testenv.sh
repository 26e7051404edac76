#!/usr/bin/env bash
# A real Kubernetes control plane for tests, on 127.0.0.1 only:
# etcd + kube-apiserver (RBAC on) + kube-controller-manager (service accounts, namespaces,
# garbage collection, Jobs), built from Go modules (testenv/go.mod) and cached outside the
# repository.
#
#   scripts/testenv.sh up      build if needed, start, wait until ready (idempotent)
#   scripts/testenv.sh env     print `export KUBECONFIG=...` (eval "$(scripts/testenv.sh env)")
#   scripts/testenv.sh down    stop what `up` started (by PID) and remove its state
#   scripts/testenv.sh build   only build/cache the binaries
#   scripts/testenv.sh status  say whether it is up
#   scripts/testenv.sh restart-apiserver   restart the API server alone (etcd data kept)
#   scripts/testenv.sh kubectl-dir         build kubectl (same release) if needed, print its directory
#
# Settings (environment): SEXTON_TESTENV_CACHE (default ~/.cache/sexton-testenv),
# SEXTON_TESTENV_STATE (default /tmp/sexton-testenv), SEXTON_API_PORT (16443),
# SEXTON_ETCD_PORT (23790; the peer port is +10).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
K8S_VERSION="$(sed -nE 's/^(require)?[[:space:]]*k8s\.io\/kubernetes (v[0-9.]+).*/\2/p' "$ROOT/testenv/go.mod" | head -1)"
[ -n "$K8S_VERSION" ] || { echo "testenv: error: no k8s.io/kubernetes version in testenv/go.mod" >&2; exit 1; }
CACHE_ROOT="${SEXTON_TESTENV_CACHE:-$HOME/.cache/sexton-testenv}"
CACHE="$CACHE_ROOT/$K8S_VERSION"
STATE="${SEXTON_TESTENV_STATE:-/tmp/sexton-testenv}"
API_PORT="${SEXTON_API_PORT:-16443}"
ETCD_PORT="${SEXTON_ETCD_PORT:-23790}"
ETCD_PEER_PORT=$((ETCD_PORT + 10))
KUBECONFIG_FILE="$STATE/admin.kubeconfig"

log() { echo "testenv: $*" >&2; }
die() { echo "testenv: error: $*" >&2; exit 1; }

build() {
  local bins=(kube-apiserver kube-controller-manager etcd) missing=()
  [ $# -gt 0 ] && bins=("$@")
  for b in "${bins[@]}"; do [ -x "$CACHE/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v go >/dev/null || die "go is needed to build ${missing[*]} (Go >= 1.24)"
  log "building ${missing[*]} $K8S_VERSION into $CACHE (cold: ~6 min and ~2 GB RAM on 2 cores)"
  mkdir -p "$CACHE"
  local major minor ld
  major="$(echo "$K8S_VERSION" | cut -d. -f1 | tr -d v)"; minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ld+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  local start=$SECONDS
  (
    cd "$ROOT/testenv"
    export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
    for b in "${missing[@]}"; do
      case "$b" in
        etcd) go build -trimpath -ldflags "-s -w" -o "$CACHE/.etcd.tmp" go.etcd.io/etcd/server/v3 ;;
        *) go build -trimpath -ldflags "$ld" -o "$CACHE/.$b.tmp" "k8s.io/kubernetes/cmd/$b" ;;
      esac
      mv "$CACHE/.$b.tmp" "$CACHE/$b"
    done
  )
  log "built in $((SECONDS - start))s"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

alive() { [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

ready() {
  [ -f "$KUBECONFIG_FILE" ] && KUBECONFIG="$KUBECONFIG_FILE" kubectl get --raw /readyz >/dev/null 2>&1
}

default_sa_exists() {
  KUBECONFIG="$KUBECONFIG_FILE" kubectl -n default get serviceaccount default -o name >/dev/null 2>&1
}

certs() {
  command -v openssl >/dev/null || die "openssl is needed (apt-get install openssl)"
  local d="$STATE/pki"
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sexton-testenv-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    cat > san.cnf <<EOF
[req]
distinguished_name = dn
[dn]
[ext]
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, IP:10.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
EOF
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile san.cnf -extensions ext -out apiserver.crt 2>/dev/null
    client() { # name CN O
      printf '[ext]\nbasicConstraints = CA:FALSE\nkeyUsage = digitalSignature, keyEncipherment\nextendedKeyUsage = clientAuth\n' > client.cnf
      openssl req -newkey rsa:2048 -nodes -subj "/CN=$2${3:+/O=$3}" -keyout "$1.key" -out "$1.csr" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile client.cnf -extensions ext -out "$1.crt" 2>/dev/null
    }
    client admin admin system:masters
    client controller-manager system:kube-controller-manager ""
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

kubeconfig() { # file cert-name
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sexton-testenv
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $STATE/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $STATE/pki/$2.crt
    client-key: $STATE/pki/$2.key
contexts:
- name: sexton-testenv
  context: {cluster: sexton-testenv, user: $2}
current-context: sexton-testenv
EOF
}

start() { # name args...
  local name=$1; shift
  nohup "$@" >"$STATE/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

wait_for() { # what seconds command...
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@"; do
    [ $SECONDS -lt $end ] || die "$what not ready after ${secs}s; see $STATE/*.log"
    sleep 0.2
  done
}

up() {
  if alive etcd && alive kube-apiserver && ready; then
    log "already up (KUBECONFIG=$KUBECONFIG_FILE)"
    return 0
  fi
  build
  # Leftovers of a half-started run are ours to clean; a foreign listener is not.
  down_quiet
  for p in "$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT"; do
    if port_in_use "$p"; then
      die "port $p on 127.0.0.1 is taken by another process; free it or set SEXTON_API_PORT / SEXTON_ETCD_PORT"
    fi
  done
  mkdir -p "$STATE"
  certs
  kubeconfig "$KUBECONFIG_FILE" admin
  kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager

  start etcd "$CACHE/etcd" --name default --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --quota-backend-bytes 1073741824
  wait_for etcd 30 port_in_use "$ETCD_PORT"

  start_apiserver

  start kube-controller-manager "$CACHE/kube-controller-manager" \
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

start_apiserver() {
  start kube-apiserver "$CACHE/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$STATE/pki/apiserver.crt" --tls-private-key-file "$STATE/pki/apiserver.key" \
    --client-ca-file "$STATE/pki/ca.crt" \
    --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$STATE/pki/sa.pub" --service-account-signing-key-file "$STATE/pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true --profiling=false \
    --enable-priority-and-fairness=false --endpoint-reconciler-type none
  wait_for kube-apiserver 120 ready
}

# Stops and starts the API server alone, keeping etcd's data and the certificates (tests
# of clients that must survive an API server restart).
restart_apiserver() {
  alive etcd || die "not up"
  local p; p="$(cat "$STATE/kube-apiserver.pid")"
  kill "$p" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
  while port_in_use "$API_PORT"; do sleep 0.1; done
  start_apiserver
  log "kube-apiserver restarted"
}

down_quiet() {
  local p
  for name in kube-controller-manager kube-apiserver etcd; do
    if [ -f "$STATE/$name.pid" ]; then
      p="$(cat "$STATE/$name.pid")"
      # only a process running our binary: a stale PID file must not kill a stranger
      local exe; exe="$(readlink "/proc/$p/exe" 2>/dev/null || true)"; exe="${exe% (deleted)}"
      if kill -0 "$p" 2>/dev/null && [ "$(basename "$exe")" = "$name" ] && [ "${exe#"$CACHE_ROOT"}" != "$exe" ]; then
        kill "$p" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
      fi
    fi
  done
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
    if [ ! -x "$CACHE/kubectl" ]; then
      mkdir -p "$CACHE"
      (cd "$ROOT/testenv" && GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 \
        go build -trimpath -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitVersion=$K8S_VERSION" \
        -o "$CACHE/.kubectl.tmp" k8s.io/kubernetes/cmd/kubectl) >&2
      mv "$CACHE/.kubectl.tmp" "$CACHE/kubectl"
    fi
    echo "$CACHE" ;;
  *) echo "usage: $0 up|down|env|build|status|restart-apiserver" >&2; exit 2 ;;
esac
