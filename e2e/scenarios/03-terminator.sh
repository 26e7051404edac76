# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 3, terminator (e2e/run.sh terminator; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   SidecarTerminator: an unwrapped marked sidecar; `kubectl-sexton controller` swaps its image; the
#   kubelet restarts it with the quick-exit image (restartPolicy Never); Job Complete.

scenario3() {
  local ns log; ns=$(fresh_ns terminator); log="/tmp/e2e-controller-$ns.log"
  controller "$ns" "$log" --quick-exit-image sexton-quick-exit:e2e --controllers sidecar-terminator
  kubectl -n "$ns" apply -f "$M/job-terminator.yaml" >/dev/null
  kubectl -n "$ns" wait --for=condition=Complete job/terminated --timeout=120s >/dev/null \
    || fail "3: Job not Complete: $(states "$ns" terminated); controller log $log"
  stop_controllers
  local got
  got=$(kubectl -n "$ns" get pods -l job-name=terminated \
    -o jsonpath='{.items[0].status.phase}{range .items[0].status.containerStatuses[*]} {.name}:{.image}:{.state.terminated.exitCode}:{.restartCount}{end}')
  [ "$got" = "Succeeded main:docker.io/library/busybox:e2e:0:0 proxy:docker.io/library/sexton-quick-exit:e2e:0:1" ] \
    || fail "3: $got"
  pass "3: sidecar swapped, restarted by the kubelet as the quick-exit image (exit 0), pod Succeeded, Job Complete"
}
