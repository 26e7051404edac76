# shellcheck shell=bash
# The background scheduling of scripts/test.sh, in one place: `bg` starts a step in a session
# of its own at a niceness, `wait_bg` waits for it at the foreground's priority, `cpu_of`
# reads its CPU-seconds, `timed` adds a foreground step's seconds to the summary. Sourced by
# scripts/test.sh.

# timed NAME CMD...: runs CMD, adding its seconds to the summary printed at the end.
TIMES=""
timed() {
  local name=$1 t0=$SECONDS; shift
  "$@"
  TIMES="$TIMES $name $((SECONDS - t0))"
}

# bg NAME NICENESS CMD...: runs CMD in a session of its own (so that the EXIT trap stops it
# with its children), its output in $TMPDIR/sexton-test-NAME.log.
# With autogroup scheduling (kernel.sched_autogroup_enabled=1, the default of many
# kernels, this machine kind's included), a new session is a scheduling group of its own
# that shares the CPU equally with the foreground's whatever its processes' niceness: the
# group's niceness is set as well (/proc/self/autogroup), or a background build at 19 would
# take as much CPU as the tests it should yield to.
# Each job's CPU time (user + system, its children's included: bash's `times`) goes to
# $TMPDIR/sexton-test-NAME.cpu, and the end of the run sums them up: a cold run is CPU-bound,
# so the CPU-seconds say where its minutes go.
declare -A BG=()
BG_NAMES=""
bg() {
  local name=$1 n=$2; shift 2
  rm -f "${TMPDIR:-/tmp}/sexton-test-$name.cpu"
  # shellcheck disable=SC2016  # (expanded by the inner shell)
  setsid bash -c 'n=$1 name=$2; shift 2; echo "$n" 2>/dev/null >/proc/self/autogroup || true
    nice -n "$n" "$@"; rc=$?
    times >"${TMPDIR:-/tmp}/sexton-test-$name.cpu"; exit $rc' bg "$n" "$name" "$@" \
    >"${TMPDIR:-/tmp}/sexton-test-$name.log" 2>&1 </dev/null &
  BG[$name]=$! BG_NAMES="$BG_NAMES $name"
}

# started NAME: whether background job NAME was started by this run.
started() { [ -n "${BG[$1]+x}" ]; }

# wait_bg NAME: waits for background job NAME, and on failure shows its output and fails
# the run. A job waited for runs at the foreground's priority from then on (its session's
# autogroup and every process of its group): on a machine busy with other work, a build
# started at 10 or 19 would otherwise crawl while the whole run waits for it. Lowering a
# niceness needs root; without it the job keeps its own.
wait_bg() {
  [ -n "${BG[$1]:-}" ] || return 0
  local pid=${BG[$1]}
  echo 0 2>/dev/null >"/proc/$pid/autogroup" || true
  renice -n 0 -g "$pid" >/dev/null 2>&1 || true
  wait "$pid" && { BG[$1]=""; return 0; }
  cat "${TMPDIR:-/tmp}/sexton-test-$1.log" >&2
  echo "test.sh: the background step '$1' failed (output above)" >&2; exit 1
}

# stop_bg: stops every background job still running, with its children (the EXIT trap).
stop_bg() {
  local pid
  for pid in "${BG[@]}"; do [ -z "$pid" ] || kill -- -"$pid" 2>/dev/null || true; done
}

# cpu_of NAME: the CPU-seconds of background job NAME, once it has ended ("?" before).
cpu_of() {
  local t; t=$(tail -1 "${TMPDIR:-/tmp}/sexton-test-$1.cpu" 2>/dev/null) || { echo "?"; return; }
  # (`times`' second line, its children's: "1m2.500s 0m3.250s", user and system)
  python3 -c 'import re,sys; print(round(sum(int(m)*60+float(s) for m,s in re.findall(r"(\d+)m([\d.]+)s", sys.argv[1]))))' "$t"
}

# summary: the seconds of each step, and the CPU-seconds of each background job.
summary() {
  echo "test.sh: seconds per step:${TIMES} (all: ${SECONDS})"
  [ -n "$BG_NAMES" ] || return 0
  local cpu="" name
  for name in $BG_NAMES; do cpu="$cpu $name $(cpu_of "$name")"; done
  times >"${TMPDIR:-/tmp}/sexton-test-all.cpu"   # (not in a subshell: its children are not ours)
  echo "test.sh: CPU-seconds per background job:$cpu; of the whole run, daemons aside: $(cpu_of all)"
}
