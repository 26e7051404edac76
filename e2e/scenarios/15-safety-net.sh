# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 15, safety-net (e2e/run.sh safety-net; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   The safety net: sexton's webhook configuration registered (scenario 10's) for a port
#   nobody listens on, as when the webhook is scaled to zero: a Job declaring two sidecars
#   (sexton.dev/sidecars) is admitted unchanged, and `kubectl-sexton controller` (the safety
#   net alone) swaps proxy, then logs, to the quick-exit image once main ended: main 0 ->
#   Job Complete (pod Succeeded), main 1 -> Job Failed, both sidecars ended with 0 in reverse
#   order; the pod records the cause (NotInjected) and the Job has the Event
#   SidecarsEndedBySafetyNet.

# (Scenarios 15 and 16 show the controller's safety net; their helpers are in e2e/lib.sh.)

scenario15() {
  local dir="$E2E_STATE/scenario15" ns code job want pod got proxy logs
  ns=$(fresh_ns net sexton.dev/inject=enabled)
  dead_webhook 15 "$dir"
  net_controller 15 "$ns" "$dir/controller.log"
  for code in 0 1; do
    sed -e "s/MAIN_CODE/$code/g" "$M/job-safety-net.yaml" | kubectl -n "$ns" create -f - >/dev/null \
      || fail "15: cannot create the Job net-$code"
  done
  for code in 0 1; do
    job="net-$code"; want=Complete; [ "$code" = 0 ] || want=Failed
    kubectl -n "$ns" wait --for=condition=$want "job/$job" --timeout=120s >/dev/null \
      || fail "15: $job not $want: $(states "$ns" "$job"); controller log: $(tail -20 "$dir/controller.log")"
    pod=$(job_pod "$ns" "$job")
    got=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.status.phase}')
    want=Succeeded; [ "$code" = 0 ] || want=Failed
    [ "$got" = "$want" ] || fail "15: $job: pod $got, want $want"
    got=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.annotations.sexton\.dev/injected}')
    [ -z "$got" ] || fail "15: $job: the pod was injected ($got): the webhook answered"
    got=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.annotations.sexton\.dev/safety-net}')
    [ "$got" = '{"cause":"NotInjected","sidecars":["proxy","logs"]}' ] || fail "15: $job: the net's record is '$got'"
    read -r -a proxy <<<"$(sidecar_end "$ns" "$pod" proxy)"
    read -r -a logs <<<"$(sidecar_end "$ns" "$pod" logs)"
    for got in "${proxy[*]:0:3}" "${logs[*]:0:3}"; do
      [ "$got" = "docker.io/library/sexton-quick-exit:e2e 0 1" ] || fail "15: $job: a sidecar's end: '$got', want the quick-exit image, exit 0, 1 restart"
    done
    # reverse order: logs' replacement started once proxy's had ended (RFC 3339, UTC)
    [[ ! "${logs[3]}" < "${proxy[4]}" ]] || fail "15: $job: logs' replacement started at ${logs[3]}, before proxy's ended at ${proxy[4]}"
    got=$(kubectl -n "$ns" get events --field-selector "reason=SidecarsEndedBySafetyNet,involvedObject.kind=Job,involvedObject.name=$job" -o jsonpath='{.items[0].message}')
    [[ "$got" == *"not injected at admission"* ]] || fail "15: $job: no SidecarsEndedBySafetyNet Event on the Job saying why: '$got'"
  done
  stop_controllers
  stop_webhook
  pass "15: sexton's webhook not answering: both Jobs admitted unchanged; the safety net ended proxy, then logs (quick-exit, exit 0): main 0 -> Complete (Succeeded), main 1 -> Failed; cause NotInjected recorded and told on the Job"
}
