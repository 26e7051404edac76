# shellcheck shell=bash disable=SC2034
# What every stage needs (every run starts with it); `go` only where the control plane, the
# node or the chart tools are built (the go job).
STAGE_HELP="packages the tests use (apt-get), PID namespaces"
STAGE_NEEDS=""
run() {
  need_cmd cargo || { echo "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }
  local missing=()
  need_cmd unshare || missing+=(util-linux)
  need_cmd mkfifo || missing+=(coreutils)
  need_cmd setpriv || missing+=(util-linux)
  need_cmd python3 || missing+=(python3)
  # bindfs (FUSE) gives a real filesystem on which inotify delivers nothing for writes made
  # by other "containers": the failure mode of sandboxes such as gVisor.
  need_cmd bindfs || missing+=(bindfs)
  need_cmd fusermount || need_cmd fusermount3 || missing+=(fuse3)
  need_cmd openssl || missing+=(openssl)
  need_cmd readelf || missing+=(binutils)
  [ "$MODE" = quick ] || need_cmd shellcheck || missing+=(shellcheck)   # (actionlint runs it)
  [ "$MODE" = quick ] || need_cmd chromium || missing+=(chromium)       # (the docs' screenshot, lint)
  [ "$MODE" = quick ] || [ -x /bin/busybox ] || missing+=(busybox-static)   # (vendors.rs: the stand-in sidecar)
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  # The integration tests create PID namespaces: root, or unprivileged user namespaces.
  if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
    echo "the integration tests need to create PID namespaces (run as root)" >&2
    exit 1
  fi
}
