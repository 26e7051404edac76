#!/usr/bin/env bash
# The webhook under hostile clients (BENCHMARKS.md "Admission webhook under hostile clients"):
# builds kubectl-sexton (profile release-nolto) unless --bin is given, then runs
# bench/webhook-hostile.py against it on loopback. No API server is needed (the webhook's
# client points at a closed port; these reviews make it call nothing).
#   bench/webhook-hostile.sh [--bin FILE] [--secs N] [--hostile-addresses N]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="" PASS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift ;;
    --secs|--hostile-addresses) PASS+=("$1" "$2"); shift ;;
    *) echo "webhook-hostile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$BIN" ]; then
  cargo build --profile release-nolto --locked --workspace >&2
  BIN=target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton
fi
exec python3 bench/webhook-hostile.py "$BIN" "${PASS[@]}"
