# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 6, logs-exec (e2e/run.sh logs-exec; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   The kubelet's API through the API server: `kubectl logs` returns a container's output
#   and `kubectl exec` runs commands in it, exit codes included.

scenario6() {
  local ns got rc; ns=$(fresh_ns kubelet-api)
  kubectl -n "$ns" apply -f "$M/pod-echo.yaml" >/dev/null
  kubectl -n "$ns" wait --for=condition=Ready pod/echo --timeout=60s >/dev/null \
    || fail "6: pod not Ready: $(kubectl -n "$ns" get pod echo -o jsonpath='{.status}')"
  got=$(kubectl -n "$ns" logs echo --request-timeout=20s 2>&1) || fail "6: kubectl logs: $got"
  [ "$got" = "hello from echo" ] || fail "6: kubectl logs returned '$got'"
  # shellcheck disable=SC2016  # expanded in the container
  got=$(timeout 30 kubectl -n "$ns" exec echo -- sh -c 'echo "in $(cat /proc/1/comm)"' 2>&1) \
    || fail "6: kubectl exec: $got"
  [ "$got" = "in sleep" ] || fail "6: kubectl exec returned '$got'"
  rc=0; timeout 30 kubectl -n "$ns" exec echo -- sh -c 'exit 3' >/dev/null 2>&1 || rc=$?
  [ "$rc" = 3 ] || fail "6: kubectl exec of 'exit 3' exited $rc"
  pass "6: kubectl logs returns the container's output; kubectl exec runs in the container (exit 3 passed on)"
}
