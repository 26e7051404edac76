# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 7, inject (e2e/run.sh inject; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   `kubectl-sexton inject`: a Job whose marked sidecar sits in spec.containers, injected
#   native, native-wrap and wrap, the last two with the supervisor copied and from an image
#   volume: main 0 -> Job Complete, main 1 -> Job Failed, the sidecar ended in all. And wrap with the entrypoints read from a registry: neither
#   container sets `command`; the image (ENTRYPOINT ["/bin/sh", "-c"]) is in the anonymous
#   loopback registry of scripts/registry.sh (brought up if needed, and then stopped at the
#   end) and imported into the node under the same reference.

scenario7() {
  local ns v s src job want; ns=$(fresh_ns inject)
  # VARIANT:STRATEGY:BINARY-SOURCE (auto, with no facts given, copies the binary)
  local variants="native:native:auto native-wrap:native-wrap:auto wrap:wrap:auto native-wrap-iv:native-wrap:image-volume wrap-iv:wrap:image-volume"
  for v in $variants; do
    IFS=: read -r v s src <<<"$v"
    for c in 0 1; do
      sed -e "s/MAIN_CODE/$c/g" -e "s/STRATEGY/$v/g" "$M/job-inject.yaml" \
        | "$CTL_BIN" inject --strategy "$s" --binary-source "$src" --sexton-image sexton:e2e -f - 2>/dev/null \
        | kubectl -n "$ns" apply -f - >/dev/null || fail "7: inject $v failed"
    done
  done
  for v in $variants; do
    for c in 0 1; do
      job="inject-${v%%:*}-$c"
      if [ "$c" = 0 ]; then want=Complete; else want=Failed; fi
      kubectl -n "$ns" wait --for=condition=$want "job/$job" --timeout=120s >/dev/null \
        || fail "7: $job not $want: $(all_states "$ns" "$job")"
    done
  done
  [ "$(all_states "$ns" inject-native-0)" = "Succeeded proxy=0 main=0" ] || fail "7: native-0: $(all_states "$ns" inject-native-0)"
  [ "$(all_states "$ns" inject-native-1)" = "Failed proxy=0 main=1" ] || fail "7: native-1: $(all_states "$ns" inject-native-1)"
  [ "$(all_states "$ns" inject-wrap-0)" = "Succeeded sexton-install=0 main=0 proxy=0" ] || fail "7: wrap-0: $(all_states "$ns" inject-wrap-0)"
  [ "$(all_states "$ns" inject-wrap-1)" = "Failed sexton-install=0 main=1 proxy=0" ] || fail "7: wrap-1: $(all_states "$ns" inject-wrap-1)"
  [ "$(all_states "$ns" inject-native-wrap-0)" = "Succeeded sexton-install=0 proxy=0 main=0" ] || fail "7: native-wrap-0: $(all_states "$ns" inject-native-wrap-0)"
  [ "$(all_states "$ns" inject-native-wrap-1)" = "Failed sexton-install=0 proxy=0 main=1" ] || fail "7: native-wrap-1: $(all_states "$ns" inject-native-wrap-1)"
  # the image volume: no init container but the native sidecar, the binary from sexton:e2e
  [ "$(all_states "$ns" inject-wrap-iv-0)" = "Succeeded main=0 proxy=0" ] || fail "7: wrap-iv-0: $(all_states "$ns" inject-wrap-iv-0)"
  [ "$(all_states "$ns" inject-wrap-iv-1)" = "Failed main=1 proxy=0" ] || fail "7: wrap-iv-1: $(all_states "$ns" inject-wrap-iv-1)"
  [ "$(all_states "$ns" inject-native-wrap-iv-0)" = "Succeeded proxy=0 main=0" ] || fail "7: native-wrap-iv-0: $(all_states "$ns" inject-native-wrap-iv-0)"
  [ "$(all_states "$ns" inject-native-wrap-iv-1)" = "Failed proxy=0 main=1" ] || fail "7: native-wrap-iv-1: $(all_states "$ns" inject-native-wrap-iv-1)"
  [ "$(bin_volume "$ns" inject-wrap-iv-0)" = "sexton:e2e init=[]" ] || fail "7: wrap-iv-0's binary: $(bin_volume "$ns" inject-wrap-iv-0)"
  [ "$(bin_volume "$ns" inject-native-wrap-iv-0)" = "sexton:e2e init=[proxy]" ] || fail "7: native-wrap-iv-0's binary: $(bin_volume "$ns" inject-native-wrap-iv-0)"
  [[ "$(bin_volume "$ns" inject-wrap-0)" == '{"sizeLimit":"20Mi"} init=[sexton-install]' ]] || fail "7: wrap-0's binary: $(bin_volume "$ns" inject-wrap-0)"
  pass "7: injected native, native-wrap and wrap, the supervisor copied or from an image volume: main 0 -> Complete, main 1 -> Failed; the sidecar ended with 0 in all ten"
  scenario7_entrypoint "$ns"
}

# Scenario 7's image for wrap without `command`: busybox with ENTRYPOINT ["/bin/sh", "-c"]
# and a CMD that serves until SIGTERM, pushed to the anonymous loopback registry (skopeo) and
# imported into the node's containerd under the very same reference, so that inject reads the
# entrypoint from the registry and the kubelet runs the local copy. The CMD's `$$` must reach
# the shell: wrap doubles the `$` of strings taken from an image, the kubelet halves them.
# Sets ENTRY_IMAGE and REGISTRY (HOST:PORT).
entrypoint_image() {
  if ! "$ROOT/scripts/registry.sh" status >/dev/null 2>&1; then
    REGISTRY_STARTED=1
    "$ROOT/scripts/registry.sh" up >&2
  fi
  eval "$("$ROOT/scripts/registry.sh" env)"
  REGISTRY=$SEXTON_REGISTRY_ANONYMOUS
  ENTRY_IMAGE="$REGISTRY/sexton-e2e/shell:e2e"
  local tar="$E2E_STATE/images/shell.tar" cmd out
  # shellcheck disable=SC2016  # a literal $$, for the shell in the container
  cmd=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \
    'echo "proxy: shell pid $$"; trap '"'echo draining; exit 0'"' TERM; while true; do sleep 1 & wait; done')
  mkdir -p "$E2E_STATE/images"
  python3 "$ROOT/e2e/mkimage.py" "$tar" "$ENTRY_IMAGE" --entrypoint '["/bin/sh", "-c"]' --cmd "$cmd" \
    --symlink /bin/sh=busybox --symlink /bin/sleep=busybox --symlink /bin/echo=busybox /bin/busybox:/bin/busybox
  out=$(timeout 60 skopeo --insecure-policy copy --dest-tls-verify=false "docker-archive:$tar" "docker://$ENTRY_IMAGE" 2>&1) \
    || fail "7: cannot push $ENTRY_IMAGE to the registry: $out"
  out=$(timeout 60 "$CONTAINERD_DIR/ctr" --address "$E2E_STATE/containerd.sock" -n k8s.io images import "$tar" 2>&1) \
    || fail "7: cannot import $ENTRY_IMAGE into the node's containerd: $out"
}

scenario7_entrypoint() {
  local ns=$1 c job want phase got dir="$E2E_STATE/scenario7"
  entrypoint_image
  mkdir -p "$dir"
  for c in 0 1; do
    sed -e "s/MAIN_CODE/$c/g" -e "s#IMAGE#$ENTRY_IMAGE#g" "$M/job-inject-entrypoint.yaml" \
      | timeout 60 "$CTL_BIN" inject --strategy wrap --sexton-image sexton:e2e --insecure-registry "$REGISTRY" -f - \
        >"$dir/$c.yaml" 2>"$dir/$c.err" || fail "7: inject --strategy wrap (entrypoint from $REGISTRY) failed: $(cat "$dir/$c.err")"
    kubectl -n "$ns" apply -f "$dir/$c.yaml" >/dev/null || fail "7: cannot apply the injected inject-entrypoint-$c"
  done
  for c in 0 1; do
    job="inject-entrypoint-$c"
    if [ "$c" = 0 ]; then want=Complete phase=Succeeded; else want=Failed phase=Failed; fi
    kubectl -n "$ns" wait --for=condition=$want "job/$job" --timeout=120s >/dev/null \
      || fail "7: $job not $want: $(all_states "$ns" "$job")"
    got=$(all_states "$ns" "$job")
    [ "$got" = "$phase sexton-install=0 main=$c proxy=0" ] || fail "7: $job: $got"
    # main's process: sexton, then the image's ENTRYPOINT (read from the registry) as
    # `command`; main's own `args` kept, which Kubernetes appends
    got=$(kubectl -n "$ns" get job "$job" -o jsonpath='{.spec.template.spec.containers[?(@.name=="main")].command} {.spec.template.spec.containers[?(@.name=="main")].args}')
    [ "$got" = "[\"/sexton/sexton\",\"--\",\"/bin/sh\",\"-c\"] [\"sleep 2; exit $c\"]" ] \
      || fail "7: $job: main's injected command and args are $got, not sexton and the image's entrypoint with main's args"
    # the proxy's: ENTRYPOINT + CMD, whose $$ reached the shell (a `$` would be printed otherwise)
    got=$(kubectl -n "$ns" logs "job/$job" -c proxy --request-timeout=20s 2>&1) \
      || fail "7: kubectl logs of $job's proxy: $got"
    grep -Eq '^proxy: shell pid [0-9]+$' <<<"$got" \
      || fail "7: $job: the proxy did not run the image's CMD with its \$\$ intact: $got"
  done
  pass "7: wrap with the entrypoint read from $REGISTRY (no command in the pod; the kubelet ran the imported image): main 0 -> Complete, main 1 -> Failed; the sidecar (the image's CMD) ended with 0"
}
