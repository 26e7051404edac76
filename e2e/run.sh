#!/usr/bin/env bash
# End-to-end scenarios on the real node of scripts/e2e-cluster.sh (brought up if needed).
# Every wait is bounded (kubectl wait --timeout, timeout); a failed scenario says why and
# exits 1. The controllers it starts in the background are stopped on any exit.
#   e2e/run.sh            all scenarios
#   e2e/run.sh 1 3        some of them
# 1  Job: main + sexton-wrapped sidecar; main 0 -> Job Complete, main 1 -> Job Failed; the
#    sidecar is stopped and exits 0 in both.
# 2  Birth dependencies: main starts only after the proxy is ready, through the graveyard
#    (sexton's file readiness probe) and through the API (the pod's own ServiceAccount token,
#    mounted by the kubelet; host network to reach the test API server on 127.0.0.1).
# 3  SidecarTerminator: an unwrapped marked sidecar; `kubectl-sexton controller` swaps its image; the
#    kubelet restarts it with the quick-exit image (restartPolicy Never); Job Complete.
# 4  EphemeralJob over three real pods: the ephemeral containers run in the target
#    container's process namespace (they find its process) and the status counts match.
# 5  The kubelet kills main (failing liveness probe): the wrapped sidecar still ends (0),
#    and the Job fails because main did.
# 6  The kubelet's API through the API server: `kubectl logs` returns a container's output
#    and `kubectl exec` runs commands in it, exit codes included.
# 7  `kubectl-sexton inject`: a Job whose marked sidecar sits in spec.containers, injected
#    native, native-wrap and wrap, the last two with the supervisor copied and from an image
#    volume: main 0 -> Job Complete, main 1 -> Job Failed, the sidecar ended in all. And wrap with the entrypoints read from a registry: neither
#    container sets `command`; the image (ENTRYPOINT ["/bin/sh", "-c"]) is in the anonymous
#    loopback registry of scripts/registry.sh (brought up if needed, and then stopped at the
#    end) and imported into the node under the same reference.
# 8  A native sidecar that sexton also ends (an init container with restartPolicy Always whose
#    command runs behind sexton with KUBEXIT_DEATH_DEPS=main): it exits 0 as soon as main has
#    (its log says so), and the kubelet neither restarts it nor counts it; six pods, main 0 ->
#    Succeeded, main 1 -> Failed; restartCount 0 (one pod of the six may show 1: the narrow
#    race in which the kubelet sees the sidecar's exit before main's, see the scenario).
# 9  Every example of examples/ as it is, but for its image names (mapped to the node's: see
#    example()), with the outcome the docs promise: the Jobs of examples/*.yaml applied
#    together in one namespace (Complete; sidecars ended with 0; birth order kept; main's
#    failed first attempt survived by its OnFailure sidecar; the markers' sidecars swapped to
#    the quick-exit image; the API birth dependency's proxy ready first and told to quit),
#    the EphemeralJob over five pods in a namespace that enforces the restricted Pod Security
#    Standard (Succeeded, 5 of 5), and examples/inject/: job.yaml alone never completes (main
#    done, the sidecar still running), job.native.yaml and job.wrap.yaml complete.
# 10 `kubectl-sexton webhook` (the release binary) on this machine, over TLS with an
#    openssl-made certificate for 127.0.0.1, registered by URL (https://127.0.0.1:PORT/mutate)
#    with its CA as caBundle: in a namespace labelled sexton.dev/inject=enabled, Jobs whose
#    sidecar sits in spec.containers (named by the template's annotation sexton.dev/sidecars)
#    are injected at pod creation, auto (native here) and wrap (the template's annotation):
#    main 0 -> Job Complete, main 1 -> Job Failed, the sidecar ended with 0; in an unlabelled
#    namespace the webhook admits the pod unchanged (its spec is the template's) and its
#    sidecar runs on. The configuration is deleted and the webhook stopped on any exit.
# 11 The SidecarTerminator run by the node from the shipped kubectl-sexton image (as UID
#    65532, its ServiceAccount, a Role of its rules): scenario 3's Job Complete, the sidecar
#    swapped to the shipped quick-exit image; both pods' imageIDs are the digests of
#    target/images (scripts/images.sh), which the node imported.
# 12 The sidecar contract (docs/strategies.md, "The sidecar contract"): one declaration per case
#    (e2e/manifests/contract.yaml), injected native, wrap and native-wrap, all run at once:
#    deletion (a running pod deleted while its main drains 3 s through its proxy: no failed
#    request, the sidecar ends with 0, the pod Succeeded), two-mains (1 s and 5 s), on-failure
#    (one failed attempt), crash (the proxy crashes once and is back), startup (the main
#    starts once the proxy's startupProbe passed), two-sidecars (proxy stops before logs).
#    The three strategies give the same outcome.
# 13 An image volume that the runtime mounts without the binary (as k3s's containerd mounted
#    them empty): the Job fails, and doctor names the empty image volume and the fix.
# 14 A sidecar another vendor's webhook injects, nothing declared: the stand-in of Vault's
#    injector (testenv/vendor-webhook) registered as Vault's own configuration
#    (vault-agent-injector-cfg, which the API server calls after sexton's) adds a busybox
#    vault-agent that serves Vault's quit endpoint; scenario 10's webhook ends it at its
#    second call: auto (native), wrap, and quit (the mains' supervisor POSTs
#    :8200/agent/v1/quit, turned on by vault.hashicorp.com/agent-enable-quit): each Job
#    Complete, vault-agent ended with 0.
# 15 The safety net: sexton's webhook configuration registered (scenario 10's) for a port
#    nobody listens on, as when the webhook is scaled to zero: a Job declaring two sidecars
#    (sexton.dev/sidecars) is admitted unchanged, and `kubectl-sexton controller` (the safety
#    net alone) swaps proxy, then logs, to the quick-exit image once main ended: main 0 ->
#    Job Complete (pod Succeeded), main 1 -> Job Failed, both sidecars ended with 0 in reverse
#    order; the pod records the cause (NotInjected) and the Job has the Event
#    SidecarsEndedBySafetyNet.
# 16 The safety net and a vendor's sidecar: with sexton's webhook not answering (as in 15),
#    the stand-in of Istio's injector adds istio-proxy (args only, as Istio's: a busybox that
#    answers its probes) to a Job that declares nothing; the net recognises it by Istio's
#    marker and swaps it once main ended: Job Complete, istio-proxy ended with 0.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../scripts/lib.sh"
lib_init e2e "$E2E_STATE"
eval "$("$ROOT/scripts/e2e-cluster.sh" up)"
export KUBECONFIG
M="$ROOT/e2e/manifests"
# the shipped linux/amd64 binary (scripts/images.sh, run by scripts/test.sh before this)
CTL_BIN="$ROOT/target/images/bin/linux-amd64/kubectl-sexton"
[ -x "$CTL_BIN" ] || die "$CTL_BIN is missing: run scripts/images.sh first"
kubectl apply --server-side -f "$ROOT/deploy/crd-ephemeraljob.yaml" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/ephemeraljobs.sexton.dev >/dev/null
# The requester policy of deploy/ (the controller acts on a job's requester stamp only where a
# change of it is refused), bound to the e2e namespaces alone: the control plane is the
# cargo tests' too, whose namespaces bind it themselves or test its absence.
awk '/^---$/ {exit} {print}' "$ROOT/deploy/ephemeraljob-requester.yaml" | kubectl apply --server-side -f - >/dev/null
kubectl apply --server-side -f - >/dev/null <<'EOF'
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: sexton-e2e-ephemeraljob-requester}
spec:
  policyName: sexton-ephemeraljob-requester
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {sexton-e2e: "true"}}}
EOF

fail() { echo "e2e: FAIL: $*" >&2; exit 1; }
pass() { echo "e2e: ok: $*"; }
# fresh_ns NAME [LABEL=VALUE...]: a namespace created with its labels in one request (the
# API server's admission plugins read namespaces from a cache: a label added by a second
# request can reach it after the scenario's first pod). sexton-e2e=true: removed by
# e2e-cluster.sh down.
fresh_ns() {
  local ns="e2e-$1-$$"; shift
  kubectl create namespace "$ns" --dry-run=client -o json \
    | kubectl label --local -f - sexton-e2e=true "$@" -o json | kubectl create -f - >/dev/null
  echo "$ns"
}
states() {
  kubectl -n "$1" get pods -l "job-name=$2" \
    -o jsonpath='{range .items[*]}{.status.phase}{range .status.containerStatuses[*]} {.name}={.state.terminated.exitCode}{end}{end}'
}

# The controllers started in the background: stopped (SIGTERM, SIGKILL after 10 s) and
# reaped when a scenario is done, and on any exit of this script, failures and
# interruptions included, so none outlives the run.
CTL_PIDS=()
# stamped FILE: the EphemeralJob manifest FILE with the annotation sexton.dev/requester
# naming kubectl's own user, as the webhook would write it (README "Security model"): the
# controller acts only for a stamped requester, and no webhook stamps here.
stamped() {
  local stamp
  stamp=$(kubectl auth whoami -o json | jq -r '.status.userInfo
    | (["user=" + .username] + (if (.uid // "") != "" then ["uid=" + .uid] else [] end)
       + [(.groups // [])[] | "group=" + .]
       + [(.extra // {}) | to_entries[] | .key as $k | .value[] | "extra=" + $k + "=" + .])
    | join("\n")') || fail "cannot read kubectl's user (kubectl auth whoami)"
  kubectl annotate --local -f "$1" -o json "sexton.dev/requester=$stamp"
}
# The requester policy's binding takes effect once the API server's policy cache has it:
# wait for a forged stamp to be refused, so that no scenario's controller, finding a change
# of its job's stamp accepted, refuses the job (RequesterUnprotected).
policy_ns=$(fresh_ns policy)
for _ in $(seq 60); do
  got=$(kubectl annotate --local -f "$M/ejob-sees-target.yaml" -o json sexton.dev/requester=user=nobody \
    | kubectl -n "$policy_ns" create --dry-run=server -f - 2>&1) && got=accepted
  case $got in *sexton-ephemeraljob-requester*) break ;; esac
  sleep 0.5
done
case $got in *sexton-ephemeraljob-requester*) ;; *) fail "the requester policy is not in force after 30 s: $got" ;; esac

controller() { # ns log args...
  local ns=$1 log=$2; shift 2
  "$CTL_BIN" controller --namespace "$ns" --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 "$@" 2> "$log" &
  CTL_PIDS+=($!)
}
stop_controllers() {
  local p
  for p in "${CTL_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${CTL_PIDS[@]}"; do
    wait_until 10 not running "$p" || kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  CTL_PIDS=()
}
# Scenario 10's webhook: its MutatingWebhookConfiguration deleted first (the API server
# stops calling it), then the process stopped (SIGTERM; it answers for 5 s more, then exits;
# SIGKILL after 15 s) and reaped; on any exit of this script too.
WEBHOOK_PID="" WEBHOOK_CONFIG="" VENDOR_PID="" VENDOR_CONFIG=""
stop_webhook() {
  if [ -n "$WEBHOOK_CONFIG" ]; then
    kubectl delete mutatingwebhookconfiguration "$WEBHOOK_CONFIG" --ignore-not-found --request-timeout=20s >/dev/null 2>&1 \
      || echo "e2e: warning: could not delete the MutatingWebhookConfiguration $WEBHOOK_CONFIG" >&2
    WEBHOOK_CONFIG=""
  fi
  if [ -n "$WEBHOOK_PID" ]; then
    kill "$WEBHOOK_PID" 2>/dev/null || true
    wait_until 15 not running "$WEBHOOK_PID" || kill -9 "$WEBHOOK_PID" 2>/dev/null || true
    wait "$WEBHOOK_PID" 2>/dev/null || true
    WEBHOOK_PID=""
  fi
}
# The loopback registry (scenario 7) is stopped at the end only if this run started it,
# as scripts/test.sh does.
REGISTRY_STARTED=0
cleanup() {
  stop_controllers
  stop_webhook
  stop_vendor
  if [ "$REGISTRY_STARTED" = 1 ]; then "$ROOT/scripts/registry.sh" down || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

scenario1() {
  local ns; ns=$(fresh_ns wrapped)
  for c in 0 1; do sed "s/MAIN_CODE/$c/g" "$M/job-wrapped.yaml" | kubectl -n "$ns" apply -f - >/dev/null; done
  kubectl -n "$ns" wait --for=condition=Complete job/wrapped-0 --timeout=120s >/dev/null \
    || fail "1: wrapped-0 not Complete: $(states "$ns" wrapped-0)"
  kubectl -n "$ns" wait --for=condition=Failed job/wrapped-1 --timeout=120s >/dev/null \
    || fail "1: wrapped-1 not Failed: $(states "$ns" wrapped-1)"
  [ "$(states "$ns" wrapped-0)" = "Succeeded main=0 proxy=0" ] || fail "1: wrapped-0: $(states "$ns" wrapped-0)"
  [ "$(states "$ns" wrapped-1)" = "Failed main=1 proxy=0" ] || fail "1: wrapped-1: $(states "$ns" wrapped-1)"
  pass "1: main 0 -> Complete, main 1 -> Failed; the sidecar stopped with 0 in both"
}

scenario2() {
  local ns; ns=$(fresh_ns birth)
  kubectl -n "$ns" apply -f "$M/job-birth-graveyard.yaml" >/dev/null
  sed "s/API_PORT/$API_PORT/g" "$M/job-birth-api.yaml" | kubectl -n "$ns" apply -f - >/dev/null
  for j in birth-graveyard birth-api; do
    kubectl -n "$ns" wait --for=condition=Complete "job/$j" --timeout=120s >/dev/null \
      || fail "2: $j not Complete: $(states "$ns" "$j")"
    [ "$(states "$ns" "$j")" = "Succeeded main=0 proxy=0" ] || fail "2: $j: $(states "$ns" "$j")"
  done
  pass "2: main started after the proxy was ready (graveyard and API variants), Jobs Complete"
}

scenario5() {
  local ns; ns=$(fresh_ns liveness)
  kubectl -n "$ns" apply -f "$M/job-liveness.yaml" >/dev/null
  kubectl -n "$ns" wait --for=condition=Failed job/liveness --timeout=120s >/dev/null \
    || fail "5: Job not Failed: $(states "$ns" liveness)"
  [ "$(states "$ns" liveness)" = "Failed main=143 proxy=0" ] || fail "5: $(states "$ns" liveness)"
  pass "5: main killed by the kubelet (143); the sidecar ended with 0; Job Failed"
}

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

# the pod's containers and init containers: phase name=exit ...
all_states() {
  kubectl -n "$1" get pods -l "job-name=$2" \
    -o jsonpath='{range .items[*]}{.status.phase}{range .status.initContainerStatuses[*]} {.name}={.state.terminated.exitCode}{end}{range .status.containerStatuses[*]} {.name}={.state.terminated.exitCode}{end}{end}'
}

# bin_volume NS JOB: the Job's pod's volume sexton-bin ("image REF", "emptyDir") and its init
# containers' names.
bin_volume() {
  kubectl -n "$1" get pods -l "job-name=$2" \
    -o jsonpath='{range .items[0].spec.volumes[?(@.name=="sexton-bin")]}{.image.reference}{.emptyDir}{end} init=[{.items[0].spec.initContainers[*].name}]'
}

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

# the pod's init and regular containers: phase name=exit/restarts ... (the kubelet lists
# each kind's statuses in the order of their names)
restart_states() {
  kubectl -n "$1" get pods -l "job-name=$2" \
    -o jsonpath='{range .items[*]}{.status.phase}{range .status.initContainerStatuses[*]} {.name}={.state.terminated.exitCode}/{.restartCount}{end}{range .status.containerStatuses[*]} {.name}={.state.terminated.exitCode}/{.restartCount}{end}{end}'
}

# Why the kubelet leaves the ended native sidecar alone (Kubernetes 1.34, pkg/kubelet): the
# first sync that sees both exits computes the phase first; getPhase ignores terminated
# restartable init containers, so main's exit alone makes it Succeeded or Failed, and
# SyncPod returns as terminal before computePodActions (which restarts any exited restartable
# init container while a main runs) is reached. The race: main's sexton writes its Died
# tombstone a moment before its container exits, and containerd learns of the two exits from
# two shims; a relist that sees the sidecar gone and main still running restarts the sidecar
# once, the new sexton finds main dead and exits 0 without starting its child, and the pod
# still ends as main did. One such pod of the six is allowed; a kubelet that restarts ended
# native sidecars as a rule shows it in all six. (Tried: a 2 s shutdown hook on main keeps
# its container up after its tombstone, the sidecar is restarted in all six, and this fails.)
scenario8() {
  local ns r c job want phase got raced=(); ns=$(fresh_ns native-wrapped)
  for r in 1 2 3; do
    for c in 0 1; do
      sed -e "s/native-wrapped-RUN-/native-wrapped-$r-/" -e "s/MAIN_CODE/$c/g" "$M/job-native-wrapped.yaml" \
        | kubectl -n "$ns" apply -f - >/dev/null
    done
  done
  for r in 1 2 3; do
    for c in 0 1; do
      job="native-wrapped-$r-$c"
      if [ "$c" = 0 ]; then want=Complete phase=Succeeded; else want=Failed phase=Failed; fi
      kubectl -n "$ns" wait --for=condition=$want "job/$job" --timeout=120s >/dev/null \
        || fail "8: $job not $want: $(restart_states "$ns" "$job")"
      got=$(restart_states "$ns" "$job")
      case "$got" in
        "$phase install-sexton=0/0 proxy=0/0 main=$c/0") ;;
        "$phase install-sexton=0/0 proxy=0/1 main=$c/0") raced+=("$job") ;;
        *) fail "8: $job: '$got', want '$phase install-sexton=0/0 proxy=0/0 main=$c/0'" ;;
      esac
      # sexton ended the sidecar (not the kubelet): its death dependency's death is in its log
      got=$(kubectl -n "$ns" logs "job/$job" -c proxy --request-timeout=20s 2>&1) \
        || fail "8: kubectl logs of $job's proxy: $got"
      [[ "$got" == *'death dependency "main" died'* ]] || fail "8: $job: the proxy's log does not say that main died: $got"
    done
  done
  [ ${#raced[@]} -le 1 ] || fail "8: the kubelet restarted the ended native sidecar in ${raced[*]} (restartCount 1): it restarts a native sidecar that ended after main, or saw it end before main"
  pass "8: native sidecars ended by sexton: main 0 -> Succeeded, main 1 -> Failed (3 pods each), sidecar exit 0, restartCount 0${raced[*]:+ (1 in ${raced[*]}: the race)}"
}

# Scenario 9 runs the examples as users find them. Only their image names change, to the
# images scripts/e2e-cluster.sh imported into the node: the tag e2e gets the default pull
# policy IfNotPresent, and containerd files busybox:e2e as docker.io/library/busybox:e2e.
EXAMPLE_IMAGES=(busybox:1.36=busybox:e2e ghcr.io/sexton-dev/sexton:0.1.0=sexton:e2e ghcr.io/sexton-dev/sexton-quick-exit:0.1.0=sexton-quick-exit:e2e)

# node_ref IMAGE: the reference under which containerd files IMAGE (as the kubelet names it).
node_ref() {
  local r=$1 host=${1%%/*}
  if [[ $r != */* ]]; then
    r="docker.io/library/$r"
  elif [[ $host != *.* && $host != *:* && $host != localhost ]]; then
    r="docker.io/$r"
  fi
  [[ ${r##*/} == *[:@]* ]] || r="$r:latest"
  echo "$r"
}

# Reads the JSON of manifests: what `kubectl create --dry-run=client -o json` prints, one
# object after the other for a file of several documents. `images`: every image they name, a
# container's or a SidecarTerminator marker's, one a line. `api PORT`: the objects as one
# List, changed where the node needs it (below).
EXAMPLE_PY='
import json, sys
text, dec, pos, items = sys.stdin.read(), json.JSONDecoder(), 0, []
while True:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos == len(text):
        break
    o, pos = dec.raw_decode(text, pos)
    items += o["items"] if o.get("kind") == "List" else [o]
for o in items:
    # the namespace of the kubeconfig, which the client dry run fills in: the examples name
    # none, and go where the scenario creates them
    o.get("metadata", {}).pop("namespace", None)
doc = {"apiVersion": "v1", "kind": "List", "items": items}
def walk(v):
    if isinstance(v, dict):
        if isinstance(v.get("image"), str):
            yield v["image"]
        if str(v.get("name", "")).endswith("_WITH_IMAGE") and isinstance(v.get("value"), str):
            yield v["value"]
        for x in v.values():
            yield from walk(x)
    elif isinstance(v, list):
        for x in v:
            yield from walk(x)
if sys.argv[1] == "images":
    print("\n".join(sorted(set(walk(items)))))
    sys.exit(0)
for o in items:
    spec = o.get("spec", {}).get("template", {}).get("spec")
    if not isinstance(spec, dict):
        continue
    api = [c for c in spec.get("containers", []) if any(e.get("name") == "KUBEXIT_POD_NAME" for e in c.get("env", []))]
    if api:
        spec["hostNetwork"] = True
        for c in api:
            c["env"] += [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                         {"name": "KUBERNETES_SERVICE_PORT", "value": sys.argv[2]}]
json.dump(doc, sys.stdout)
'

# example FILE: FILE as JSON with its image names mapped (EXAMPLE_IMAGES); fails naming any
# image it would use that is not on the node. One more change, for this node only: it has
# no Service network (no kube-proxy; the API server listens on 127.0.0.1), so a pod whose
# sexton reads the API (KUBEXIT_POD_NAME) gets the host network and the API server's address,
# as scenario 2's does.
example() {
  local f=$1 m from sedargs=() json img have
  for m in "${EXAMPLE_IMAGES[@]}"; do
    from=${m%%=*}
    sedargs+=(-e "s#([[:space:]\"'])${from//./\\.}([[:space:]\"',#]|\$)#\\1${m#*=}\\2#g")
  done
  json=$(sed -E "${sedargs[@]}" "$f" | kubectl create --dry-run=client -o json -f -) \
    || fail "9: kubectl cannot read $f"
  have=$(timeout 30 "$CONTAINERD_DIR/ctr" --address "$E2E_STATE/containerd.sock" -n k8s.io images ls -q) \
    || fail "9: cannot list the node's images"
  for img in $(python3 -c "$EXAMPLE_PY" images <<<"$json"); do
    grep -qxF "$(node_ref "$img")" <<<"$have" \
      || fail "9: $f uses image $img, which the node does not have: map it in EXAMPLE_IMAGES to an image scripts/e2e-cluster.sh imports that has the commands the example runs"
  done
  python3 -c "$EXAMPLE_PY" api "$API_PORT" <<<"$json"
}

# wait_job NS JOB CONDITION: the Job reaches CONDITION (Complete, Failed) within 120 s.
wait_job() {
  kubectl -n "$1" wait --for=condition="$3" "job/$2" --timeout=120s >/dev/null \
    || fail "9: job $2 not $3: $(restart_states "$1" "$2")"
}

# log_has NS JOB CONTAINER TEXT: the container's log (sexton's lines included) contains TEXT.
log_has() {
  local got
  got=$(kubectl -n "$1" logs "job/$2" -c "$3" --request-timeout=20s 2>&1) || fail "9: kubectl logs of $2's $3: $got"
  [[ "$got" == *"$4"* ]] || fail "9: $2: $3's log does not say '$4': $got"
}

scenario9() {
  local ns log f p got want dir="$E2E_STATE/scenario9" rns rlog
  ns=$(fresh_ns examples); log="/tmp/e2e-controller-$ns.log"
  rm -rf "$dir"; mkdir -p "$dir"
  # examples/rbac-birth-deps.yaml's proxy listens on 15020 and 15021: here on the host's network
  for p in 15020 15021; do
    ! port_in_use "$p" || fail "9: port $p on this machine is taken: the proxy of examples/rbac-birth-deps.yaml, on the host network here, needs it"
  done
  for f in "$ROOT"/examples/*.yaml "$ROOT"/examples/inject/*.yaml; do
    example "$f" >"$dir/$(basename "$(dirname "$f")")-$(basename "$f" .yaml).json"
  done
  # The SidecarTerminator, for examples/job-sidecar-terminator.yaml.
  controller "$ns" "$log" --quick-exit-image sexton-quick-exit:e2e --controllers sidecar-terminator
  # examples/ephemeraljob.yaml says its container is admitted under the `restricted` Pod
  # Security Standard: it runs in a namespace that enforces it (the API server checks an
  # ephemeral container when it is added, with the rest of the pod), over five pods labelled
  # app=web whose `app` container runs a process named nginx, restricted themselves. A root
  # pod is refused there, so the namespace really enforces it.
  rns=$(fresh_ns examples-restricted pod-security.kubernetes.io/enforce=restricted)
  rlog="/tmp/e2e-controller-$rns.log"
  if got=$(kubectl -n "$rns" create --dry-run=server -f "$M/pod-echo.yaml" 2>&1); then
    fail "9: namespace $rns admitted a root pod: it does not enforce the restricted Pod Security Standard"
  fi
  [[ "$got" == *'violates PodSecurity "restricted'* ]] || fail "9: a root pod in $rns: $got"
  controller "$rns" "$rlog" --controllers ephemeraljob
  for p in 1 2 3 4 5; do
    sed "s/NAME/web-$p/" "$M/pod-nginx.yaml" | kubectl -n "$rns" apply -f - >/dev/null
  done
  kubectl -n "$rns" wait --for=condition=Ready pod -l app=web --timeout=120s >/dev/null || fail "9: the web pods are not Ready"
  got=$(stamped "$dir/examples-ephemeraljob.json" | kubectl -n "$rns" create -f - 2>&1) || fail "9: cannot create examples-ephemeraljob: $got"
  # the other examples/*.yaml together, in one namespace: `create` fails on a name used twice
  for f in "$dir"/examples-*.json; do
    [ "$f" != "$dir/examples-ephemeraljob.json" ] || continue
    got=$(kubectl -n "$ns" create -f "$f" 2>&1) || fail "9: cannot create $(basename "$f" .json): $got"
  done

  # job-sidecar.yaml: the sidecar stopped by sexton when main is done
  wait_job "$ns" report Complete
  got=$(restart_states "$ns" report)
  [ "$got" = "Succeeded install-sexton=0/0 main=0/0 proxy=0/0" ] || fail "9: job-sidecar.yaml: $got"
  # job-birth-order.yaml, migrate: main started once the proxy's port was open (its fetch
  # would have been refused before), and the proxy was stopped when main exited
  wait_job "$ns" migrate Complete
  got=$(restart_states "$ns" migrate)
  [ "$got" = "Succeeded install-sexton=0/0 db-proxy=0/0 main=0/0" ] || fail "9: job-birth-order.yaml (migrate): $got"
  log_has "$ns" migrate main "proxy: up"
  log_has "$ns" migrate db-proxy 'death dependency "main" died with exit code 0'
  # job-birth-order.yaml, retrying-report: main's first attempt failed, the kubelet restarted
  # it, the log shipper ran on through it (KUBEXIT_DEATH_TRIGGER=success) and stopped after
  # the second attempt's 0
  wait_job "$ns" retrying-report Complete
  got=$(restart_states "$ns" retrying-report)
  [ "$got" = "Succeeded install-sexton=0/0 log-shipper=0/0 main=0/1" ] || fail "9: job-birth-order.yaml (retrying-report): $got"
  log_has "$ns" retrying-report log-shipper "not stopping the child (KUBEXIT_DEATH_TRIGGER=success"
  log_has "$ns" retrying-report log-shipper 'death dependency "main" died with exit code 0'
  # job-sidecar-terminator.yaml: both marked sidecars swapped to the quick-exit image (the
  # controller's default, and the one the marker names) and restarted by the kubelet
  wait_job "$ns" migrate-unwrapped Complete
  got=$(kubectl -n "$ns" get pods -l job-name=migrate-unwrapped \
    -o jsonpath='{.items[0].status.phase}{range .items[0].status.containerStatuses[*]} {.name}:{.image}:{.state.terminated.exitCode}:{.restartCount}{end}')
  want="Succeeded main:docker.io/library/busybox:e2e:0:0 proxy:docker.io/library/sexton-quick-exit:e2e:0:1 sql-proxy:docker.io/library/sexton-quick-exit:e2e:0:1"
  [ "$got" = "$want" ] || fail "9: job-sidecar-terminator.yaml: '$got', want '$want'; controller log $log"
  # rbac-birth-deps.yaml: main started once the unwrapped proxy was ready as the kubelet
  # reported it (read through the API with the example's RBAC), and its shutdown hook told
  # the proxy to quit
  wait_job "$ns" migrate-mesh Complete
  got=$(restart_states "$ns" migrate-mesh)
  [ "$got" = "Succeeded install-sexton=0/0 main=0/0 proxy=0/0" ] || fail "9: rbac-birth-deps.yaml: $got"
  log_has "$ns" migrate-mesh main "migrated through the proxy"
  log_has "$ns" migrate-mesh main "shutdown hook succeeded"
  log_has "$ns" migrate-mesh proxy "told to quit"
  # ephemeraljob.yaml: every web pod checked, two at a time, under the restricted standard
  kubectl -n "$rns" wait --for=jsonpath='{.status.phase}'=Succeeded ejob/check-alive --timeout=120s >/dev/null \
    || fail "9: ephemeraljob.yaml: $(kubectl -n "$rns" get ejob check-alive -o jsonpath='{.status}'); controller log $rlog"
  stop_controllers
  got=$(kubectl -n "$rns" get ejob check-alive -o jsonpath='{.status.match} {.status.succeeded} {.status.failed}')
  [ "$got" = "5 5 0" ] || fail "9: ephemeraljob.yaml: match/succeeded/failed = $got"
  pass "9: examples/*.yaml together: report, migrate, retrying-report (main restarted once), migrate-unwrapped (sidecars swapped), migrate-mesh (API birth dependency, shutdown hook) Complete, sidecars ended with 0; ejob check-alive Succeeded 5/5 in a namespace enforcing the restricted Pod Security Standard"

  # examples/inject/: each form of the Job `report` in a namespace of its own
  local native wrap plain
  native=$(fresh_ns inject-native) wrap=$(fresh_ns inject-wrap) plain=$(fresh_ns inject-none)
  kubectl -n "$native" create -f "$dir/inject-job.native.json" >/dev/null
  kubectl -n "$wrap" create -f "$dir/inject-job.wrap.json" >/dev/null
  kubectl -n "$plain" create -f "$dir/inject-job.json" >/dev/null
  wait_job "$native" report Complete
  got=$(all_states "$native" report)
  [ "$got" = "Succeeded proxy=0 main=0" ] || fail "9: inject/job.native.yaml: $got"
  wait_job "$wrap" report Complete
  got=$(all_states "$wrap" report)
  [ "$got" = "Succeeded sexton-install=0 main=0 proxy=0" ] || fail "9: inject/job.wrap.yaml: $got"
  # job.yaml as it is: main ends, the sidecar runs on, and so does the pod
  kubectl -n "$plain" wait --for=jsonpath='{.status.active}'=1 job/report --timeout=60s >/dev/null \
    || fail "9: inject/job.yaml: no pod"
  kubectl -n "$plain" wait --for=jsonpath='{.status.containerStatuses[?(@.name=="main")].state.terminated.exitCode}'=0 \
    pod -l job-name=report --timeout=60s >/dev/null || fail "9: inject/job.yaml: main did not end with 0: $(all_states "$plain" report)"
  got=$(kubectl -n "$plain" get pods -l job-name=report \
    -o jsonpath='{.items[0].status.phase} {.items[0].status.containerStatuses[?(@.name=="proxy")].state.running.startedAt}')
  [[ "$got" == "Running "?* ]] || fail "9: inject/job.yaml: after main's exit: $got, want the pod Running and its proxy running"
  [ -z "$(kubectl -n "$plain" get job report -o jsonpath='{.status.conditions[?(@.status=="True")].type}')" ] \
    || fail "9: inject/job.yaml: the Job ended without sexton"
  kubectl delete namespace "$plain" --wait=false >/dev/null
  pass "9: examples/inject/: job.native.yaml and job.wrap.yaml Complete (sidecar 0); job.yaml alone: main ended, the sidecar and the pod still running"
}

# Scenario 10: `kubectl-sexton webhook` on this machine (the release binary, as the API
# server's webhooks are called: over TLS, here with a certificate for 127.0.0.1 made by
# openssl), registered by URL with its CA as caBundle.

# webhook_metric RESULT: the webhook's count of reviews answered RESULT (0 before the first).
webhook_metric() {
  local got
  got=$(curl -sf --max-time 5 "http://$WEBHOOK_METRICS/metrics") || fail "10: no metrics from the webhook at $WEBHOOK_METRICS"
  awk -v k="sexton_webhook_reviews_total{result=\"$1\"}" '$1 == k {n = $2} END {print n + 0}' <<<"$got"
}

# job_webhook STRATEGY CODE: e2e/manifests/job-webhook.yaml for STRATEGY (auto: no annotation
# sexton.dev/inject, the default) and main's exit CODE.
job_webhook() {
  sed -e "s/STRATEGY/$1/g" -e "s/MAIN_CODE/$2/g" -e '/sexton.dev\/inject: auto$/d' "$M/job-webhook.yaml"
}

# The API server calls the webhook as soon as it has read the new configuration, which takes
# a moment: until then, a dry run of the Job's pod in the labelled namespace comes back not
# injected.
webhook_called() {
  local pod
  pod=$(job_webhook auto 0 | kubectl create --dry-run=client -o json -f - \
    | python3 -c 'import json, sys
j = json.load(sys.stdin)
t = j["spec"]["template"]
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "annotations": t["metadata"]["annotations"]}, "spec": t["spec"]}))')
  kubectl -n "$1" create --dry-run=server -o jsonpath='{.metadata.annotations.sexton\.dev/injected}' -f - <<<"$pod" \
    | grep -q '"mechanism":"native"'
}

# pod_spec NS JOB: what the webhook would change in the Job's pod: its annotations' keys,
# init containers, and each container's name, image, command, args and env.
pod_spec() {
  kubectl -n "$1" get pods -l "job-name=$2" -o jsonpath='{.items[0].metadata.annotations} init=[{.items[0].spec.initContainers}]{range .items[0].spec.containers[*]} {.name} {.image} {.command} {.args} {.env};{end}'
}
template_spec() {
  kubectl -n "$1" get job "$2" -o jsonpath='{.spec.template.metadata.annotations} init=[{.spec.template.spec.initContainers}]{range .spec.template.spec.containers[*]} {.name} {.image} {.command} {.args} {.env};{end}'
}

# start_webhook N DIR LABELLED_NS: the release binary's webhook on this machine, over TLS with
# an openssl-made certificate for 127.0.0.1 (a CA of its own), on a port the kernel picks,
# with admin credentials (the RBAC of deploy/rbac-webhook.yaml is tested in tests/webhook.rs),
# registered by URL as sexton-e2e-PID (e2e/manifests/webhook-configuration.yaml; it sorts
# where sexton-webhook does), and called by the API server: WEBHOOK_PID, WEBHOOK_CONFIG,
# WEBHOOK_PORT, WEBHOOK_METRICS and WEBHOOK_LOG set. N names the scenario in failures.
start_webhook() {
  local n=$1 dir=$2 lab=$3 port
  rm -rf "$dir"; mkdir -p "$dir"; WEBHOOK_LOG="$dir/webhook.log"
  ca_create "$dir" sexton-e2e-webhook-ca
  cert_issue "$dir" "$dir/serving" /CN=127.0.0.1 serverAuth "IP:127.0.0.1"
  "$CTL_BIN" webhook --listen 127.0.0.1:0 --tls-cert-file "$dir/serving.crt" --tls-key-file "$dir/serving.key" \
    --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 --sexton-image sexton:e2e --kubeconfig "$KUBECONFIG" \
    >"$WEBHOOK_LOG" 2>&1 &
  WEBHOOK_PID=$!
  wait_until 30 grep -q 'serving the webhook bound=' "$WEBHOOK_LOG" || fail "$n: the webhook did not start: $(cat "$WEBHOOK_LOG")"
  port=$(sed -n 's/.*serving the webhook bound=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WEBHOOK_LOG")
  WEBHOOK_PORT=$port
  WEBHOOK_METRICS=$(sed -n 's/.*serving metrics-addr bound=\([0-9.:]*\).*/\1/p' "$WEBHOOK_LOG")
  if [ -z "$port" ] || [ -z "$WEBHOOK_METRICS" ]; then fail "$n: no addresses in the webhook's log: $(cat "$WEBHOOK_LOG")"; fi
  # auto's binary source reads the nodes' runtimes (until then it copies the binary)
  wait_until 30 grep -q 'node runtimes known nodes=1' "$WEBHOOK_LOG" || fail "$n: the webhook did not read the node: $(cat "$WEBHOOK_LOG")"
  WEBHOOK_CONFIG="sexton-e2e-$$"
  sed -e "s/NAME/$WEBHOOK_CONFIG/" -e "s/PORT/$port/g" -e "s/CA_BUNDLE/$(base64 -w0 "$dir/ca.crt")/g" \
    "$M/webhook-configuration.yaml" | kubectl apply -f - >/dev/null || fail "$n: cannot create the MutatingWebhookConfiguration"
  wait_until 30 webhook_called "$lab" \
    || fail "$n: the API server did not call the webhook at https://127.0.0.1:$port within 30 s; its log: $(cat "$WEBHOOK_LOG")"
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

# Scenario 11: the SidecarTerminator of scenario 3 again, now run by the node from the
# shipped image kubectl-sexton (e2e/manifests/controller-image.yaml); the pods must run the
# very images of target/images (their imageID is the layout's digest).
# A container's state and termination message in a pod (as JSON in a file), whether it is
# an init container (native sidecars) or not: "EXIT|MESSAGE" (newlines as spaces).
container_end() { # pod.json container
  python3 -c '
import json, sys
pod, name = json.load(sys.stdin), sys.argv[1]
for s in pod["status"].get("initContainerStatuses", []) + pod["status"].get("containerStatuses", []):
    if s["name"] == name:
        t = s.get("state", {}).get("terminated") or {}
        print("%s|%s" % (t.get("exitCode", ""), " ".join((t.get("message") or "").split())))
' "$2" <"$1"
}
job_pod() { kubectl -n "$1" get pods -l "job-name=$2" -o jsonpath='{.items[0].metadata.name}'; }
terminal() { # ns pod
  case "$(kubectl -n "$1" get pod "$2" -o jsonpath='{.status.phase}')" in Succeeded|Failed) return 0 ;; esac
  return 1
}

scenario12() {
  local ns s j pod st end dir="$E2E_STATE/scenario12" strategies="native wrap native-wrap"
  ns=$(fresh_ns contract)
  mkdir -p "$dir"
  kubectl -n "$ns" apply -f "$M/contract-lib.yaml" >/dev/null
  for s in $strategies; do
    sed "s/STRATEGY/$s/g" "$M/contract.yaml" \
      | "$CTL_BIN" inject --strategy "$s" --sexton-image sexton:e2e -f - >"$dir/$s.yaml" 2>"$dir/inject-$s.log" \
      || fail "12: inject $s: $(cat "$dir/inject-$s.log")"
    kubectl -n "$ns" apply -f "$dir/$s.yaml" >/dev/null
  done
  # deletion: each pod deleted once its main served through the proxy (Ready); the test's
  # finalizer keeps the pod, so its last status can be read
  for s in $strategies; do
    kubectl -n "$ns" wait --for=condition=Ready "pod/deletion-$s" --timeout=120s >/dev/null \
      || fail "12: deletion-$s not Ready: $(kubectl -n "$ns" get pod "deletion-$s" -o jsonpath='{.status}')"
  done
  for s in $strategies; do kubectl -n "$ns" delete pod "deletion-$s" --wait=false >/dev/null; done
  for s in $strategies; do
    pod=deletion-$s
    wait_until 60 terminal "$ns" "$pod" || fail "12: $pod not terminal 60 s after its deletion: $(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.status}')"
    kubectl -n "$ns" get pod "$pod" -o json >"$dir/$pod.json"
    kubectl -n "$ns" patch pod "$pod" --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
    st=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["status"]["phase"])' <"$dir/$pod.json")
    end=$(container_end "$dir/$pod.json" main)
    case "$end" in 0\|*"ok "*" fail 0 "*) ;; *) fail "12: $pod: the main's drain failed requests: $end" ;; esac
    end=$(container_end "$dir/$pod.json" proxy)
    [ "${end%%|*}" = 0 ] || fail "12: $pod: the proxy did not end with 0: $end"
    [ "$st" = Succeeded ] || fail "12: $pod: phase $st"
  done
  pass "12: deletion: the main drained 3 s through its proxy (no failed request), the proxy ended with 0, the pod Succeeded; native, wrap, native-wrap"
  for j in two-mains on-failure crash startup two-sidecars; do
    for s in $strategies; do
      kubectl -n "$ns" wait --for=condition=Complete "job/$j-$s" --timeout=120s >/dev/null \
        || fail "12: $j-$s not Complete: $(all_states "$ns" "$j-$s")"
      pod=$(job_pod "$ns" "$j-$s")
      kubectl -n "$ns" get pod "$pod" -o json >"$dir/$j-$s.json"
      for c in proxy logs; do
        end=$(container_end "$dir/$j-$s.json" $c)
        [ -z "$end" ] || [ "${end%%|*}" = 0 ] || fail "12: $j-$s: $c ended $end"
      done
    done
  done
  for s in $strategies; do
    end=$(container_end "$dir/two-sidecars-$s.json" logs)
    [ "${end#*|}" = "proxy-term proxy-exit logs-term logs-exit" ] || fail "12: two-sidecars-$s: stop order $end"
  done
  pass "12: two-mains, on-failure, crash, startup, two-sidecars Complete, sidecars ended with 0, proxy stopped before logs; native, wrap, native-wrap"
}

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

# start_vendor VENDOR DIR LABEL [--sidecar-args]: the stand-in of VENDOR's injector
# (testenv/vendor-webhook) on this machine, registered under the vendor's own configuration
# name for the namespaces labelled LABEL, its sidecar a busybox that serves the vendor's quit
# endpoint (quit-server.sh), as its command (or, with --sidecar-args, its args). The configuration's name is the cargo tests' too (testbed::Vendor):
# their lock is held meanwhile (fd 8).
start_vendor() {
  local vendor=$1 dir=$2 label=$3 how=${4:---sidecar-command} bin port
  bin=$("$ROOT/scripts/testenv.sh" vendor-webhook) || fail "14: cannot build testenv/vendor-webhook"
  rm -rf "$dir"; mkdir -p "$dir"
  ca_create "$dir" "sexton-e2e-$vendor-ca"
  cert_issue "$dir" "$dir/serving" /CN=127.0.0.1 serverAuth "IP:127.0.0.1"
  port=$(free_port)
  "$bin" --vendor "$vendor" --print-configuration --url "https://127.0.0.1:$port/mutate" \
    --ca-bundle "$dir/ca.crt" --namespace-label "$label" >"$dir/configuration.json" \
    || fail "14: vendor-webhook --print-configuration failed"
  VENDOR_CONFIG=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["metadata"]["name"])' <"$dir/configuration.json")
  exec 8>"$TESTENV_STATE/vendor-$VENDOR_CONFIG.lock"
  flock -w 120 8 || fail "14: $VENDOR_CONFIG is held by a test process for 120 s"
  "$bin" --vendor "$vendor" --listen "127.0.0.1:$port" --cert "$dir/serving.crt" --key "$dir/serving.key" \
    --image busybox:e2e "$how" "$(python3 -c 'import json, sys; print(json.dumps(["/bin/busybox", "sh", "-c", open(sys.argv[1]).read()]))' "$ROOT/testenv/vendor-webhook/quit-server.sh")" \
    >"$dir/vendor.log" 2>&1 &
  VENDOR_PID=$!
  kubectl apply -f "$dir/configuration.json" >/dev/null || fail "14: cannot register $VENDOR_CONFIG"
}
stop_vendor() {
  if [ -n "$VENDOR_CONFIG" ]; then
    kubectl delete mutatingwebhookconfiguration "$VENDOR_CONFIG" --ignore-not-found --request-timeout=20s >/dev/null 2>&1 || true
    VENDOR_CONFIG=""
    exec 8>&-
  fi
  if [ -n "$VENDOR_PID" ]; then
    kill "$VENDOR_PID" 2>/dev/null || true
    wait "$VENDOR_PID" 2>/dev/null || true
    VENDOR_PID=""
  fi
}
# Whether a dry-run Pod asking Vault's injector for its agent comes back with it, in NS.
vault_called() {
  kubectl -n "$1" create --dry-run=server -o json -f - <<'EOF' | grep -q '"vault-agent-init"'
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "probe", "annotations": {"vault.hashicorp.com/agent-inject": "true"}},
 "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:e2e"}]}}
EOF
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
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

# Scenarios 15 and 16: the controller's safety net.

# dead_webhook N DIR: sexton's webhook configuration (scenario 10's) calling a port of this
# machine that nobody listens on, as when every replica is gone: the API server admits the
# pods unchanged (failurePolicy Ignore). WEBHOOK_CONFIG set (deleted on any exit).
dead_webhook() {
  local n=$1 dir=$2 port
  rm -rf "$dir"; mkdir -p "$dir"
  ca_create "$dir" sexton-e2e-dead-webhook-ca
  port=$(free_port)
  WEBHOOK_CONFIG="sexton-e2e-$$"
  sed -e "s/NAME/$WEBHOOK_CONFIG/" -e "s/PORT/$port/g" -e "s/CA_BUNDLE/$(base64 -w0 "$dir/ca.crt")/g" \
    "$M/webhook-configuration.yaml" | kubectl apply -f - >/dev/null || fail "$n: cannot create the MutatingWebhookConfiguration"
}
# net_controller N NS LOG: the controller with the safety net alone, for NS, reading
# WEBHOOK_CONFIG; returns once it is ready (its caches filled).
net_controller() {
  local n=$1 health
  controller "$2" "$3" --quick-exit-image sexton-quick-exit:e2e --controllers safety-net \
    --webhook-configuration "$WEBHOOK_CONFIG"
  wait_until 30 grep -q 'serving health-addr bound=' "$3" || fail "$n: the controller did not start: $(cat "$3")"
  health=$(sed -n 's/.*serving health-addr bound=\([0-9.:]*\).*/\1/p' "$3")
  wait_until 30 curl -sf --max-time 2 "http://$health/readyz" -o /dev/null || fail "$n: the controller is not ready: $(tail -5 "$3")"
}
# sidecar_end NS POD NAME: "IMAGE EXIT RESTARTS STARTED FINISHED" of a container's state.
sidecar_end() {
  kubectl -n "$1" get pod "$2" -o json | python3 -c '
import json, sys
pod, name = json.load(sys.stdin), sys.argv[1]
for s in pod["status"].get("containerStatuses", []):
    if s["name"] == name:
        t = s.get("state", {}).get("terminated") or {}
        print(s["image"], t.get("exitCode", "running"), s.get("restartCount", 0), t.get("startedAt", "-"), t.get("finishedAt", "-"))' "$3"
}

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

[ $# -gt 0 ] || set -- 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16
for n in "$@"; do
  t0=$SECONDS
  "scenario$n"
  echo "e2e: scenario $n took $((SECONDS - t0)) s"
done
