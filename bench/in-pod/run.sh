#!/usr/bin/env bash
# Benchmarks sexton against kubexit on this machine, side by side, and rewrites the
# results section of BENCHMARKS.md and bench/in-pod/latency-cdf.png.
#   bench/in-pod/run.sh                  everything (keep the machine otherwise idle)
#   bench/in-pod/run.sh --quick          a few repetitions, to check the harness;
#                                        BENCHMARKS.md left alone
#   bench/in-pod/run.sh --only-cpu       the CPU section alone (graveyard churn and idle)
#   bench/in-pod/run.sh --sexton-old BIN also measure an earlier sexton build ("sexton (before)")
#   bench/in-pod/run.sh --bin BIN --slim-bin BIN
#                                        measure these in-pod builds (e.g. scripts/images.sh's,
#                                        as CI does) instead of building them; no musl build then
# Other arguments go to the harness, crates/sexton/benches/compare/main.rs (--idle-secs N,
# --churn-secs N, ...), built with the tests' profile (release-nolto, as scripts/test.sh
# builds it). Results: target/bench/results.json, and the sections alone in
# target/bench/results.md, stamped (bench/lib/stamp.py). With --quick, when
# bench/lib/kubexit.sh cannot get kubexit (the Go module proxy refuses it on some machines),
# the kubexit columns are a stand-in (sexton behind a shell's exec, said in the results): the
# quick form checks the harness, not the figures. BENCHMARKS.md says how long each form takes.
# Needs root (PID namespaces), gcc, Go (for kubexit), python3 with matplotlib.
set -euo pipefail
# Paths given to this script (--bin, --slim-bin, --sexton-old, KUBEXIT_SRC, KUBEXIT_BIN) are
# the caller's: made absolute here, before the script moves to the repository's root.
CALLER=$PWD
abs() { case $1 in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }
[ -z "${KUBEXIT_SRC:-}" ] || KUBEXIT_SRC="$(abs "$KUBEXIT_SRC")"
[ -z "${KUBEXIT_BIN:-}" ] || KUBEXIT_BIN="$(abs "$KUBEXIT_BIN")"
cd "$(dirname "$0")/../.."
ROOT=$PWD
# Absolute paths only: `cargo bench` runs the harness in crates/sexton, so a relative path
# handed to it would point nowhere (kubexit's child never started).
OUT="$ROOT/target/bench"; mkdir -p "$OUT"
ONLY_CPU=false QUICK=false BIN="" SLIM_BIN="" ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN="$(abs "$2")"; shift 2 ;;
    --slim-bin) SLIM_BIN="$(abs "$2")"; shift 2 ;;
    --sexton-old) ARGS+=("$1" "$(abs "$2")"); shift 2 ;;
    --only-cpu) ONLY_CPU=true; ARGS+=("$1"); shift ;;
    --quick) QUICK=true; ARGS+=("$1"); export SEXTON_BENCH_SETTLE=${SEXTON_BENCH_SETTLE:-0}; shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
[ -z "$SLIM_BIN" ] || [ -n "$BIN" ] || { echo "bench/in-pod/run.sh: --slim-bin needs --bin" >&2; exit 2; }

gcc -O2 -static -o "$OUT/child" bench/in-pod/child.c
gcc -O2 -static -o "$OUT/churn" bench/in-pod/churn.c
STAND_IN=""
if ! KUBEXIT="$(bench/lib/kubexit.sh)"; then
  $QUICK || exit 1
  # sexton reads kubexit's settings, so it can take kubexit's place in the harness; the
  # shell execs it, so that it is still PID 1 of its namespace (kubexit takes no `--`)
  KUBEXIT="$OUT/kubexit-stand-in"
  printf '#!/bin/sh\nexec %s -- "$@"\n' "$OUT/sexton" >"$KUBEXIT"
  chmod +x "$KUBEXIT"
  STAND_IN="sexton behind a shell's exec: bench/lib/kubexit.sh could not get kubexit"
  echo "bench/in-pod/run.sh: no kubexit: the quick form measures a stand-in in its place" >&2
fi
echo "kubexit: $KUBEXIT" >&2
python3 -c "import matplotlib" 2>/dev/null || $QUICK || python3 -m pip install --quiet matplotlib
# Only what the comparison runs is built: the in-pod binaries it measures (unless given) and
# its harness. (It used to build the whole workspace and its benches as well, kubectl-sexton
# twice among them, and the slim binary in a target directory of its own: CONTRIBUTING.md,
# where a cold run's time goes.)
MUSL=() SLIM=()
if [ -n "$BIN" ]; then
  [ -z "$SLIM_BIN" ] || SLIM=(--sexton-slim "$SLIM_BIN")
else
  # The in-pod binaries as shipped, built alone (see Cargo.toml on feature unification) with
  # scripts/images.sh's commands and target directory, so that after `scripts/images.sh
  # in-pod` there is nothing to build. Each is copied as soon as built: the next build
  # replaces target/.../release/sexton, and a concurrent cargo build must not swap it mid-run.
  cargo build --release --locked --quiet -p sexton
  cp "$ROOT/target/x86_64-unknown-linux-gnu/release/sexton" "$OUT/sexton"
  if ! $ONLY_CPU; then
    cargo build --release --locked --quiet -p sexton --no-default-features
    cp "$ROOT/target/x86_64-unknown-linux-gnu/release/sexton" "$OUT/sexton-slim"
    SLIM=(--sexton-slim "$OUT/sexton-slim")
    # The image ships a musl build (Dockerfile); measure it too when the target can be had.
    # (ring's C code needs a musl C compiler: Debian's musl-tools)
    command -v musl-gcc >/dev/null || { command -v apt-get >/dev/null && apt-get install -y -qq musl-tools >/dev/null 2>&1; } || true
    export CC_x86_64_unknown_linux_musl=musl-gcc
    if command -v musl-gcc >/dev/null && rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1 \
       && cargo build --release --locked --quiet -p sexton --target x86_64-unknown-linux-musl; then
      MUSL=(--sexton-musl "$ROOT/target/x86_64-unknown-linux-musl/release/sexton")
    else
      echo "(no musl target: measuring the static glibc build only)" >&2
    fi
  fi
fi
[ -z "$BIN" ] || cp "$BIN" "$OUT/sexton"   # (the measured sexton is a copy, as above)
# The harness, built before the stamp reads the machine's load: `--bench compare` builds it
# and the sexton package alone, with the tests' profile and the whole workspace's features,
# so after the tests' build there is nothing to build.
cargo bench --profile release-nolto --locked --quiet --workspace --bench compare --no-run
python3 bench/lib/stamp.py begin >"$OUT/results.stamp.json"
cargo bench --profile release-nolto --locked --quiet --workspace --bench compare -- \
  --kubexit "$KUBEXIT" --child "$OUT/child" --churn "$OUT/churn" \
  --sexton "$OUT/sexton" --out "$OUT" "${MUSL[@]}" "${SLIM[@]}" "${ARGS[@]}"
if $ONLY_CPU; then
  python3 bench/lib/stamp.py end "$OUT/results.stamp.json" "$OUT/results.json" cpu
else
  python3 bench/lib/stamp.py end "$OUT/results.stamp.json" "$OUT/results.json"
  python3 -c 'import json, sys; p = sys.argv[1]; r = json.load(open(p)); r["kubexit_stand_in"] = sys.argv[2]; json.dump(r, open(p, "w"), indent=2)' \
    "$OUT/results.json" "$STAND_IN"
fi
UPDATE=(); $QUICK && UPDATE=(--no-update)
python3 bench/in-pod/report.py "$OUT/results.json" BENCHMARKS.md bench/in-pod/latency-cdf.png --md "$OUT/results.md" "${UPDATE[@]}"
