# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 1, wrapped-sidecar (e2e/run.sh wrapped-sidecar; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   Job: main + sexton-wrapped sidecar; main 0 -> Job Complete, main 1 -> Job Failed; the
#   sidecar is stopped and exits 0 in both.

scenario1() {
  local ns; ns=$(fresh_ns wrapped)
  for c in 0 1; do sed "s/MAIN_CODE/$c/g" "$M/job-wrapped.yaml" | kubectl -n "$ns" apply -f - >/dev/null; done
  kubectl -n "$ns" wait --for=condition=Complete job/wrapped-0 --timeout=120s >/dev/null \
    || fail "1: wrapped-0 not Complete: $(states "$ns" wrapped-0)"
  kubectl -n "$ns" wait --for=condition=Failed job/wrapped-1 --timeout=120s >/dev/null \
    || fail "1: wrapped-1 not Failed: $(states "$ns" wrapped-1)"
  [ "$(states "$ns" wrapped-0)" = "Succeeded main=0 proxy=0" ] || fail "1: wrapped-0: $(states "$ns" wrapped-0)"
  [ "$(states "$ns" wrapped-1)" = "Failed main=1 proxy=0" ] || fail "1: wrapped-1: $(states "$ns" wrapped-1)"
  pass "1: main 0 -> Complete, main 1 -> Failed; the sidecar stopped with 0 in both"
}
