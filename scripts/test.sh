#!/usr/bin/env bash
# Runs every test: unit tests of the pure core, integration tests that run the real
# (static, release) binary as PID 1 of separate PID namespaces, tests against a real
# kube-apiserver built from Go modules (crates/*/tests), the arm64 build under emulation,
# end-to-end scenarios on a real node, and the release rehearsal. Installs and builds what
# it needs. `scripts/test.sh --help` lists the stages.
#
# The stages are declared once, one file each: scripts/stages/NN-NAME.sh (STAGE_HELP,
# STAGE_NEEDS, `run`); NN orders the full run. What they need built or started is one table,
# scripts/stages/jobs.sh. This file derives the rest: the full run's order, what `--stage`
# builds first, what starts in the background, --help's list.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh    # (build_workspace, apt_install)
# shellcheck source=scripts/stages/bg.sh
. scripts/stages/bg.sh
# shellcheck source=scripts/stages/helpers.sh
. scripts/stages/helpers.sh

# ---- the declarations -----------------------------------------------------------------

declare -A JOB_NICE=() JOB_NEEDS=() JOB_CMD=() STAGE_OF=() NEEDS_OF=() HELP_OF=() BESIDE_NEXT=()
JOBS=() STAGES=()
# job NAME NICENESS NEEDS COMMAND...: a row of scripts/stages/jobs.sh.
job() {
  local name=$1; JOBS+=("$name") JOB_NICE[$name]=$2 JOB_NEEDS[$name]=$3; shift 3
  JOB_CMD[$name]="$*"
}
# shellcheck source=scripts/stages/jobs.sh
. scripts/stages/jobs.sh
# Each stage file's `run` becomes stage_NAME.
for f in scripts/stages/[0-9][0-9]-*.sh; do
  name=${f##*/}; name=${name#*-}; name=${name%.sh}
  STAGE_HELP="" STAGE_NEEDS="" STAGE_BESIDE_NEXT=""
  unset -f run
  # shellcheck source=/dev/null
  . "$f"
  declare -F run >/dev/null || { echo "test.sh: $f defines no run function" >&2; exit 1; }
  eval "stage_${name//-/_}() $(declare -f run | tail -n +2)"
  STAGES+=("$name") STAGE_OF[$name]=$f NEEDS_OF[$name]=$STAGE_NEEDS HELP_OF[$name]=$STAGE_HELP
  BESIDE_NEXT[$name]=$STAGE_BESIDE_NEXT
done
unset -f run

usage() {
  cat <<'EOF_'
usage: scripts/test.sh                 every stage below, in order (CI: .ci/run)
       scripts/test.sh --quick         the contributor's loop: unit, property and in-pod
                                       integration tests; no Go, no control plane, no images
                                       (a few minutes warm)
       scripts/test.sh --stage NAME    one stage, with what it needs built or started first
       scripts/test.sh CARGO-TEST-ARGS the `test` stage with these arguments for cargo test
                                       (e.g. -p sexton --test faults_graveyard), after the
                                       builds and services it needs; no arm64, e2e, release
       scripts/test.sh --plan [ARGS]   the steps that ARGS (any of the above) would run, in
                                       order, printed and not run
       scripts/test.sh --help

stages (scripts/stages/NN-NAME.sh; each prints its seconds at the end of the run; a failure
prints the command that reruns the failing test alone):
EOF_
  local s
  for s in "${STAGES[@]}"; do
    printf '  %-8s %s\n' "$s" "${HELP_OF[$s]//$'\n'/$'\n           '}"
    [ -z "${NEEDS_OF[$s]}" ] || printf '           (needs: %s)\n' "${NEEDS_OF[$s]}"
  done
  cat <<'EOF_'

What the stages need (scripts/stages/jobs.sh) is built or started once per run, most of it in
the background from the start. Services this script starts are stopped at its end; one
already running is reused and left.
Without this script: `scripts/testenv.sh up` and `scripts/registry.sh up`, then
`cargo test --profile release-nolto [--workspace --test FILE -- --exact NAME]` (the whole
workspace, so that the build is the full run's: a subset of it resolves other features and
builds every dependency again).
EOF_
}

is_stage() { [ -n "${STAGE_OF[$1]:-}" ]; }
is_job() { [ -n "${JOB_NICE[$1]:-}" ]; }
is_background() { is_job "$1" && [ "${JOB_NICE[$1]}" != fg ] && [ "${JOB_NICE[$1]}" != first ]; }
needs_of() { if is_stage "$1"; then echo "${NEEDS_OF[$1]}"; else echo "${JOB_NEEDS[$1]}"; fi; }

# ---- the arguments ----------------------------------------------------------------------

MODE=full STAGE="" JOB="" CARGO_ARGS=() PLAN=0
[ "${1:-}" != --plan ] || { PLAN=1; shift; }
# shellcheck disable=SC2034  # (CARGO_ARGS: the test stage's, scripts/stages/50-test.sh)
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --quick) MODE=quick; [ $# -eq 1 ] || { usage >&2; exit 2; } ;;
  --stage)
    MODE=stage STAGE=${2:-}
    is_stage "$STAGE" || { echo "test.sh: --stage needs one of ${STAGES[*]}, not '${STAGE}'" >&2; exit 2; }
    [ $# -eq 2 ] || { usage >&2; exit 2; } ;;
  --background-step)   # (internal: a background job or stage, started by `bg` below)
    MODE=background JOB=${2:-}; is_stage "$JOB" || is_job "$JOB" || exit 2 ;;
  "") ;;
  *) MODE=cargo CARGO_ARGS=("$@") ;;
esac

# ---- the runner ---------------------------------------------------------------------------

# The steps this run reaches: its stages and, transitively, what they need.
declare -A RUNS=()
reach() {
  local s
  [ -z "${RUNS[$1]:-}" ] || return 0
  RUNS[$1]=1
  for s in $(needs_of "$1"); do [[ $s == *\? ]] || reach "$s"; done
}
# runs STEP: whether this run reaches STEP.
runs() { [ -n "${RUNS[$1]:-}" ]; }

# one_step NAME: a stage's run or a job's command, in this shell.
one_step() {
  if is_stage "$1"; then "stage_${1//-/_}"; else eval "${JOB_CMD[$1]}"; fi
}

# start NAME: a background job, started once, after what it needs.
start() {
  started "$1" && return 0
  local s; for s in ${JOB_NEEDS[$1]}; do need "$s"; done
  bg "$1" "${JOB_NICE[$1]}" scripts/test.sh --background-step "$1"
}

# need NAME: a step done once per run: what it needs first, then the step (a background
# job: waited for). A need `NAME?` is NAME if the run reaches it anyway (from another stage):
# done here, first.
declare -A FINISHED=()
need() {
  [ -z "${FINISHED[$1]:-}" ] || return 0
  local s
  for s in $(needs_of "$1"); do
    if [[ $s == *\? ]]; then ! runs "${s%\?}" || need "${s%\?}"; else need "$s"; fi
  done
  if is_background "$1"; then start "$1"; timed "$1" wait_bg "$1"
  else timed "$1" one_step "$1"
  fi
  FINISHED[$1]=1
}

# run_stages STAGE...: every background job these stages reach started first, in the table's
# order, then the stages in order; a stage marked STAGE_BESIDE_NEXT runs (on a full run) in
# the background beside the stage after it, and is waited for once that one is done.
run_stages() {
  local s j beside=""
  for s in "$@"; do reach "$s"; done
  [ "${TEST_PLANE:-}" = node ] || ! runs e2e || export TEST_PLANE=node
  if runs services && [ $PLAN = 0 ]; then
    scripts/testenv.sh status >/dev/null 2>&1 || STOP_TESTENV=1
  fi
  # (whatever the stages: the release stage's scripts/release.sh starts the registry itself)
  if [ $PLAN = 0 ]; then
    scripts/registry.sh status >/dev/null 2>&1 || STOP_REGISTRY=1
  fi
  for j in "${JOBS[@]}"; do
    if runs "$j" && [ "${JOB_NICE[$j]}" = first ]; then need "$j"; fi
  done
  for j in "${JOBS[@]}"; do
    if runs "$j" && is_background "$j"; then start "$j"; fi
  done
  for s in "$@"; do
    if [ $# -gt 1 ] && [ -n "${BESIDE_NEXT[$s]}" ]; then
      for j in ${NEEDS_OF[$s]}; do [[ $j == *\? ]] || need "$j"; done
      bg "$s" 0 scripts/test.sh --background-step "$s"; beside=$s
      continue
    fi
    need "$s"
    if [ -n "$beside" ]; then timed "$beside" wait_bg "$beside"; FINISHED[$beside]=1; beside=""; fi
  done
  if [ -n "$beside" ]; then timed "$beside" wait_bg "$beside"; fi
}

STOP_TESTENV=0 STOP_REGISTRY=0 RERUN=""
at_exit() {
  local rc=$1
  stop_bg
  if [ $STOP_TESTENV = 1 ]; then scripts/e2e-cluster.sh down || rc=1; scripts/testenv.sh down; fi
  if [ $STOP_REGISTRY = 1 ]; then scripts/registry.sh down || rc=1; fi
  [ "$rc" = 0 ] || [ -z "$RERUN" ] || printf "\ntest.sh: to rerun what failed alone:\n%s\n" "$RERUN" >&2
  exit "$rc"
}

# The contributor's loop: everything that needs neither Go nor a control plane nor images,
# built with the same profile as the full run (so each warms the other): the unit and
# property tests of every crate, sexton-inject's golden files, the webhook fuzzed as a
# process, and the in-pod integration tests (real processes in PID namespaces; contract.rs:
# sexton-core's and the in-pod one) but api.rs, which talks to the API server.
# --workspace, as the full run's build and tests: a subset of the packages would resolve
# other features and build everything a second time.
QUICK_TESTS=(--workspace --lib --bins
  --test core_properties --test tombstone_fuzz --test golden --test admission --test contract --test webhook_fuzz
  --test supervisor --test faults_process --test faults_graveyard --test faults_extra --test resilience --test docs)

# --plan: each step printed instead of run (what a stage or the full run would do, in order).
if [ $PLAN = 1 ]; then
  # shellcheck disable=SC2317  # (called indirectly)
  bg() { echo "start $1 in the background (niceness $2)"; BG[$1]=plan; }
  wait_bg() { echo "wait for $1"; }
  one_step() { echo "run $1"; }
  summary() { :; }
fi

# ---- the run ----------------------------------------------------------------------------

case $MODE in
  background)   # (in a session of its own, started by `bg`: the parent waits and cleans up)
    timed "$JOB" one_step "$JOB"
    [ -z "$TIMES" ] || echo "test.sh: seconds per step:${TIMES}"
    exit 0 ;;
  quick)
    need setup
    timed quick cargo_tests "${QUICK_TESTS[@]}" ;;
  *)
    [ $PLAN = 1 ] || trap 'at_exit $?' EXIT
    need setup
    case $MODE in
      stage) run_stages "$STAGE" ;;
      cargo) run_stages test ;;
      full) run_stages "${STAGES[@]:1}" ;;
    esac ;;
esac
summary
