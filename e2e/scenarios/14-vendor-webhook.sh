# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 14, vendor-webhook (e2e/run.sh vendor-webhook; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   A sidecar another vendor's webhook injects, nothing declared: the stand-in of Vault's
#   injector (testenv/vendor-webhook) registered as Vault's own configuration
#   (vault-agent-injector-cfg, which the API server calls after sexton's) adds a busybox
#   vault-agent that serves Vault's quit endpoint; scenario 10's webhook ends it at its
#   second call: auto (native), wrap, and quit (the mains' supervisor POSTs
#   :8200/agent/v1/quit, turned on by vault.hashicorp.com/agent-enable-quit): each Job
#   Complete, vault-agent ended with 0.

# Whether a dry-run Pod asking Vault's injector for its agent comes back with it, in NS.
vault_called() {
  kubectl -n "$1" create --dry-run=server -o json -f - <<'EOF' | grep -q '"vault-agent-init"'
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "probe", "annotations": {"vault.hashicorp.com/agent-inject": "true"}},
 "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:e2e"}]}}
EOF
}
# A container's exit code in a pod, init containers included (native sidecars).
exit_of() { # ns pod container
  kubectl -n "$1" get pod "$2" -o json | python3 -c '
import json, sys
pod, name = json.load(sys.stdin), sys.argv[1]
for s in pod["status"].get("initContainerStatuses", []) + pod["status"].get("containerStatuses", []):
    if s["name"] == name:
        print((s.get("state", {}).get("terminated") or {}).get("exitCode", "running"))' "$3"
}

scenario14() {
  local dir="$E2E_STATE/scenario14" ns label s job pod got want
  label="sexton-e2e-vendor-$$=true"
  ns=$(fresh_ns vendor sexton.dev/inject=enabled "$label")
  start_webhook 14 "$dir/webhook" "$ns"
  start_vendor vault "$dir/vault" "$label"
  # the stand-in is called once the API server has read its configuration: a dry run shows it
  wait_until 30 vault_called "$ns" \
    || fail "14: the API server did not call the stand-in of Vault's injector; its log: $(cat "$dir/vault/vendor.log")"
  for s in auto wrap quit; do
    sed -e "s/STRATEGY/$s/g" -e '/sexton.dev\/inject: auto$/d' "$M/job-vendor.yaml" \
      | if [ "$s" = quit ]; then sed 's/^\(        vault.hashicorp.com\/role: app\)$/\1\n        vault.hashicorp.com\/agent-enable-quit: "true"/'; else cat; fi \
      | kubectl -n "$ns" create -f - >/dev/null || fail "14: cannot create the $s Job"
  done
  for s in auto wrap quit; do
    job="vendor-$s"
    kubectl -n "$ns" wait --for=condition=Complete "job/$job" --timeout=120s >/dev/null \
      || fail "14: $job not Complete: $(all_states "$ns" "$job"); webhook log $WEBHOOK_LOG"
    pod=$(job_pod "$ns" "$job")
    got=$(exit_of "$ns" "$pod" vault-agent)
    [ "$got" = 0 ] || fail "14: $job: vault-agent's exit: $got, want 0"
    want=native; [ "$s" = auto ] || want=$s
    got=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.annotations.sexton\.dev/injected}')
    [[ "$got" == *"\"mechanism\":\"$want\""* && "$got" == *'"sidecars":["vault-agent"]'* ]] \
      || fail "14: $job: sexton.dev/injected is '$got', want mechanism $want and sidecar vault-agent"
  done
  got=$(kubectl -n "$ns" logs "$(job_pod "$ns" vendor-quit)" -c vault-agent 2>&1)
  [[ "$got" == *"quit-server: POST /agent/v1/quit"* ]] || fail "14: vendor-quit: vault-agent was not told to quit: $got"
  stop_vendor
  stop_webhook
  pass "14: Vault's agent added after sexton's webhook, nothing declared: native, wrap and quit (its quit endpoint POSTed by the main's supervisor) each Complete, vault-agent ended with 0"
}
