# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 4, ephemeraljob (e2e/run.sh ephemeraljob; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   EphemeralJob over three real pods: the ephemeral containers run in the target
#   container's process namespace (they find its process) and the status counts match.

scenario4() {
  local ns log; ns=$(fresh_ns ejob); log="/tmp/e2e-controller-$ns.log"
  controller "$ns" "$log" --controllers ephemeraljob
  for i in 0 1 2; do
    sed "s/NAME/web-$i/" "$M/pod-web.yaml" | kubectl -n "$ns" apply -f - >/dev/null
  done
  kubectl -n "$ns" wait --for=condition=Ready pod -l app=web --timeout=120s >/dev/null \
    || fail "4: pods not Ready"
  stamped "$M/ejob-sees-target.yaml" | kubectl -n "$ns" apply -f - >/dev/null
  kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded ejob/sees-target --timeout=120s >/dev/null \
    || fail "4: $(kubectl -n "$ns" get ejob sees-target -o jsonpath='{.status}'); controller log $log"
  stop_controllers
  local s; s=$(kubectl -n "$ns" get ejob sees-target -o jsonpath='{.status.match} {.status.succeeded} {.status.failed}')
  [ "$s" = "3 3 0" ] || fail "4: match/succeeded/failed = $s"
  pass "4: 3 pods; each ephemeral container found the target container's process; match=3 succeeded=3"
}
