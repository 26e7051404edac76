#!/usr/bin/env bash
# Prints the path of a kubexit binary, building it if needed. Nothing of kubexit is kept
# in this repository: it is built from its Go module into a cache outside it.
#   KUBEXIT_BIN=/path/to/kubexit   use this binary
#   KUBEXIT_SRC=/path/to/checkout  build from a local checkout of github.com/karlkfi/kubexit
# Otherwise: the cached build, else `go install` from the Go module proxy.
#   SEXTON_BENCH_PEERS=if-built    the cached build or nothing (exit 1): CI's quick benchmarks
#                                  (scripts/test.sh) build no peer (BENCHMARKS.md: what
#                                  each peer's build costs)
#   bench/lib/kubexit.sh image DIR     also builds the image kubexit:e2e (in DIR) and imports it
#                                  into the e2e node's containerd (bench/completion/run.sh,
#                                  bench/deletion/run.sh): the binary at /bin/kubexit and
#                                  busybox's cp, as kubexit's own image (alpine) offers it to
#                                  the init container that copies the binary out. For the
#                                  benchmarks only: scripts/e2e-cluster.sh does not build it.
set -euo pipefail
if [ "${1:-}" = image ]; then
  dir=$2 root="$(cd "$(dirname "$0")/../.." && pwd)"
  # shellcheck source=scripts/lib.sh
  . "$root/scripts/lib.sh"
  bin="$("$0")"
  python3 "$root/e2e/mkimage.py" "$dir/kubexit.tar" kubexit:e2e --entrypoint '["/bin/kubexit"]' \
    --symlink /bin/cp=busybox "$bin:/bin/kubexit" /bin/busybox:/bin/busybox
  timeout 60 "$CONTAINERD_DIR/ctr" --address "$E2E_STATE/containerd.sock" -n k8s.io images import "$dir/kubexit.tar" >/dev/null
  exit 0
fi
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
if [ "${SEXTON_BENCH_PEERS:-build}" = if-built ]; then
  echo "bench/lib/kubexit.sh: kubexit not built before, and SEXTON_BENCH_PEERS=if-built builds no peer" >&2
  exit 1
fi
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
bench/lib/kubexit.sh: cannot get kubexit: the Go module proxy did not serve
github.com/karlkfi/kubexit@$VERSION. Set KUBEXIT_SRC to a checkout of
github.com/karlkfi/kubexit or KUBEXIT_BIN to a kubexit binary.
MSG
exit 1
