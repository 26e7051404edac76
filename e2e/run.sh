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
#    native, native-wrap and wrap: main 0 -> Job Complete, main 1 -> Job Failed, the
#    sidecar ended in all.
# 8  A native sidecar that sexton also ends (an init container with restartPolicy Always whose
#    command runs behind sexton with KUBEXIT_DEATH_DEPS=main): it exits 0 as soon as main has
#    (its log says so), and the kubelet neither restarts it nor counts it; six pods, main 0 ->
#    Succeeded, main 1 -> Failed; restartCount 0 (one pod of the six may show 1: the narrow
#    race in which the kubelet sees the sidecar's exit before main's, see the scenario).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../scripts/lib.sh"
lib_init e2e "$E2E_STATE"
eval "$("$ROOT/scripts/e2e-cluster.sh" up)"
export KUBECONFIG
M="$ROOT/e2e/manifests"
CTL_BIN="$ROOT/target/x86_64-unknown-linux-gnu/release/kubectl-sexton"
# the root build (scripts/test.sh has made it already)
(cd "$ROOT" && cargo build --release >&2)
kubectl apply --server-side -f "$ROOT/deploy/crd-ephemeraljob.yaml" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/ephemeraljobs.sexton.dev >/dev/null

fail() { echo "e2e: FAIL: $*" >&2; exit 1; }
pass() { echo "e2e: ok: $*"; }
fresh_ns() {
  local ns="e2e-$1-$$"
  kubectl create namespace "$ns" >/dev/null
  kubectl label namespace "$ns" sexton-e2e=true >/dev/null   # removed by e2e-cluster.sh down
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
trap stop_controllers EXIT
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
  kubectl -n "$ns" apply -f "$M/job-birth-graveyard.yaml" -f "$M/job-birth-api.yaml" >/dev/null
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
  kubectl -n "$ns" apply -f "$M/ejob-sees-target.yaml" >/dev/null
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

scenario7() {
  local ns s c job want; ns=$(fresh_ns inject)
  for s in native native-wrap wrap; do
    for c in 0 1; do
      sed -e "s/MAIN_CODE/$c/g" -e "s/STRATEGY/$s/g" "$M/job-inject.yaml" \
        | "$CTL_BIN" inject --strategy "$s" --sexton-image sexton:e2e -f - 2>/dev/null \
        | kubectl -n "$ns" apply -f - >/dev/null || fail "7: inject $s failed"
    done
  done
  for s in native native-wrap wrap; do
    for c in 0 1; do
      job="inject-$s-$c"
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
  pass "7: injected native, native-wrap and wrap: main 0 -> Complete, main 1 -> Failed; the sidecar ended with 0 in all six"
}

# the pod's init and regular containers: phase name=exit/restarts ...
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

[ $# -gt 0 ] || set -- 1 2 3 4 5 6 7 8
for n in "$@"; do "scenario$n"; done
