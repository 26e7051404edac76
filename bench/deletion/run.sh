#!/usr/bin/env bash
# Pod deletion on the real node: a running pod is deleted while its main drains 3 s through
# its proxy (the `deletion` pod of e2e/manifests/contract.yaml). For each way of ending the
# sidecar: when the main and the proxy got their stop signals and exited, when the pod was
# terminal, and how many of the main's requests through the proxy failed during its drain.
#   bench/deletion/run.sh              5 interleaved runs per strategy; rewrites the table of
#                                  "Pod deletion: the sidecar outlives the main's drain" in
#                                  BENCHMARKS.md
#   bench/deletion/run.sh --runs N     N runs per strategy
#   bench/deletion/run.sh --no-update  BENCHMARKS.md left alone
#   bench/deletion/run.sh --quick      1 run per strategy, BENCHMARKS.md left alone: to check the
#                                  harness (scripts/test.sh's e2e stage); without kubexit
#                                  when bench/lib/kubexit.sh cannot get it
#   bench/deletion/run.sh --strategies native,wrap,...   these strategies only
# Strategies: native, wrap, native-wrap (`kubectl-sexton inject`), and kubexit (both
# containers behind kubexit: bench/deletion/pod-kubexit.yaml, kubexit built by
# bench/lib/kubexit.sh into the image kubexit:e2e). Raw results: target/bench/deletion.json, the
# table in target/bench/deletion.md, both stamped (bench/lib/stamp.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
lib_init deletion "$E2E_STATE"
RUNS=5 UPDATE=true QUICK=false STRATEGIES=native,wrap,native-wrap,kubexit
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift ;;
    --no-update) UPDATE=false ;;
    --quick) RUNS=1 UPDATE=false QUICK=true; export SEXTON_BENCH_SETTLE=${SEXTON_BENCH_SETTLE:-0} ;;
    --strategies) STRATEGIES=$2; shift ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
  shift
done
OUT=target/bench
GEN=$OUT/deletion
mkdir -p "$GEN"
CTL=target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton

# kubectl-sexton as it ships for linux/amd64 (profile release-nolto, as bench/completion/run.sh)
build_workspace >&2
eval "$(scripts/e2e-cluster.sh up)"
export KUBECONFIG

if [[ ",$STRATEGIES," == *,kubexit,* ]] && ! bench/lib/kubexit.sh image "$GEN"; then
  $QUICK || die "no kubexit (above); --strategies without it measures the others"
  STRATEGIES="$(tr , '\n' <<<"$STRATEGIES" | grep -vx kubexit | paste -sd,)"
  log "no kubexit: the quick form measures $STRATEGIES"
fi

# The pods, as JSON: the `deletion` pod of scenario 12, injected each way.
kubectl create --dry-run=client -o json -f e2e/manifests/contract.yaml \
  | python3 -c '
import json, sys
# (kubectl prints a List, or one object after another for several documents: both read)
text, dec, objs, i = sys.stdin.read(), json.JSONDecoder(), [], 0
while text[i:].strip():
    o, i = dec.raw_decode(text, len(text) - len(text[i:].lstrip()))
    objs += o.get("items", [o])
pod = next(o for o in objs if o["kind"] == "Pod")
pod["metadata"].pop("namespace", None)   # (the client filled in its context namespace: measure.py picks one)
print(json.dumps(pod))' \
  >"$GEN/pod.json"
for s in native wrap native-wrap; do
  sed "s/STRATEGY/$s/g" "$GEN/pod.json" | "$CTL" inject --strategy "$s" --sexton-image sexton:e2e -f - >"$GEN/$s.json"
done
kubectl create --dry-run=client -o json -f bench/deletion/pod-kubexit.yaml \
  | python3 -c 'import json, sys; p = json.load(sys.stdin); p["metadata"].pop("namespace", None); print(json.dumps(p))' \
  >"$GEN/kubexit.json"

NS="bench-deletion-$$"
kubectl create namespace "$NS" >/dev/null
kubectl label namespace "$NS" sexton-e2e=true >/dev/null   # removed by e2e-cluster.sh down too
trap 'kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true' EXIT
kubectl -n "$NS" wait --for=create serviceaccount/default --timeout=30s >/dev/null
kubectl -n "$NS" apply -f e2e/manifests/contract-lib.yaml >/dev/null

log "$RUNS runs per strategy ($STRATEGIES), interleaved; namespace $NS"
python3 bench/lib/stamp.py begin >"$GEN/stamp.json"
python3 bench/deletion/measure.py --namespace "$NS" --manifests "$GEN" --strategies "$STRATEGIES" \
  --runs "$RUNS" --out "$OUT/deletion.json" --table "$GEN/table.md"

python3 bench/lib/stamp.py end "$GEN/stamp.json" "$OUT/deletion.json"
{ python3 bench/lib/stamp.py line "$OUT/deletion.json"; echo; cat "$GEN/table.md"; } >"$OUT/deletion.md"

if $UPDATE; then
  python3 - "$OUT/deletion.md" BENCHMARKS.md <<'PY'
import sys
table, path = open(sys.argv[1]).read(), sys.argv[2]
doc = open(path).read()
start = doc.index("<!-- deletion table -->")
end = doc.index("<!-- /deletion table -->")
open(path, "w").write(doc[:start] + "<!-- deletion table -->\n" + table + doc[end:])
PY
fi
