#!/usr/bin/env bash
# Builds sexton and simulates a Job pod locally: a "main" container and a "proxy" sidecar,
# each sexton-wrapped and PID 1 of its own PID namespace, sharing a graveyard directory.
# The sidecar would run forever; sexton stops it when main exits.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet -p sexton
BIN="$PWD/target/x86_64-unknown-linux-gnu/release/sexton"
POD="$(mktemp -d /tmp/sexton-demo.XXXXXX)"
trap 'rm -rf "$POD"' EXIT
export KUBEXIT_GRAVEYARD="$POD/graveyard"

# One PID namespace per container, as in a pod: root can unshare directly; others through
# a user namespace; without unshare the demo still runs, just without namespaces.
if [ "$(id -u)" = 0 ] && unshare --pid --fork --mount-proc true 2>/dev/null; then
  NS=(unshare --pid --fork --mount-proc --kill-child)
elif unshare --user --map-root-user --pid --fork --mount-proc true 2>/dev/null; then
  NS=(unshare --user --map-root-user --pid --fork --mount-proc --kill-child)
else
  echo "(unshare not available: running without PID namespaces)"
  NS=()
fi

echo "== starting sidecar 'proxy' (KUBEXIT_DEATH_DEPS=main): serves forever until told to stop"
KUBEXIT_NAME=proxy KUBEXIT_DEATH_DEPS=main KUBEXIT_GRACE_PERIOD=5s \
  "${NS[@]}" "$BIN" -- sh -c '
    trap "echo \"proxy: got SIGTERM, draining connections and exiting\"; exit 0" TERM
    echo "proxy: I am PID $$, my parent (sexton) is PID $PPID"
    while :; do sleep 1 & wait; done' &
PROXY=$!

# wait (bounded) for the proxy to be born before starting main
for _ in $(seq 100); do [ -s "$KUBEXIT_GRAVEYARD/proxy" ] && break; sleep 0.05; done

echo "== starting 'main': does its work and exits 0"
KUBEXIT_NAME=main "${NS[@]}" "$BIN" -- sh -c 'echo "main: working..."; sleep 1; echo "main: done"; exit 0'
echo "== main exited with $?"

set +e
wait "$PROXY"; code=$?
set -e
echo "== proxy exited with $code (0: the pod can succeed)"
echo
echo "== tombstones in the graveyard"
for f in "$KUBEXIT_GRAVEYARD"/*; do
  printf '%-7s %s\n' "$(basename "$f"):" "$(cat "$f")"
done
