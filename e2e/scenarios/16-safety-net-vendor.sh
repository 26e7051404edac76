# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 16, safety-net-vendor (e2e/run.sh safety-net-vendor; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   The safety net and a vendor's sidecar: with sexton's webhook not answering (as in 15),
#   the stand-in of Istio's injector adds istio-proxy (args only, as Istio's: a busybox that
#   answers its probes) to a Job that declares nothing; the net recognises it by Istio's
#   marker and swaps it once main ended: Job Complete, istio-proxy ended with 0.

# Whether a dry-run Pod comes back with Istio's proxy, in NS.
istio_called() {
  kubectl -n "$1" create --dry-run=server -o json -f - <<'EOF' | grep -q '"istio-proxy"'
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
 "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:e2e"}]}}
EOF
}

scenario16() {
  local dir="$E2E_STATE/scenario16" ns label pod got
  label="sexton-e2e-vendor-$$=true"
  ns=$(fresh_ns net-vendor sexton.dev/inject=enabled "$label")
  dead_webhook 16 "$dir/webhook"
  start_vendor istio "$dir/istio" "$label" --sidecar-args
  net_controller 16 "$ns" "$dir/controller.log"
  # the stand-in is called once the API server has read its configuration: a dry run shows it
  wait_until 30 istio_called "$ns" \
    || fail "16: the API server did not call the stand-in of Istio's injector; its log: $(cat "$dir/istio/vendor.log")"
  kubectl -n "$ns" create -f "$M/job-net-vendor.yaml" >/dev/null || fail "16: cannot create the Job"
  kubectl -n "$ns" wait --for=condition=Complete job/net-istio --timeout=120s >/dev/null \
    || fail "16: net-istio not Complete: $(all_states "$ns" net-istio); controller log: $(tail -20 "$dir/controller.log"); istio: $(tail -5 "$dir/istio/vendor.log")"
  pod=$(job_pod "$ns" net-istio)
  got=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.status.phase} {.metadata.annotations.sexton\.dev/injected}')
  [ "$got" = "Succeeded " ] || fail "16: pod '$got', want Succeeded and not injected"
  got=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.annotations.sidecar\.istio\.io/status}')
  [[ "$got" == *istio-proxy* ]] || fail "16: the stand-in of Istio's injector did not inject the pod: '$got'"
  got=$(sidecar_end "$ns" "$pod" istio-proxy | cut -d' ' -f1-3)
  [ "$got" = "docker.io/library/sexton-quick-exit:e2e 0 1" ] || fail "16: istio-proxy's end: '$got', want the quick-exit image, exit 0, 1 restart"
  got=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.annotations.sexton\.dev/safety-net}')
  [ "$got" = '{"cause":"NotInjected","sidecars":["istio-proxy"]}' ] || fail "16: the net's record is '$got'"
  stop_controllers
  stop_vendor
  stop_webhook
  pass "16: Istio's proxy added by its injector's stand-in, sexton's webhook not answering, nothing declared: the safety net recognised and swapped it (exit 0), Job Complete"
}
