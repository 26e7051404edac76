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
need readelf || apt_install binutils

# timed NAME CMD...: runs CMD, adding its minutes to the summary printed at the end.
TIMES=""
timed() {
  local name=$1 t0=$SECONDS; shift
  "$@"
  TIMES="$TIMES $name $(( (SECONDS - t0 + 30) / 60 ))"
}

# The supervisor's integration tests under emulation: all of them (api, faults_*, resilience,
# supervisor; 68 tests) but five that observe what qemu-user changes, not sexton:
#  - huge_file_at_tombstone_path_is_not_read_whole measures sexton's peak RSS: qemu's;
#  - child_killed_by_realtime_signal_exits_128_plus_n_with_the_signal_named and
#    realtime_stop_signal_during_birth_wait_ends_without_starting_the_child: qemu-user keeps
#    host realtime signals for itself and renumbers the guest's (a native child killed by
#    signal 34 is reported to sexton as 32);
#  - sigterm_while_waiting_for_own_lock_ends_without_starting_the_child watches sexton's
#    /proc/PID/exe and signal mask: the emulator's;
#  - orphans_are_reaped_as_pid1_and_as_subreaper: qemu-user 7.2 refuses
#    PR_SET_CHILD_SUBREAPER (EINVAL), so sexton cannot reap as a non-PID-1 subreaper there.
# The names are unique in the workspace, so the test binaries of the run above are reused.
ARM64_TESTS=(--test supervisor --test faults_process --test faults_graveyard --test faults_extra --test resilience --test api)
ARM64_SKIP=(--skip huge_file_at_tombstone_path_is_not_read_whole --skip child_killed_by_realtime_signal_exits_128_plus_n_with_the_signal_named --skip realtime_stop_signal_during_birth_wait_ends_without_starting_the_child --skip sigterm_while_waiting_for_own_lock_ends_without_starting_the_child --skip orphans_are_reaped_as_pid1_and_as_subreaper)
# An aarch64 binary executed on another machine runs under qemu-aarch64-static: Debian's
# qemu-user-static registers it with binfmt_misc (flag F: the interpreter is opened at
# registration, so it also runs in other mount namespaces, unshare --mount-proc's).
arm64_emulation() {
  [ "$(uname -m)" != aarch64 ] || return 0
  need qemu-aarch64-static || apt_install qemu-user-static
  local bm=/proc/sys/fs/binfmt_misc
  [ -e "$bm/register" ] || mount -t binfmt_misc binfmt_misc "$bm" \
    || { echo "binfmt_misc cannot be mounted: the arm64 tests need it (qemu-user-static)" >&2; exit 1; }
  if [ ! -e "$bm/qemu-aarch64" ]; then
    cat /usr/lib/binfmt.d/qemu-aarch64.conf > "$bm/register" \
      || { echo "cannot register qemu-aarch64 with binfmt_misc" >&2; exit 1; }
  fi
  grep -q '^flags: .*F' "$bm/qemu-aarch64" \
    || { echo "$bm/qemu-aarch64 lacks flag F: the arm64 binary would not run in the tests' mount namespaces" >&2; exit 1; }
}
need go || { echo "Go >= 1.24 is needed to build the test control plane (testenv/go.mod)" >&2; exit 1; }
# kubectl: the machine's, else one built from the same Kubernetes release
need kubectl || PATH="$(scripts/testenv.sh kubectl-dir):$PATH"

need shellcheck || apt_install shellcheck   # (actionlint runs it on the workflows' scripts)

# Background builds. bg NAME NICENESS CMD...: runs CMD in a session of its own (so that the
# EXIT trap stops it with its children), its output in $TMPDIR/sexton-test-NAME.log;
# wait_bg NAME: waits for it, and on failure shows its output and fails the run.
declare -A BG=()
bg() {
  local name=$1 n=$2; shift 2
  setsid nice -n "$n" "$@" >"${TMPDIR:-/tmp}/sexton-test-$name.log" 2>&1 </dev/null &
  BG[$name]=$!
}
wait_bg() {
  wait "${BG[$1]}" && return 0
  cat "${TMPDIR:-/tmp}/sexton-test-$1.log" >&2
  echo "test.sh: the background build '$1' failed (output above)" >&2; exit 1
}

# The test control plane (etcd, kube-apiserver, kube-controller-manager) for the tests
# against the API server, and on a full run the e2e node's kubelet and kube-scheduler, are
# built from Go modules on first use (scripts/testenv.sh, cached in ~/.cache/sexton-testenv),
# as are helm and actionlint (scripts/tools.sh, ~/.cache/sexton-tools): on a new machine
# ~20 minutes of builds, which run in the background while the Rust binaries build. The
# release profile's LTO keeps one core busy for minutes at a time and leaves the other
# idle; one after the other, the two took over half of a cold run.
# The control plane is started on 127.0.0.1 after them, and stopped again at the end if
# this run started it (with the e2e node: a failed `down`, such as a containerd shim left
# behind, fails the run). The same for the test registries of tests/registry.rs
# (scripts/registry.sh: Debian's docker-registry and skopeo, installed by `up` if missing).
STOP_TESTENV=0 STOP_REGISTRY=0
scripts/testenv.sh status >/dev/null 2>&1 || STOP_TESTENV=1
scripts/registry.sh status >/dev/null 2>&1 || STOP_REGISTRY=1
# shellcheck disable=SC2154  # rc is assigned by the trap itself
trap 'rc=$?
  for pid in "${BG[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
  if [ $STOP_TESTENV = 1 ]; then scripts/e2e-cluster.sh down || rc=1; scripts/testenv.sh down; fi
  if [ $STOP_REGISTRY = 1 ]; then scripts/registry.sh down || rc=1; fi
  exit $rc' EXIT
NODE_BINARIES=(true); [ $# -gt 0 ] || NODE_BINARIES=(scripts/testenv.sh build kubelet kube-scheduler)
# shellcheck disable=SC2016  # (expanded by the inner shell)
bg go-builds 10 bash -c 'set -e; scripts/tools.sh helm; scripts/tools.sh actionlint
  scripts/testenv.sh build; scripts/testenv.sh old-webhook; "$@"' _ "${NODE_BINARIES[@]}"

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

# The images that ship (scripts/images.sh): the static binaries for linux/amd64 and
# linux/arm64 (cross-compiled), the three multi-platform OCI images built from them, and the
# check that they are what the Dockerfile describes. The e2e node runs these images.
timed images scripts/images.sh

# The whole workspace: the pure core, the in-pod binary and the cluster-side binary.
# (profile release-test: the release build without LTO, Cargo.toml says why)
timed build cargo build --profile release-test --benches   # the harness must keep compiling
timed go-builds wait_bg go-builds   # (usually done by now)

# The chart and the workflows. The chart's server-side dry runs are in
# crates/kubectl-sexton/tests/chart.rs.
HELM="$(scripts/tools.sh helm)"; export HELM
"$HELM" lint --strict charts/sexton
scripts/manifests.sh check              # deploy/ is the chart rendered
"$(scripts/tools.sh actionlint)" .github/workflows/*.yaml

scripts/testenv.sh up
scripts/registry.sh up

# The release step's tools (cosign, cargo-cyclonedx, krew: ~13 minutes of builds when not
# cached) are built ahead, in the background at the lowest priority: the tests leave a core
# idle much of the time. scripts/tools.sh's lock makes the release step wait for a build
# still under way rather than start a second one. Only for a full run.
if [ $# -eq 0 ]; then
  # shellcheck disable=SC2016  # (expanded by the inner shell)
  bg release-tools 19 bash -c 'for t in cosign cargo-cyclonedx krew; do scripts/tools.sh "$t" || true; done'
fi
timed test cargo test --profile release-test "$@"

# The in-pod binary for arm64, emulated: the supervisor's integration tests again, each
# container now the arm64 build (SEXTON_TEST_BIN), which the kernel hands to
# qemu-aarch64-static (binfmt_misc; registered here if the machine has none). The test
# harness stays native. Only for a full run.
if [ $# -eq 0 ]; then
  arm64_emulation
  SEXTON_TEST_BIN="$PWD/target/images/bin/linux-arm64/sexton" \
    timed arm64 cargo test --profile release-test "${ARM64_TESTS[@]}" -- --exact "${ARM64_SKIP[@]}"
fi

# End to end on a real node (scripts/e2e-cluster.sh: containerd, runc, kubelet,
# kube-scheduler, the images of scripts/images.sh; e2e/run.sh: the scenarios with real
# Jobs). Only for a full run.
if [ $# -eq 0 ]; then
  timed e2e e2e/run.sh
  # The release, as the workflow makes it, pushed to the local test registry
  # (scripts/release.sh: binaries, SBOM, krew manifest, chart, signed checksums, images).
  timed release scripts/release.sh local
fi
echo "test.sh: minutes per step:${TIMES}"
