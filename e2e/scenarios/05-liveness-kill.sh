# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 5, liveness-kill (e2e/run.sh liveness-kill; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   The kubelet kills main (failing liveness probe): the wrapped sidecar still ends (0),
#   and the Job fails because main did.

scenario5() {
  local ns; ns=$(fresh_ns liveness)
  kubectl -n "$ns" apply -f "$M/job-liveness.yaml" >/dev/null
  kubectl -n "$ns" wait --for=condition=Failed job/liveness --timeout=120s >/dev/null \
    || fail "5: Job not Failed: $(states "$ns" liveness)"
  [ "$(states "$ns" liveness)" = "Failed main=143 proxy=0" ] || fail "5: $(states "$ns" liveness)"
  pass "5: main killed by the kubelet (143); the sidecar ended with 0; Job Failed"
}
