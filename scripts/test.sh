#!/usr/bin/env bash
# Runs every test: unit tests of the pure core, integration tests that run the real
# (static, release) binary as PID 1 of separate PID namespaces, and tests against a real
# kube-apiserver built from Go modules (crates/*/tests). Installs and builds what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
apt_install() {
  if need apt-get; then
    $SUDO apt-get update -qq >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "missing: $* (install it with your package manager)" >&2; exit 1
  fi
}
need cargo || { echo "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }
need unshare || apt_install util-linux
need mkfifo || apt_install coreutils
need setpriv || apt_install util-linux
need python3 || apt_install python3
# bindfs (FUSE) gives a real filesystem on which inotify delivers nothing for writes made
# by other "containers": the failure mode of sandboxes such as gVisor.
need bindfs || apt_install bindfs
need fusermount || need fusermount3 || apt_install fuse3

# The integration tests create PID namespaces: root, or unprivileged user namespaces.
if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
  echo "the integration tests need to create PID namespaces (run as root)" >&2
  exit 1
fi

need openssl || apt_install openssl
need go || { echo "Go >= 1.24 is needed to build the test control plane (testenv/go.mod)" >&2; exit 1; }
# kubectl: the machine's, else one built from the same Kubernetes release
need kubectl || PATH="$(scripts/testenv.sh kubectl-dir):$PATH"

# The chart and the workflows, before the long build. helm and actionlint are built from
# their Go modules on first use (scripts/tools.sh, cached in ~/.cache/sexton-tools);
# actionlint runs shellcheck on the workflows' scripts. The chart's server-side dry runs
# are in crates/kubectl-sexton/tests/chart.rs.
need shellcheck || apt_install shellcheck
HELM="$(scripts/tools.sh helm)"; export HELM
"$HELM" lint --strict charts/sexton
scripts/manifests.sh check              # deploy/ is the chart rendered
"$(scripts/tools.sh actionlint)" .github/workflows/*.yaml

# The test control plane (etcd, kube-apiserver, kube-controller-manager) for tests/api.rs:
# built from Go modules on first use (cached in ~/.cache/sexton-testenv), started on
# 127.0.0.1, and stopped again at the end if this run started it (with the e2e node: a
# failed `down`, such as a containerd shim left behind, fails the run).
# The same for the test registries of tests/registry.rs (scripts/registry.sh: Debian's
# docker-registry and skopeo, installed by `up` if missing).
STOP_TESTENV=0 STOP_REGISTRY=0
scripts/testenv.sh status >/dev/null 2>&1 || STOP_TESTENV=1
scripts/registry.sh status >/dev/null 2>&1 || STOP_REGISTRY=1
# shellcheck disable=SC2154  # rc is assigned by the trap itself
trap 'rc=$?
  if [ $STOP_TESTENV = 1 ]; then scripts/e2e-cluster.sh down || rc=1; scripts/testenv.sh down; fi
  if [ $STOP_REGISTRY = 1 ]; then scripts/registry.sh down || rc=1; fi
  exit $rc' EXIT
scripts/testenv.sh up
scripts/registry.sh up

# The layers (docs/architecture.md): the in-pod binary links none of the cluster side's
# crates, and the pure core nothing that does I/O.
forbidden() { # package, regex of crates it must not depend on
  local found
  found=$(cargo tree -p "$1" -e normal --prefix none | sed 's/ .*//' | grep -E "^($2)\$" | sort -u || true)
  if [ -n "$found" ]; then
    echo "$1 depends on $(echo $found): see docs/architecture.md" >&2; exit 1
  fi
}
forbidden sexton 'kube-runtime|kube-derive|kube-lease-manager|prometheus-client|schemars|axum|tokio-macros'
forbidden sexton-core 'nix|libc|tokio|kube|kube-client|k8s-openapi|hyper|mio|socket2'
forbidden sexton-inject 'nix|libc|tokio|kube|kube-client|k8s-openapi|hyper|mio|socket2|reqwest|oci-client'
forbidden sexton 'sexton-inject'

# The whole workspace: the pure core, the in-pod binary and the cluster-side binary.
cargo build --release --benches   # the benchmark harness must keep compiling
cargo test --release "$@"

# End to end on a real node (scripts/e2e-cluster.sh: containerd, runc, kubelet,
# kube-scheduler; e2e/run.sh: five scenarios with real Jobs). Only for a full run.
if [ $# -eq 0 ]; then
  e2e/run.sh
  # The release, as the workflow makes it, pushed to the local test registry
  # (scripts/release.sh: binaries, SBOM, krew manifest, chart, signed checksums, images).
  scripts/release.sh local
fi
