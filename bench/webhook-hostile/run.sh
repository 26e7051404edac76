#!/usr/bin/env bash
# The webhook under hostile clients (BENCHMARKS.md "Admission webhook under hostile clients"):
# builds kubectl-sexton (profile release-nolto) unless --bin is given, then runs
# bench/webhook-hostile/hostile.py against it on loopback. No API server is needed (the webhook's
# client points at a closed port; these reviews make it call nothing). --bin may be given
# more than once (say main's binary and a branch's): they are run in turn, round after round.
#   bench/webhook-hostile/run.sh [--bin FILE]... [--rounds N] [--secs N] [--hostile-addresses N]
#                            [--no-limits] [--pin] [--timeline FILE] [--out FILE.md] [--max-rss-mib N]
#                            [--key ecdsa|rsa|ecdsa,rsa]  (the serving key: default ecdsa, as the chart issues)
set -euo pipefail
cd "$(dirname "$0")/../.."
BINS=() PASS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BINS+=("$2"); shift ;;
    --secs|--hostile-addresses|--rounds|--timeline|--out|--max-rss-mib|--key) PASS+=("$1" "$2"); shift ;;
    --no-limits|--pin) PASS+=("$1") ;;
    *) echo "webhook-hostile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ ${#BINS[@]} -eq 0 ]; then
  cargo build --profile release-nolto --locked --workspace >&2
  BINS=(target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton)
fi
exec python3 bench/webhook-hostile/hostile.py "${BINS[@]}" "${PASS[@]}"
