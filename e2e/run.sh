#!/usr/bin/env bash
# End-to-end scenarios on the real node of scripts/e2e-cluster.sh (brought up if needed).
# Every wait is bounded (kubectl wait --timeout, timeout); a failed scenario says why and
# exits 1. The controllers it starts in the background are stopped on any exit.
#   e2e/run.sh                  every scenario, in order
#   e2e/run.sh NAME|N ...       these scenarios (by name or number: e2e/run.sh webhook 3)
#   e2e/run.sh --list           the scenarios, one a line: number, name, what it shows
# Each scenario is one file, e2e/scenarios/NN-NAME.sh: what it shows (its header), the
# function scenarioN and the helpers it alone uses; NN orders the full run. This file sets up
# what every scenario needs (the node, the CRD, the requester policy, the helpers below);
# e2e/lib.sh holds the helpers several scenarios share.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../scripts/lib.sh"
lib_init e2e "$E2E_STATE"
# The scenarios this run selects, resolved before the node is brought up (a wrong name fails
# at once).
SCENARIOS=("$ROOT"/e2e/scenarios/[0-9][0-9]-*.sh)
scenario_number() { local n=${1##*/}; echo $((10#${n%%-*})); }
scenario_name() { local n=${1##*/}; n=${n#*-}; echo "${n%.sh}"; }
# scenario_file NAME|N: the file of that scenario
scenario_file() {
  local f
  for f in "${SCENARIOS[@]}"; do
    if [ "$1" = "$(scenario_name "$f")" ] || [ "$1" = "$(scenario_number "$f")" ]; then echo "$f"; return 0; fi
  done
  return 1
}
case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  --list)
    for f in "${SCENARIOS[@]}"; do
      printf '%-3s %-20s %s\n' "$(scenario_number "$f")" "$(scenario_name "$f")" "$(sed -n '4s/^#   //p' "$f")"
    done
    exit 0 ;;
esac
SELECTED=()
if [ $# -eq 0 ]; then SELECTED=("${SCENARIOS[@]}"); fi
for a in "$@"; do
  f=$(scenario_file "$a") || die "no scenario '$a' (e2e/run.sh --list names them)"
  SELECTED+=("$f")
done
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

# shellcheck source=e2e/lib.sh
. "$ROOT/e2e/lib.sh"

for f in "${SELECTED[@]}"; do
  n=$(scenario_number "$f")
  # shellcheck source=/dev/null
  . "$f"
  t0=$SECONDS
  "scenario$n"
  echo "e2e: scenario $n ($(scenario_name "$f")) took $((SECONDS - t0)) s"
done
