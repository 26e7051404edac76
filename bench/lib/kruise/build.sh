#!/usr/bin/env bash
# Builds OpenKruise's manager (kruise-manager, the process that runs its SidecarTerminator)
# from its Go module, for the anchor of bench/scale/run.sh and strategy g of
# bench/completion/run.sh (bench/lib/kruise.sh installs what it needs and starts it). Prints
# the binary's path.
#
# kruise's go.mod has `replace` directives (every k8s.io staging module pinned), which
# `go install module@version` refuses, and which apply only in the main module. So the
# main module here is this directory's go.mod: it requires github.com/openkruise/kruise
# and repeats kruise's replace block; `go build github.com/openkruise/kruise` then builds
# its `package main` (main.go at its root). Its go.sum is kruise's own, copied from the
# module cache at build time: the checksum database behind this machine's module proxy
# answers 404 for some of kruise's dependencies (k8s.io/cri-api v0.30.10), whose hashes
# kruise's go.sum has. Nothing of kruise is kept in this repository.
#
# Settings: SEXTON_BENCH_PEERS=if-built: only a binary built before, else exit 1 (CI's quick
# benchmarks, scripts/test.sh: the cold build takes minutes, BENCHMARKS.md). SEXTON_BENCH_CACHE (default ~/.cache/sexton-bench): the binary goes to
# $SEXTON_BENCH_CACHE/kruise/kruise-manager-v1.8.2, the build log beside it.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
VERSION="$("$HERE/../kruise.sh" version)"   # go.mod's: its replace block is this release's
OUT="${SEXTON_BENCH_CACHE:-$HOME/.cache/sexton-bench}/kruise"
BIN="$OUT/kruise-manager-$VERSION"
LOG="$OUT/build-$VERSION.log"

# bench/lib/kruise.sh applies the release's CRDs from the module cache: a binary built before a
# cache was emptied (~/go removed) found none, and the benchmark failed. The module comes
# back with a download of seconds, not a build; if it cannot, there is no anchor.
crds() { [ -d "$(go env GOMODCACHE)/github.com/openkruise/kruise@$VERSION/config/crd/bases" ]; }
if [ -x "$BIN" ]; then
  if ! crds && ! (GOTOOLCHAIN=local go mod download "github.com/openkruise/kruise@$VERSION" >>"$LOG" 2>&1 && crds); then
    echo "kruise: $BIN is built, but its CRDs cannot be had (go mod download github.com/openkruise/kruise@$VERSION, see $LOG)" >&2
    exit 1
  fi
  echo "$BIN"
  exit 0
fi
if [ "${SEXTON_BENCH_PEERS:-build}" = if-built ]; then
  echo "kruise: not built before, and SEXTON_BENCH_PEERS=if-built builds no peer" >&2
  exit 1
fi
command -v go >/dev/null || { echo "kruise: go is not installed" >&2; exit 1; }
mkdir -p "$OUT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$HERE/go.mod" "$work/go.mod"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 GONOSUMDB=k8s.io/cri-api
start=$SECONDS
{
  cd "$work"
  go mod download "github.com/openkruise/kruise@$VERSION"
  src="$(go env GOMODCACHE)/github.com/openkruise/kruise@$VERSION"
  cp "$src/go.sum" go.sum
  chmod u+w go.sum
  echo "building kruise-manager $VERSION (cold: ~7 min on 2 cores)"
  go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" github.com/openkruise/kruise
} >"$LOG" 2>&1 || { echo "kruise: build failed, see $LOG:" >&2; tail -5 "$LOG" >&2; exit 1; }
mv "$BIN.tmp" "$BIN"
echo "kruise: built in $((SECONDS - start)) s" >&2
echo "$BIN"
