#!/usr/bin/env bash
# What OpenKruise's manager (kruise-manager, built by bench/lib/kruise/build.sh) needs to run
# outside its Helm chart, in one place for the benchmarks that run it: bench/scale/run.sh
# (the anchor; its harness starts it through `run` below) and bench/completion/run.sh
# (strategy g, on the e2e node). BENCHMARKS.md, "Where OpenKruise's manager comes from, and
# what it needs to run", says why each piece is there.
#
#   bench/lib/kruise.sh version     the release measured: bench/lib/kruise/go.mod's
#   bench/lib/kruise.sh install     every CRD of that release (config/crd/bases of its module,
#                                   in the Go module cache: build.sh downloads it; its
#                                   controllers wait ~16 s for each one missing, and it exits
#                                   without ImagePullJob's), the namespace kruise-system and
#                                   kruise's two webhook configurations, empty (its webhook
#                                   controller waits for them and fills in their CA; no
#                                   webhook of kruise is ever called)
#   bench/lib/kruise.sh uninstall   removes what install made (the CRDs with their objects:
#                                   the NodeImages kruise creates for each Node, ...)
#   bench/lib/kruise.sh run BIN CERT_DIR [FLAG...]
#                                   replaces itself (exec: same PID) with kruise-manager BIN
#                                   on $KUBECONFIG, with its SidecarTerminator on (an alpha
#                                   feature gate), no leader election, no pprof, the webhook's
#                                   certificates in CERT_DIR and its server on a free port of
#                                   its own; FLAG... are added (--namespace, --metrics-addr,
#                                   --health-probe-addr, --rest-config-qps, ...; not
#                                   --namespace: v1.8.2 panics with it, openkruise/kruise#1764,
#                                   its Advanced DaemonSet's and StatefulSet's controllers
#                                   assuming an all-namespaces cache)
# kubectl is $KUBECTL if set, else the one on PATH.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$HERE/../../scripts/lib.sh"   # (log, die, free_port)
LIB_NAME=bench/lib/kruise.sh
KUBECTL="${KUBECTL:-kubectl}"

version() {
  local v
  v="$(sed -nE 's/^require github\.com\/openkruise\/kruise (v[0-9.]+)$/\1/p' "$HERE/kruise/go.mod")"
  [ -n "$v" ] || die "no 'require github.com/openkruise/kruise vX.Y.Z' line in $HERE/kruise/go.mod"
  echo "$v"
}

crds() {
  local dir
  dir="$(go env GOMODCACHE)/github.com/openkruise/kruise@$(version)/config/crd/bases"
  [ -d "$dir" ] || die "no $dir (bench/lib/kruise/build.sh downloads the module)"
  echo "$dir"
}

install_kruise() {
  local dir
  dir="$(crds)"
  "$KUBECTL" apply --server-side -f "$dir" >/dev/null
  # (served before the manager starts: it looks each one up once, and retries for ~16 s)
  "$KUBECTL" wait --for=condition=Established -f "$dir" --timeout=60s >/dev/null
  "$KUBECTL" create namespace kruise-system --dry-run=client -o yaml | "$KUBECTL" apply -f - >/dev/null
  "$KUBECTL" apply -f - >/dev/null <<'EOF'
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: kruise-mutating-webhook-configuration
webhooks: []
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: kruise-validating-webhook-configuration
webhooks: []
EOF
}

# (--wait=false: the API server deletes the CRDs' objects and the namespace's by itself; no
# finalizer of kruise's is left to wait for once its manager is stopped, as callers do first)
uninstall_kruise() {
  local dir
  dir="$(crds)"
  "$KUBECTL" delete -f "$dir" --ignore-not-found --wait=false >/dev/null
  "$KUBECTL" delete namespace kruise-system --ignore-not-found --wait=false >/dev/null
  "$KUBECTL" delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
  "$KUBECTL" delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
}

run() {
  [ $# -ge 2 ] || die "usage: $0 run BIN CERT_DIR [FLAG...]"
  [ -n "${KUBECONFIG:-}" ] || die "run: KUBECONFIG is not set"
  local bin=$1 certs=$2; shift 2
  mkdir -p "$certs"
  # The namespace its webhook controller keeps its certificate Secret in (as deployed), and
  # its webhook server's port: otherwise 9876, which two managers, or anything else, share.
  export POD_NAMESPACE=kruise-system WEBHOOK_CERT_DIR="$certs"
  WEBHOOK_PORT="${WEBHOOK_PORT:-$(free_port)}"
  export WEBHOOK_PORT
  exec "$bin" --kubeconfig="$KUBECONFIG" --enable-leader-election=false --enable-pprof=false \
    --feature-gates=SidecarTerminator=true "$@"
}

case "${1:-}" in
  version) version ;;
  install) install_kruise ;;
  uninstall) uninstall_kruise ;;
  run) shift; run "$@" ;;
  *) die "usage: $0 version|install|uninstall|run BIN CERT_DIR [FLAG...]" ;;
esac
