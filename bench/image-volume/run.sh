#!/usr/bin/env bash
# The supervisor from an image volume against its copy, on the real node: 20 wrapped Job pods
# of 2 containers at once, per form, side by side in one run (bench/image-volume/measure.py
# says what is measured and how):
#   copy          `kubectl-sexton inject --strategy wrap --binary-source copy`
#   image-volume  `kubectl-sexton inject --strategy wrap --binary-source image-volume`
#   native        `kubectl-sexton inject --strategy native` (no supervisor: the baseline)
# The node is scripts/e2e-cluster.sh's (brought up if needed), its images those of
# scripts/images.sh (sexton:e2e).
#   bench/image-volume/run.sh              2 rounds of 20 pods per form (about 5 minutes); rewrites
#                                      the table of "Image volume against copy" in BENCHMARKS.md
#   bench/image-volume/run.sh --quick      1 round of 4 pods, BENCHMARKS.md left alone
#   bench/image-volume/run.sh --pods N --rounds R --no-update
# Raw results: target/bench/image-volume.json, the table in target/bench/image-volume.md,
# both stamped (bench/lib/stamp.py). Needs root (the node; /proc of the node's processes).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
lib_init image-volume "$E2E_STATE"
PODS=20 ROUNDS=2 HOLD=20 UPDATE=true
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) PODS=4 ROUNDS=1 HOLD=8 UPDATE=false; export SEXTON_BENCH_SETTLE=${SEXTON_BENCH_SETTLE:-0} ;;
    --pods) PODS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --no-update) UPDATE=false ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
  shift
done
OUT=target/bench
GEN=$OUT/image-volume
mkdir -p "$GEN"
CTL=target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton

build_workspace >&2
eval "$(scripts/e2e-cluster.sh up)"
export KUBECONFIG

kubectl create --dry-run=client -o json -f bench/image-volume/job.yaml >"$GEN/job.json"
"$CTL" inject --strategy wrap --binary-source copy --sexton-image sexton:e2e -f "$GEN/job.json" >"$GEN/copy.json"
"$CTL" inject --strategy wrap --binary-source image-volume --sexton-image sexton:e2e -f "$GEN/job.json" >"$GEN/image-volume.json"
"$CTL" inject --strategy native -f "$GEN/job.json" >"$GEN/native.json"

NS="bench-image-volume-$$"
kubectl create namespace "$NS" >/dev/null
kubectl label namespace "$NS" sexton-e2e=true >/dev/null   # removed by e2e-cluster.sh down too
trap 'kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true' EXIT
kubectl -n "$NS" wait --for=create serviceaccount/default --timeout=30s >/dev/null

log "$ROUNDS round(s) of $PODS pods per form (copy, image-volume, native); namespace $NS"
python3 bench/lib/stamp.py begin >"$GEN/stamp.json"
python3 bench/image-volume/measure.py --namespace "$NS" --manifests "$GEN" --pods "$PODS" --rounds "$ROUNDS" \
  --hold "$HOLD" --sock "$E2E_STATE/containerd.sock" --ctr "$CONTAINERD_DIR/ctr" \
  --out "$OUT/image-volume.json" --table "$GEN/table.md"
python3 bench/lib/stamp.py end "$GEN/stamp.json" "$OUT/image-volume.json"
python3 - "$GEN/table.md" "$OUT/image-volume.json" "$OUT/image-volume.md" <<'PY'
import json, sys
sys.path.insert(0, "bench/lib")
import stamp
table, raw, md = sys.argv[1:4]
r = json.load(open(raw))
m = r["machine"]
head = ("%s Load average %.2f %.2f %.2f before, %.2f %.2f %.2f after; %d round(s) of %d pods per form, "
        "each form's pods created at once.\n\n" % (stamp.line(r["stamp"]), *m["loadavg_before"],
        *m["loadavg_after"], r["rounds"], r["pods"]))
open(md, "w").write(head + open(table).read())
PY
if $UPDATE; then
  python3 bench/lib/section.py image-volume "$OUT/image-volume.md" BENCHMARKS.md
  log "BENCHMARKS.md updated"
fi
