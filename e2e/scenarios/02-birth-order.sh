# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 2, birth-order (e2e/run.sh birth-order; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   Birth dependencies: main starts only after the proxy is ready, through the graveyard
#   (sexton's file readiness probe) and through the API (the pod's own ServiceAccount token,
#   mounted by the kubelet; host network to reach the test API server on 127.0.0.1).

scenario2() {
  local ns; ns=$(fresh_ns birth)
  kubectl -n "$ns" apply -f "$M/job-birth-graveyard.yaml" >/dev/null
  sed "s/API_PORT/$API_PORT/g" "$M/job-birth-api.yaml" | kubectl -n "$ns" apply -f - >/dev/null
  for j in birth-graveyard birth-api; do
    kubectl -n "$ns" wait --for=condition=Complete "job/$j" --timeout=120s >/dev/null \
      || fail "2: $j not Complete: $(states "$ns" "$j")"
    [ "$(states "$ns" "$j")" = "Succeeded main=0 proxy=0" ] || fail "2: $j: $(states "$ns" "$j")"
  done
  pass "2: main started after the proxy was ready (graveyard and API variants), Jobs Complete"
}
