#!/usr/bin/env bash
# Prints the path of a kubexit binary, building it if needed. Nothing of kubexit is kept
# in this repository: it is built from its Go module into a cache outside it.
#   KUBEXIT_BIN=/path/to/kubexit   use this binary
#   KUBEXIT_SRC=/path/to/checkout  build from a local checkout of github.com/karlkfi/kubexit
# Otherwise: the cached build, else `go install` from the Go module proxy.
set -euo pipefail
CACHE="${SEXTON_BENCH_CACHE:-$HOME/.cache/sexton-bench}"
VERSION="${KUBEXIT_VERSION:-v0.3.2}"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
LDFLAGS="-s -w"   # as kubexit's own image build: static, stripped

if [ -n "${KUBEXIT_BIN:-}" ]; then echo "$KUBEXIT_BIN"; exit 0; fi
if [ -n "${KUBEXIT_SRC:-}" ]; then
  (cd "$KUBEXIT_SRC" && go mod tidy >&2 && go build -trimpath -ldflags "$LDFLAGS" -o "$CACHE/bin/kubexit" ./cmd/kubexit) >&2
  echo "$CACHE/bin/kubexit"; exit 0
fi
if [ -x "$CACHE/bin/kubexit" ]; then echo "$CACHE/bin/kubexit"; exit 0; fi
mkdir -p "$CACHE/bin"
if GOBIN="$CACHE/bin" go install -trimpath -ldflags "$LDFLAGS" "github.com/karlkfi/kubexit/cmd/kubexit@$VERSION" >&2; then
  echo "$CACHE/bin/kubexit"; exit 0
fi
# A source tree left in the cache by an earlier run (see BENCHMARKS.md, "kubexit").
for src in "$CACHE/src" "$CACHE/kubexit-src"; do
  if [ -f "$src/go.mod" ]; then
    (cd "$src" && go mod tidy >&2 && go build -trimpath -ldflags "$LDFLAGS" -o "$CACHE/bin/kubexit" ./cmd/kubexit) >&2
    echo "$CACHE/bin/kubexit"; exit 0
  fi
done
cat >&2 <<MSG
bench/kubexit.sh: cannot get kubexit: the Go module proxy did not serve
github.com/karlkfi/kubexit@$VERSION. Set KUBEXIT_SRC to a checkout of
github.com/karlkfi/kubexit or KUBEXIT_BIN to a kubexit binary.
MSG
exit 1
