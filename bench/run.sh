#!/usr/bin/env bash
# Benchmarks sexton against kubexit on this machine, side by side, and rewrites the
# results section of BENCHMARKS.md and bench/latency-cdf.png.
#   bench/run.sh                  everything (about 10 minutes; keep the machine otherwise idle)
#   bench/run.sh --quick          a few repetitions, to check the harness
#   bench/run.sh --only-cpu       the CPU section alone (graveyard churn and idle, ~3 minutes)
#   bench/run.sh --sexton-old BIN also measure an earlier sexton build ("sexton (before)")
# Other arguments go to bench/compare.rs (--idle-secs N, --churn-secs N, ...).
# Needs root (PID namespaces), gcc, Go (for kubexit), python3 with matplotlib.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Absolute paths only: `cargo bench -p sexton` runs the harness in crates/sexton, so a
# relative path handed to it would point nowhere (kubexit's child never started).
OUT="$ROOT/target/bench"; mkdir -p "$OUT"
ONLY_CPU=false
for a in "$@"; do [ "$a" = --only-cpu ] && ONLY_CPU=true; done

gcc -O2 -static -o "$OUT/child" bench/child.c
gcc -O2 -static -o "$OUT/churn" bench/churn.c
KUBEXIT="$(bench/kubexit.sh)"
echo "kubexit: $KUBEXIT" >&2
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install --quiet matplotlib
MUSL=() SLIM=()
if ! $ONLY_CPU; then
  # The image ships a musl build (Dockerfile); measure it too when the target can be had.
  # (ring's C code needs a musl C compiler: Debian's musl-tools)
  command -v musl-gcc >/dev/null || { command -v apt-get >/dev/null && apt-get install -y -qq musl-tools >/dev/null 2>&1; } || true
  export CC_x86_64_unknown_linux_musl=musl-gcc
  if command -v musl-gcc >/dev/null && rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1 \
     && cargo build --release --quiet -p sexton --target x86_64-unknown-linux-musl; then
    MUSL=(--sexton-musl "$ROOT/target/x86_64-unknown-linux-musl/release/sexton")
  else
    echo "(no musl target: measuring the static glibc build only)" >&2
  fi
  # the slim build (no Kubernetes API client) in a target dir of its own
  cargo build --release --quiet -p sexton --no-default-features --target-dir "$ROOT/target/slim"
  SLIM=(--sexton-slim "$ROOT/target/slim/x86_64-unknown-linux-gnu/release/sexton")
fi
# the in-pod binary as shipped: built alone (see Cargo.toml on feature unification)
cargo build --release --quiet -p sexton
# The measured sexton is a copy: a concurrent cargo build must not swap it mid-run.
cp "$ROOT/target/x86_64-unknown-linux-gnu/release/sexton" "$OUT/sexton"
cargo bench -p sexton --bench compare -- --kubexit "$KUBEXIT" --child "$OUT/child" --churn "$OUT/churn" \
  --sexton "$OUT/sexton" --out "$OUT" "${MUSL[@]}" "${SLIM[@]}" "$@"
python3 bench/report.py "$OUT/results.json" BENCHMARKS.md bench/latency-cdf.png
