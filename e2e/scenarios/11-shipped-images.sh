# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 11, shipped-images (e2e/run.sh shipped-images; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   The SidecarTerminator run by the node from the shipped kubectl-sexton image (as UID
#   65532, its ServiceAccount, a Role of its rules): scenario 3's Job Complete, the sidecar
#   swapped to the shipped quick-exit image; both pods' imageIDs are the digests of
#   target/images (scripts/images.sh), which the node imported.

scenario11() {
  local ns got want ctl qe; ns=$(fresh_ns controller-image)
  ctl=$(image_digest kubectl-sexton) qe=$(image_digest sexton-quick-exit)
  sed -e "s/NAMESPACE/$ns/g" -e "s/API_PORT/$API_PORT/g" "$M/controller-image.yaml" | kubectl -n "$ns" apply -f - >/dev/null
  kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Running pod/controller --timeout=60s >/dev/null \
    || fail "11: the controller pod is not Running: $(kubectl -n "$ns" get pod controller -o jsonpath='{.status}')"
  got=$(kubectl -n "$ns" get pod controller -o jsonpath='{.status.containerStatuses[0].imageID}')
  [[ "$got" == *"@$ctl" ]] || fail "11: the controller runs $got, not the built kubectl-sexton $ctl"
  kubectl -n "$ns" apply -f "$M/job-terminator.yaml" >/dev/null
  kubectl -n "$ns" wait --for=condition=Complete job/terminated --timeout=120s >/dev/null \
    || fail "11: Job not Complete: $(states "$ns" terminated); controller log: $(kubectl -n "$ns" logs controller --request-timeout=20s 2>&1 | tail -20)"
  got=$(kubectl -n "$ns" get pods -l job-name=terminated \
    -o jsonpath='{.items[0].status.phase}{range .items[0].status.containerStatuses[*]} {.name}:{.image}:{.state.terminated.exitCode}:{.restartCount}{end}')
  want="Succeeded main:docker.io/library/busybox:e2e:0:0 proxy:docker.io/library/sexton-quick-exit:e2e:0:1"
  [ "$got" = "$want" ] || fail "11: '$got', want '$want'"
  got=$(kubectl -n "$ns" get pods -l job-name=terminated -o jsonpath='{.items[0].status.containerStatuses[?(@.name=="proxy")].imageID}')
  [[ "$got" == *"@$qe" ]] || fail "11: the swapped sidecar ran $got, not the built sexton-quick-exit $qe"
  got=$(kubectl -n "$ns" get pod controller -o jsonpath='{.status.phase} {.status.containerStatuses[0].restartCount}')
  [ "$got" = "Running 0" ] || fail "11: the controller pod: $got, want Running 0"
  kubectl -n "$ns" delete pod controller --wait=false >/dev/null
  pass "11: the kubectl-sexton image ($ctl) ran the SidecarTerminator as UID 65532 with its ServiceAccount; the sidecar swapped to the sexton-quick-exit image ($qe), Job Complete"
}

# image_digest NAME: the digest of NAME:VERSION in its OCI layout (target/images/NAME),
# which scripts/e2e-cluster.sh imported into the node.
image_digest() {
  local dir tag digest
  while read -r dir tag _ digest; do
    if [ "$(basename "$dir")" = "$1" ] && [[ $tag != *-slim ]]; then echo "$digest"; return 0; fi
  done < <("$ROOT/scripts/images.sh" refs)
  fail "no image $1 in scripts/images.sh refs"
}
