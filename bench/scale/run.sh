#!/usr/bin/env bash
# The controllers at scale (issue 16): sexton's SidecarTerminator and EphemeralJob controller
# against a test API server holding 1 000 and 10 000 running pods, with OpenKruise's
# manager as the anchor. Writes BENCHMARKS.md's "Controllers at scale" (between its
# scale:start and scale:end markers) and target/bench/scale.json (every figure, every
# transition).
#
#   bench/scale/run.sh                   everything (BENCHMARKS.md says how long, and its builds)
#   bench/scale/run.sh --quick           200 and 1 000 pods, short windows: to check the harness
#   bench/scale/run.sh --sizes 1000 --window 20 --contenders sexton,kruise
#   bench/scale/run.sh --rev REV         measure the controller of this commit (default HEAD)
#   bench/scale/run.sh --bin PATH        measure this kubectl-sexton instead of building one
#   bench/scale/run.sh --no-kruise       without the anchor
#   bench/scale/run.sh --workspace-build the controller and the harness of the work tree's
#                                    workspace build (scripts/lib.sh's build_workspace, which
#                                    the tests' build made already) instead of a clean export
#   bench/scale/run.sh --no-write        leave BENCHMARKS.md alone (results in target/bench/)
#   bench/scale/run.sh --keep            leave the test API server running afterwards
#   bench/scale/run.sh --profile         a CPU profile of the API server in each window
#                                    (target/bench/scale/apiserver-*.pprof, and -top.txt)
#
# The controller and the harness are built from a clean export of the commit (`git archive`
# into ~/.cache/sexton-bench/scale-src, target directory ~/.cache/sexton-bench/target-scale),
# never from the work tree, which may hold someone's unfinished change. Needs go, python3.
# It starts a test control plane of its own (scripts/testenv.sh with the state directory
# and ports below, so that it does not disturb the one the tests use) and stops it at the
# end. Results are stamped (bench/lib/stamp.py). Other settings are passed to the harness (crates/kubectl-sexton/benches/scale/):
# `--window`, `--rate-percent`, `--also-rate`, `--idle`, `--drain`, `--concurrency`, `--contenders`,
# `--kruise-qps`, `--max-wait-webhook`.
set -euo pipefail

CALLER=$PWD   # (a path given with --bin is the caller's)
abs() { case $1 in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
export SEXTON_TESTENV_STATE="${SEXTON_SCALE_STATE:-/tmp/scale-testenv}"
export SEXTON_API_PORT="${SEXTON_SCALE_API_PORT:-26543}"
export SEXTON_ETCD_PORT="${SEXTON_SCALE_ETCD_PORT:-33890}"
WORK="$ROOT/target/bench/scale"
JSON="$ROOT/target/bench/scale.json"
MD="$ROOT/target/bench/scale.md"

# shellcheck source=scripts/lib.sh
. scripts/lib.sh    # (log, die)
LIB_NAME=bench/scale

BIN="" REV=HEAD KRUISE=1 WRITE=1 KEEP=0 WORKSPACE=0 ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) ARGS+=(--sizes 200,1000 --window 10 --idle 3 --drain 30); export SEXTON_BENCH_SETTLE=${SEXTON_BENCH_SETTLE:-0}; shift ;;
    --bin) BIN="$(abs "$2")"; shift 2 ;;
    --rev) REV="$2"; shift 2 ;;
    --no-kruise) KRUISE=0; shift ;;
    --workspace-build) WORKSPACE=1; shift ;;
    --no-write) WRITE=0; shift ;;
    --keep) KEEP=1; shift ;;
    --profile) export SEXTON_TESTENV_PROFILING=true; ARGS+=(--apiserver-profile); shift ;;
    --sizes|--window|--rate-percent|--also-rate|--idle|--drain|--concurrency|--contenders|--kruise-qps|--max-wait-webhook)
      ARGS+=("$1" "$2"); shift 2 ;;
    --no-ejob) ARGS+=("$1"); shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
mkdir -p "$WORK"
rm -f "$WORK"/apiserver-*.pprof "$WORK"/apiserver-*-top.txt   # (a previous run's)

# 1. The harness and the controller: release builds of the commit. The controller is
#    copied, so that nothing changes it during the run.
CACHE="${SEXTON_BENCH_CACHE:-$HOME/.cache/sexton-bench}"
SRC="$CACHE/scale-src"
COMMIT="$(git rev-parse --short "$REV^{commit}")"
if [ "$WORKSPACE" = 1 ]; then
  [ "$REV" = HEAD ] || die "--workspace-build measures the work tree: no --rev"
  git diff --quiet HEAD -- crates Cargo.lock || COMMIT="$COMMIT+changes"
  # shellcheck source=scripts/lib.sh
  (. scripts/lib.sh && build_workspace --message-format=json-render-diagnostics) >"$WORK/cargo.json"
else
  rm -rf "$SRC" && mkdir -p "$SRC"
  git archive "$COMMIT" | tar -x -C "$SRC"
  [ -f "$SRC/crates/kubectl-sexton/benches/scale/main.rs" ] || die "$REV has no crates/kubectl-sexton/benches/scale"
  log "building the release controller and the harness of $COMMIT (in $SRC)"
  (cd "$SRC" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target-scale}" \
    cargo build --profile release-nolto --locked -p kubectl-sexton --bin kubectl-sexton --bench scale \
    --message-format=json-render-diagnostics) >"$WORK/cargo.json"
fi
read -r BUILT HARNESS < <(python3 - "$WORK/cargo.json" <<'EOF'
import json, sys
exe = {}
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    # (--benches also builds the bin as a test harness: kind "bin" too, profile.test true;
    # in whichever order cargo reports them, the controller is the bin that is not a test)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        kind = tuple(m["target"]["kind"])
        if kind == ("bin",) and m["profile"]["test"]:
            continue
        exe[(m["target"]["name"], kind)] = m["executable"]
print(exe[("kubectl-sexton", ("bin",))], exe[("scale", ("bench",))])
EOF
)
if [ -z "$BIN" ]; then
  BIN="$WORK/kubectl-sexton"
  cp "$BUILT" "$BIN"
fi
MEASURED="sexton built from \`$COMMIT\`"
[ "$BIN" = "$WORK/kubectl-sexton" ] || MEASURED="sexton: the binary $BIN (harness of \`$COMMIT\`)"

# 2. The anchor: OpenKruise's manager, built from its Go module (bench/lib/kruise/build.sh).
KRUISE_BIN="" KRUISE_NOTE=""
if [ "$KRUISE" = 1 ]; then
  if KRUISE_BIN="$(bench/lib/kruise/build.sh)"; then
    log "anchor: $KRUISE_BIN"
  else
    KRUISE_BIN=""
    KRUISE_NOTE=" OpenKruise's manager could not be built (see bench/lib/kruise/build.sh's message): no anchor in this run."
  fi
fi

# 3. A test control plane of our own, stopped at the end.
if [ "$KEEP" = 0 ]; then
  trap 'scripts/testenv.sh down >/dev/null 2>&1 || true' EXIT
fi
scripts/testenv.sh up
KUBECONFIG_FILE="$SEXTON_TESTENV_STATE/admin.kubeconfig"
export KUBECONFIG="$KUBECONFIG_FILE"
KUBECTL="$(scripts/testenv.sh kubectl-dir)/kubectl"
API_PID="$(cut -d' ' -f1 "$SEXTON_TESTENV_STATE/kube-apiserver.pid")"

"$BIN" crd | "$KUBECTL" apply --server-side -f - >/dev/null
# kruise-manager as deployed, its webhooks left out (bench/lib/kruise.sh says what and why)
[ -z "$KRUISE_BIN" ] || KUBECTL="$KUBECTL" bench/lib/kruise.sh install

# sexton's webhook configuration as the chart installs it (sexton-webhook), for every
# namespace but the control plane's and kruise's, calling a port nobody listens on (pods are
# admitted unchanged at once: connection refused): the controller's safety net, on by
# default, then takes the benchmark's pods as served and decides on every one of them, as
# where the webhook is installed (it leaves their marked sidecars to the SidecarTerminator).
"$KUBECTL" apply -f - >/dev/null <<'EOF'
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: sexton-webhook
webhooks:
  - name: inject.sexton.dev
    admissionReviewVersions: ["v1"]
    clientConfig: {url: "https://127.0.0.1:1/mutate"}
    rules: [{operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], scope: Namespaced}]
    namespaceSelector:
      matchExpressions:
        - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kube-public, kube-node-lease, default, kruise-system]}
    failurePolicy: Ignore
    sideEffects: None
    timeoutSeconds: 5
    reinvocationPolicy: IfNeeded
EOF

# 4. The measurements.
NOTE="$MEASURED. sexton's webhook configuration serves the benchmark's namespaces (calling a port nobody listens on), so the safety net decides on every pod. Test API server: scripts/testenv.sh (kube-apiserver $K8S_VERSION, etcd, kube-controller-manager), with the kube-apiserver's default \`--max-requests-inflight 400\` and \`--max-mutating-requests-inflight 200\` (neither set) and API Priority and Fairness off (testenv's \`--enable-priority-and-fairness=false\`); no client-side rate limit in sexton (kube-rs has none) nor in the harness.$KRUISE_NOTE"
KRUISE_ARGS=()
[ -n "$KRUISE_BIN" ] && KRUISE_ARGS=(--kruise "$KRUISE_BIN" --kruise-version "$(bench/lib/kruise.sh version)" --kruise-launcher bench/lib/kruise.sh)
log "measuring (log lines of the controllers in $WORK)"
python3 bench/lib/stamp.py begin >"$WORK/stamp.json"
"$HARNESS" cluster --kubeconfig "$KUBECONFIG_FILE" --sexton "$BIN" "${KRUISE_ARGS[@]}" \
  --apiserver-pid "$API_PID" --work "$WORK" --json "$JSON" --md "$MD" --note "$NOTE" "${ARGS[@]}"

# The API server's profiles, summarised (the functions where its CPU went, cumulative).
for p in "$WORK"/apiserver-*.pprof; do
  [ -f "$p" ] || continue
  go tool pprof -top -cum -nodecount=60 "$p" >"${p%.pprof}-top.txt" 2>/dev/null || log "go tool pprof could not read $p"
done

# Where a cached pod's memory goes (one pod of the benchmark, decoded 10 000 times).
{
  echo
  echo "#### Where a cached pod's memory goes"
  echo
  "$HARNESS" memory --kubeconfig "$KUBECONFIG_FILE" --pods 10000 --json "$WORK/memory.json"
} >>"$MD"

# The stamp: into the results, and first in the section.
python3 bench/lib/stamp.py end "$WORK/stamp.json" "$JSON"
{ python3 bench/lib/stamp.py line "$JSON"; echo; cat "$MD"; } >"$MD.tmp" && mv "$MD.tmp" "$MD"

# 5. BENCHMARKS.md: only the part between our markers (re-read now: others edit other
#    sections of the file meanwhile).
if [ "$WRITE" = 1 ]; then
  python3 bench/lib/section.py scale "$MD" "$ROOT/BENCHMARKS.md"
  log "BENCHMARKS.md updated (Controllers at scale)"
fi
log "results: $JSON, $MD"
