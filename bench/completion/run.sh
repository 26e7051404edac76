#!/usr/bin/env bash
# Time to Job completion on the real node: for each way of ending a sidecar, the time from
# the main container's exit to the pod's phase Succeeded as a watch of the API server sees
# it. The node is scripts/e2e-cluster.sh's (brought up if needed: containerd, runc, kubelet).
#   bench/completion/run.sh              7 interleaved runs per strategy (about 8 minutes); rewrites
#                                    the table of "Time to Job completion on a real node" in
#                                    BENCHMARKS.md
#   bench/completion/run.sh --runs N     N runs per strategy
#   bench/completion/run.sh --quick      2 runs per strategy, BENCHMARKS.md left alone; without
#                                    kubexit when bench/lib/kubexit.sh cannot get it
#   bench/completion/run.sh --strategies wrap,native,...   these strategies only (kruise, g
#                                    below, only when named here: it builds OpenKruise)
#   bench/completion/run.sh --no-update  BENCHMARKS.md left alone
#   bench/completion/run.sh --no-spread  main works exactly 2 s in every round (see measure.py)
# Strategies, one Job per run, run in turn (a b c d e a b c d e ...), the workload of
# bench/completion/job.yaml (main: `sleep 2; exit 0`, its 2 s made 2 + (r-1)/N s in round r
# of N; a sidecar that exits 0 on SIGTERM):
#   wrap         a. `kubectl-sexton inject --strategy wrap --sexton-image sexton:e2e`
#   kubexit      b. both containers behind kubexit (bench/completion/job-kubexit.yaml), the
#                   binary of bench/lib/kubexit.sh in an image kubexit:e2e built here
#   native       c. `kubectl-sexton inject --strategy native`
#   controller   d. the sidecar with OpenKruise's marker (bench/completion/job-controller.yaml),
#                   `kubectl-sexton controller --controllers sidecar-terminator` running
#   native-wrap  e. the wrap output with the sidecar moved to the init containers with
#                   restartPolicy Always (a native sidecar that sexton also ends)
#   safety-net   f. the sidecar named by sexton.dev/sidecars (bench/completion/job-safety-net.yaml)
#                   in a namespace labelled for sexton's webhook, whose configuration calls a
#                   port nobody listens on (as when no replica runs): admitted unchanged, and
#                   the controller's safety net (beside the SidecarTerminator, one process)
#                   swaps its image when main is done
#   kruise       g. d's Job with the sidecar also naming the quick-exit image in
#                   KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE (measure.py kruise), in a
#                   namespace of its own, which sexton's controller does not watch (its
#                   --namespace is the others'); OpenKruise's manager
#                   (bench/lib/kruise/build.sh: ~7 min of Go cold; skipped with a log line
#                   where it cannot be had and --quick or SEXTON_BENCH_PEERS=if-built) runs on
#                   this machine as bench/lib/kruise.sh starts it, and the node is labelled
#                   type=virtual-kubelet while the benchmark runs: kruise swaps images in place
#                   only there (elsewhere it asks kruise-daemon, which the node does not run,
#                   to kill the container). kruise watches every namespace (its --namespace
#                   panics in v1.8.2, openkruise/kruise#1764); on that node it swaps only
#                   sidecars that name an image, g's alone, and measure.py stops the run if a
#                   pod's Events show a swap by another strategy's controller. Everything of
#                   kruise (the manager, its CRDs, namespace and webhook configurations, the
#                   label) is removed on exit; a manager left by a killed run, by
#                   e2e-cluster.sh down.
# Raw results: target/bench/completion.json, the table in target/bench/completion.md, both
# stamped (bench/lib/stamp.py). Needs root (the node), python3, Go (kubexit).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
lib_init completion "$E2E_STATE"
RUNS=7 UPDATE=true QUICK=false EXTRA=() STRATEGIES=wrap,kubexit,native,controller,native-wrap,safety-net
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift ;;
    --quick) RUNS=2 UPDATE=false QUICK=true; export SEXTON_BENCH_SETTLE=${SEXTON_BENCH_SETTLE:-0} ;;
    --strategies) STRATEGIES=$2; shift ;;
    --no-update) UPDATE=false ;;
    --no-spread) EXTRA+=("$1") ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
  shift
done
without() { tr , '\n' <<<"$STRATEGIES" | grep -vx "$1" | paste -sd,; }
OUT=target/bench
GEN=$OUT/completion
mkdir -p "$GEN"
CTL=target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton

# kubectl-sexton as it ships for linux/amd64 (Cargo.toml, profile release-nolto); the
# node's images (sexton:e2e, ...) are those of scripts/images.sh, imported by `up`.
(. scripts/lib.sh && build_workspace >&2)
eval "$(scripts/e2e-cluster.sh up)"
export KUBECONFIG

# kubexit:e2e: the kubexit binary at /bin/kubexit and busybox's cp, as kubexit's own image
# (alpine) offers it to the init container that copies the binary out. For this benchmark
# only: scripts/e2e-cluster.sh does not build it.
if [[ ",$STRATEGIES," == *,kubexit,* ]] && ! bench/lib/kubexit.sh image "$GEN"; then
  $QUICK || die "no kubexit (above); --strategies without it measures the others"
  STRATEGIES="$(without kubexit)"
  log "no kubexit: the quick form measures $STRATEGIES"
fi
# kruise-manager (strategy g): built once, cached (~7 min of Go when cold).
KRUISE_BIN=""
if [[ ",$STRATEGIES," == *,kruise,* ]] && ! KRUISE_BIN="$(bench/lib/kruise/build.sh)"; then
  $QUICK || [ "${SEXTON_BENCH_PEERS:-build}" = if-built ] \
    || die "no kruise-manager (above); --strategies without kruise measures the others"
  STRATEGIES="$(without kruise)"
  log "no kruise-manager (above): strategy g (kruise) skipped; measuring $STRATEGIES"
fi

# The Jobs, as JSON (inject answers JSON to JSON; the helper edits the names).
yaml2json() { kubectl create --dry-run=client -o json -f "$1"; }
yaml2json bench/completion/job.yaml >"$GEN/job.json"
"$CTL" inject --strategy wrap --sexton-image sexton:e2e -f "$GEN/job.json" >"$GEN/wrap.json"
"$CTL" inject --strategy native -f "$GEN/job.json" >"$GEN/native.json"
python3 bench/completion/measure.py native-wrap "$GEN/wrap.json" >"$GEN/native-wrap.json"
yaml2json bench/completion/job-kubexit.yaml >"$GEN/kubexit.json"
yaml2json bench/completion/job-controller.yaml >"$GEN/controller.json"
yaml2json bench/completion/job-safety-net.yaml >"$GEN/safety-net.json"
python3 bench/completion/measure.py kruise "$GEN/controller.json" sexton-quick-exit:e2e >"$GEN/kruise.json"

# What the run sets up is undone on exit, last first (`undo COMMAND...` pushes one step).
UNDO=()
undo() { UNDO+=("$(printf '%q ' "$@")"); }
undo_all() {
  local i
  for ((i = ${#UNDO[@]} - 1; i >= 0; i--)); do eval "${UNDO[i]}" >/dev/null 2>&1 || true; done
}
trap undo_all EXIT

# namespace NAME: created, labelled sexton-e2e (removed by e2e-cluster.sh down too), with the
# default ServiceAccount that the pods need to be admitted.
namespace() {
  kubectl create namespace "$1" >/dev/null
  undo kubectl delete namespace "$1" --wait=false
  kubectl label namespace "$1" sexton-e2e=true >/dev/null
  kubectl -n "$1" wait --for=create serviceaccount/default --timeout=30s >/dev/null
}
NS="bench-completion-$$"
namespace "$NS"
# Strategy f: sexton's webhook configuration (e2e's, which selects only namespaces labelled
# sexton-e2e=true) calling a port nobody listens on; the namespace labelled for it. The other
# strategies' pods reach it too and are admitted unchanged at once (connection refused).
NET=()
if [[ ",$STRATEGIES," == *,safety-net,* ]]; then
  WEBHOOK_CONFIG="$NS-webhook"
  mkdir -p "$GEN/dead-webhook"; ca_create "$GEN/dead-webhook" bench-dead-webhook-ca
  port=$(free_port)
  sed -e "s/NAME/$WEBHOOK_CONFIG/" -e "s/PORT/$port/g" -e "s/CA_BUNDLE/$(base64 -w0 "$GEN/dead-webhook/ca.crt")/g" \
    e2e/manifests/webhook-configuration.yaml | kubectl apply -f - >/dev/null
  undo kubectl delete mutatingwebhookconfiguration "$WEBHOOK_CONFIG" --ignore-not-found
  kubectl label namespace "$NS" sexton.dev/inject=enabled >/dev/null
  NET=(--webhook-configuration "$WEBHOOK_CONFIG")
fi

# Strategy g: OpenKruise's manager on this machine, and the node labelled as a virtual-kubelet
# node, the only kind where it swaps an image (see the header for what keeps it off the other
# strategies' pods).
KRUISE=()
if [ -n "$KRUISE_BIN" ]; then
  NSK="$NS-kruise"
  namespace "$NSK"
  node=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
  had=$(kubectl get node "$node" -o jsonpath='{.metadata.labels.type}')
  [ -z "$had" ] || [ "$had" = virtual-kubelet ] \
    || die "the node $node is labelled type=$had; strategy kruise needs type=virtual-kubelet there"
  kubectl label node "$node" type=virtual-kubelet --overwrite >/dev/null
  undo kubectl label node "$node" type-
  undo bench/lib/kruise.sh uninstall
  bench/lib/kruise.sh install
  spawn kruise-manager bench/lib/kruise.sh run "$KRUISE_BIN" "$GEN/kruise-certs" \
    --metrics-addr=0 --health-probe-addr=0   # (neither read here: off)
  undo cp "$LIB_STATE/kruise-manager.log" "$GEN/kruise-manager.log"
  undo stop -t 15 kruise-manager
  # ready once its SidecarTerminator's pod informer has synced (as bench/scale's harness reads it)
  kruise_started() { ! alive kruise-manager || grep 'Starting workers' "$LIB_STATE/kruise-manager.log" | grep -q sidecarterminator; }
  if ! wait_until 180 kruise_started || ! alive kruise-manager; then
    die "kruise-manager did not start its SidecarTerminator within 180 s; its log: $LIB_STATE/kruise-manager.log"
  fi
  log "kruise-manager $(bench/lib/kruise.sh version) ready; g's Jobs in $NSK; node $node labelled type=virtual-kubelet"
  KRUISE=(--kruise-namespace "$NSK")
fi

log "$RUNS runs per strategy ($STRATEGIES), interleaved; namespace $NS"
python3 bench/lib/stamp.py begin >"$GEN/stamp.json"
python3 bench/completion/measure.py run --namespace "$NS" --manifests "$GEN" --strategies "$STRATEGIES" \
  --runs "$RUNS" --out "$OUT/completion.json" --table "$GEN/table.md" --kubectl-sexton "$CTL" "${NET[@]}" \
  "${KRUISE[@]}" "${EXTRA[@]}"

python3 bench/lib/stamp.py end "$GEN/stamp.json" "$OUT/completion.json"
python3 - "$GEN/table.md" "$OUT/completion.json" "$OUT/completion.md" <<'PY'
import json, sys
sys.path.insert(0, "bench/lib")
import stamp
table, raw, md = sys.argv[1:4]
r = json.load(open(raw))
m = r["machine"]
head = ("%s Load average %.2f %.2f %.2f before, %.2f %.2f %.2f after; "
        "%d runs per strategy, interleaved.\n\n" % (
    stamp.line(r["stamp"]), *m["loadavg_before"], *m["loadavg_after"], r["runs_per_strategy"]))
busy = sorted(x["machine_busy_cores"] for x in r["runs"])
tail = "\nMachine busy during the runs (everything, other jobs included): %.2f–%.2f cores (median %.2f) of %d.\n" % (
    busy[0], busy[-1], busy[len(busy) // 2], m["cores"])
open(md, "w").write(head + open(table).read() + tail)
PY
if $UPDATE; then
  python3 bench/lib/section.py completion "$OUT/completion.md" BENCHMARKS.md
  log "BENCHMARKS.md updated"
fi
