# shellcheck shell=bash disable=SC2034  # (RERUN: read by scripts/test.sh)
# Helpers that several stages of scripts/test.sh share. Sourced by scripts/test.sh.

need_cmd() { command -v "$1" >/dev/null 2>&1; }

# cargo_test PREFIX ARGS...: cargo test, its output also kept, so that a failure names the
# command that reruns just the failing tests (PREFIX: environment to repeat, or "").
cargo_test() {
  local prefix=$1 out rc=0; shift
  out=$(mktemp "${TMPDIR:-/tmp}/sexton-test-cargo.XXXXXX")
  cargo test --profile release-nolto "$@" 2>&1 | tee "$out" || rc=$?
  [ "$rc" = 0 ] || RERUN=$(rerun_hint "$prefix" "$out")
  rm -f "$out"
  return "$rc"
}
cargo_tests() { cargo_test "" "$@"; }

# rerun_hint PREFIX LOG: from cargo test's output, one command per failed test binary that
# runs just its failed tests (cargo names the binary: "to rerun pass `-p X --test Y`"). The
# command selects the workspace, not the package: a subset of the packages resolves other
# features and would rebuild every dependency (test names are unique in the workspace).
rerun_hint() {
  python3 - "$1" "$2" <<'PY'
import re, sys
prefix, log = sys.argv[1], open(sys.argv[2], errors="replace").read()
failed, names, out = [], [], []
for line in log.splitlines():
    m = re.match(r"^---- (\S+) stdout ----", line)
    if m:
        names.append(m.group(1))
    m = re.search(r"to rerun pass `([^`]+)`", line) or re.match(r"^\s+`(-p [^`]+)`$", line)
    if m:
        failed.append(m.group(1))
for target in failed:
    target = re.sub(r"-p \S+", "--workspace", target)
    exact = " ".join(names) if len(failed) == 1 and names else ""
    tail = f" -- --exact {exact}" if exact else ""
    out.append(f"  {prefix}cargo test --profile release-nolto {target}{tail}")
print("\n".join(out) or f"  {prefix}cargo test --profile release-nolto  (no failing test named: see the output above)")
PY
}

# bench_quick NAME TABLES CMD...: runs a benchmark's quick form, then checks that it wrote
# target/bench/NAME.md stamped with TABLES tables filled (bench/lib/check.py). The figures
# are not asserted (they are not stable on shared machines). The peers they compare against
# are measured only if built before (SEXTON_BENCH_PEERS=if-built: their cold builds take
# minutes, BENCHMARKS.md). A failed one is rerun alone with its command.
bench_quick() {
  local name=$1 tables=$2; shift 2
  RERUN="  $*"
  SEXTON_BENCH_PEERS=if-built SEXTON_BENCH_SETTLE=0 "$@" >"${TMPDIR:-/tmp}/sexton-test-bench-$name.log" 2>&1 \
    || { tail -40 "${TMPDIR:-/tmp}/sexton-test-bench-$name.log" >&2; echo "test.sh: $* failed (its output's end above)" >&2; return 1; }
  python3 bench/lib/check.py "target/bench/$name.md" --tables "$tables"
  RERUN=""
}
