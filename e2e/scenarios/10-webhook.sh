# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 10, webhook (e2e/run.sh webhook; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   `kubectl-sexton webhook` (the release binary) on this machine, over TLS with an
#   openssl-made certificate for 127.0.0.1, registered by URL (https://127.0.0.1:PORT/mutate)
#   with its CA as caBundle: in a namespace labelled sexton.dev/inject=enabled, Jobs whose
#   sidecar sits in spec.containers (named by the template's annotation sexton.dev/sidecars)
#   are injected at pod creation, auto (native here) and wrap (the template's annotation):
#   main 0 -> Job Complete, main 1 -> Job Failed, the sidecar ended with 0; in an unlabelled
#   namespace the webhook admits the pod unchanged (its spec is the template's) and its
#   sidecar runs on. The configuration is deleted and the webhook stopped on any exit.

# Scenario 10: `kubectl-sexton webhook` on this machine (the release binary, as the API
# server's webhooks are called: over TLS, here with a certificate for 127.0.0.1 made by
# openssl), registered by URL with its CA as caBundle.

# webhook_metric RESULT: the webhook's count of reviews answered RESULT (0 before the first).
webhook_metric() {
  local got
  got=$(curl -sf --max-time 5 "http://$WEBHOOK_METRICS/metrics") || fail "10: no metrics from the webhook at $WEBHOOK_METRICS"
  awk -v k="sexton_webhook_reviews_total{result=\"$1\"}" '$1 == k {n = $2} END {print n + 0}' <<<"$got"
}



# pod_spec NS JOB: what the webhook would change in the Job's pod: its annotations' keys,
# init containers, and each container's name, image, command, args and env.
pod_spec() {
  kubectl -n "$1" get pods -l "job-name=$2" -o jsonpath='{.items[0].metadata.annotations} init=[{.items[0].spec.initContainers}]{range .items[0].spec.containers[*]} {.name} {.image} {.command} {.args} {.env};{end}'
}
template_spec() {
  kubectl -n "$1" get job "$2" -o jsonpath='{.spec.template.metadata.annotations} init=[{.spec.template.spec.initContainers}]{range .spec.template.spec.containers[*]} {.name} {.image} {.command} {.args} {.env};{end}'
}


scenario10() {
  local dir="$E2E_STATE/webhook" log lab plain s c job want phase got n0 u0
  lab=$(fresh_ns webhook sexton.dev/inject=enabled) plain=$(fresh_ns webhook-unlabelled)
  start_webhook 10 "$dir" "$lab"
  log=$WEBHOOK_LOG

  # the unlabelled namespace: the pod reaches the webhook (/mutate/annotated), which admits
  # it unchanged; with nothing to end it, the sidecar runs on after main
  n0=$(webhook_metric injected) u0=$(webhook_metric unchanged)
  job_webhook auto 0 | kubectl -n "$plain" create -f - >/dev/null
  kubectl -n "$plain" wait --for=jsonpath='{.status.containerStatuses[?(@.name=="main")].state.terminated.exitCode}'=0 \
    pod -l job-name=webhook-auto-0 --timeout=60s >/dev/null || fail "10: unlabelled: main did not end with 0: $(all_states "$plain" webhook-auto-0)"
  got=$(pod_spec "$plain" webhook-auto-0) want=$(template_spec "$plain" webhook-auto-0)
  [ "$got" = "$want" ] || fail "10: unlabelled: the pod is not the template: pod '$got', template '$want'"
  [ "$(webhook_metric injected) $(webhook_metric unchanged)" = "$n0 $((u0 + 1))" ] \
    || fail "10: unlabelled: reviews injected $n0 -> $(webhook_metric injected), unchanged $u0 -> $(webhook_metric unchanged); want one more unchanged"
  got=$(kubectl -n "$plain" get pods -l job-name=webhook-auto-0 \
    -o jsonpath='{.items[0].status.phase} {.items[0].status.containerStatuses[?(@.name=="proxy")].state.running.startedAt}')
  [[ "$got" == "Running "?* ]] || fail "10: unlabelled: after main's exit: $got, want the pod Running and its proxy running"
  kubectl delete namespace "$plain" --wait=false >/dev/null

  # the labelled namespace: every pod injected once, auto (native on this node) and wrap (the
  # template's annotation), its binary from an image volume (auto: Kubernetes 1.37, the
  # node's containerd 2.4)
  for s in auto wrap; do
    for c in 0 1; do job_webhook "$s" "$c" | kubectl -n "$lab" create -f - >/dev/null; done
  done
  for s in auto wrap; do
    for c in 0 1; do
      job="webhook-$s-$c"
      if [ "$c" = 0 ]; then want=Complete phase=Succeeded; else want=Failed phase=Failed; fi
      kubectl -n "$lab" wait --for=condition=$want "job/$job" --timeout=120s >/dev/null \
        || fail "10: $job not $want: $(all_states "$lab" "$job"); webhook log $log"
      got=$(all_states "$lab" "$job")
      if [ "$s" = auto ]; then
        [ "$got" = "$phase proxy=0 main=$c" ] || fail "10: $job: '$got', want '$phase proxy=0 main=$c' (native)"
      else
        [ "$got" = "$phase main=$c proxy=0" ] || fail "10: $job: '$got', want '$phase main=$c proxy=0' (no install container)"
        [ "$(bin_volume "$lab" "$job")" = "sexton:e2e init=[]" ] || fail "10: $job's binary: $(bin_volume "$lab" "$job"), want the image volume sexton:e2e"
      fi
      got=$(kubectl -n "$lab" get pods -l "job-name=$job" -o jsonpath='{.items[0].metadata.annotations.sexton\.dev/injected}')
      want=native; [ "$s" = auto ] || want=$s
      [[ "$got" == *"\"mechanism\":\"$want\""* ]] || fail "10: $job: the pod's sexton.dev/injected is '$got', want mechanism $want"
      # the Job itself is as created: the webhook changes pods, not their templates
      [[ "$(template_spec "$lab" "$job")" != *sexton.dev/injected* ]] || fail "10: $job: its template was changed"
    done
  done
  got=$(webhook_metric injected)
  [ "$got" = $((n0 + 4)) ] || fail "10: the webhook injected $((got - n0)) pods, want 4"
  stop_webhook
  pass "10: the webhook on 127.0.0.1:$WEBHOOK_PORT (openssl certificate, caBundle): in the labelled namespace auto (native) and wrap (binary from an image volume): main 0 -> Complete, main 1 -> Failed, the sidecar ended with 0; unlabelled: the pod admitted unchanged, its sidecar still running"
}
