# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 13, empty-image-volume (e2e/run.sh empty-image-volume; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   An image volume that the runtime mounts without the binary (as k3s's containerd mounted
#   them empty): the Job fails, and doctor names the empty image volume and the fix.

# Scenario 13: the pitfall of runtimes that mount an image volume empty without an error
# (k3s's bundled containerd): the wrapped pod's binary volume is an image without /sexton
# (busybox:e2e, as the node's runtime mounts it: really missing, as on such a node). The
# Job fails (it would not have succeeded: main never ran), its containers with the runtime's
# bare "no such file", and the doctor names the cause and the fix.
scenario13() {
  local ns dir="$E2E_STATE/scenario13" out got
  ns=$(fresh_ns empty-volume); mkdir -p "$dir"
  sed -e "s/MAIN_CODE/0/g" -e "s/STRATEGY/empty-volume/g" "$M/job-inject.yaml" \
    | "$CTL_BIN" inject --strategy wrap --binary-source image-volume --sexton-image busybox:e2e -f - 2>/dev/null \
    | kubectl -n "$ns" apply -f - >/dev/null || fail "13: inject failed"
  kubectl -n "$ns" wait --for=condition=Failed job/inject-empty-volume-0 --timeout=120s >/dev/null \
    || fail "13: the Job did not fail: $(kubectl -n "$ns" get pods -o jsonpath='{.items[0].status}')"
  got=$(kubectl -n "$ns" get pods -l job-name=inject-empty-volume-0 -o jsonpath='{.items[0].status.containerStatuses[?(@.name=="main")].state.terminated.message}')
  [[ "$got" == *"/sexton/sexton"*"no such file"* ]] || fail "13: main's message: '$got', want the runtime's no such file"
  out=$("$CTL_BIN" doctor -n "$ns" -o json --kubeconfig "$KUBECONFIG" 2>"$dir/doctor.err") && fail "13: doctor found nothing: $out"
  got=$(python3 -c '
import json, sys
r = json.load(sys.stdin)
c = [c for c in r["checks"] if c["name"] == "image-volumes"][0]
f = [f for f in c["findings"] if f["object"].startswith("pod ")]
print(" | ".join("%s %s: %s; fix: %s" % (x["status"], x["object"], x["message"], x["fix"]) for x in f))' <<<"$out")
  for want in "error pod $ns/" "missing from image volume sexton-bin (busybox:e2e)" "mounts image volumes empty without an error" \
    "k3s-io/k3s#14323" "--binary-source copy"; do
    [[ "$got" == *"$want"* ]] || fail "13: the doctor's finding lacks '$want': $got"
  done
  pass "13: an image volume without the binary: the Job Failed, the runtime said no such file, and doctor named the empty image volume, the pitfall and the fix"
}
