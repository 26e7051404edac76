#!/usr/bin/env bash
# Runs every test: unit tests of the pure core and integration tests that run the real
# (static, release) binary as PID 1 of separate PID namespaces. Installs what it needs.
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

cargo test --release --all-targets "$@"
