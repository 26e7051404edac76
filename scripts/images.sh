#!/usr/bin/env bash
# Builds the images sexton ships, without a Docker engine: the static binaries for
# linux/amd64 and linux/arm64 (cross-compiled, .cargo/config.toml), then one multi-platform
# OCI index per image with Debian's buildah (FROM scratch, no RUN, so no container runtime),
# each in an OCI image layout under target/images/<name>/:
#   sexton             :VERSION        the in-pod binary at /sexton, ENTRYPOINT ["/sexton"]
#                      :VERSION-slim   the same built --no-default-features (no API client)
#   sexton-quick-exit  :VERSION        the slim binary, USER 65532:65532,
#                                      ENTRYPOINT ["/sexton", "quick-exit"]
#   kubectl-sexton     :VERSION        the cluster-side binary at /kubectl-sexton, USER
#                                      65532:65532, ENTRYPOINT ["/kubectl-sexton"] (args
#                                      ["controller", ...] or ["webhook", ...])
# VERSION is the workspace's (Cargo.toml); they ship as ghcr.io/sexton-dev/<name>:<tag>, e.g.
#   skopeo copy --all oci:target/images/sexton:0.1.0 docker://ghcr.io/sexton-dev/sexton:0.1.0
# The binaries stay in target/images/bin/linux-{amd64,arm64}/ (sexton, sexton-slim,
# kubectl-sexton). Each is checked to be static (no PT_INTERP) for its machine and to run
# (arm64 under qemu-aarch64-static); the images are then checked against the Dockerfile's
# stages of the same names (scripts/check-images.py: entrypoint, cmd, user, ports, labels,
# and that the one layer holds exactly the binary just built for that platform).
# Reproducible: the images' creation time and file times are the commit's time, so the same
# commit and binaries give the same digests.
#
#   scripts/images.sh            build everything, then check
#   scripts/images.sh binaries   only the binaries (both families, checked)
#   scripts/images.sh in-pod     only sexton and sexton-slim (not checked)
#   scripts/images.sh cluster    only kubectl-sexton (not checked)
#   scripts/images.sh package    the images from the binaries built, then check
#   scripts/images.sh tools      only install what it needs
#   scripts/images.sh check      only the check (of what is in target/images)
#   scripts/images.sh refs       one line per image: LAYOUT-DIR TAG SHIPPED-REFERENCE DIGEST
#
# Settings (environment): SEXTON_IMAGE_REPO (default ghcr.io/sexton-dev). Needs root (or
# rootless buildah); installs buildah, skopeo, the cross compiler and qemu-user-static when
# missing (apt). buildah's storage: ~/.cache/sexton-images (vfs, emptied after each build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh    # (build_workspace, log, die)
LIB_NAME=images.sh
ROOT=$PWD
OUT="$ROOT/target/images"
REPO=${SEXTON_IMAGE_REPO:-ghcr.io/sexton-dev}
SOURCE=https://github.com/sexton-dev/sexton
LICENSE=Apache-2.0
VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$VERSION" ] || { echo "images.sh: no version in Cargo.toml's [workspace.package]" >&2; exit 1; }
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
CREATED=$(git log -1 --format=%ct 2>/dev/null || echo 0)
# platform (OCI architecture) and Rust target
PLATFORMS=(amd64:x86_64-unknown-linux-gnu arm64:aarch64-unknown-linux-gnu)
STORE="${XDG_CACHE_HOME:-$HOME/.cache}/sexton-images"


need_tools() {
  local missing=()
  command -v buildah >/dev/null || missing+=(buildah)
  command -v skopeo >/dev/null || missing+=(skopeo)
  command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
  command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
  command -v readelf >/dev/null || missing+=(binutils)
  command -v python3 >/dev/null || missing+=(python3)
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing: ${missing[*]} (install them, or run as root)"
    apt_install "${missing[@]}"
  fi
  local t
  for p in "${PLATFORMS[@]}"; do
    t=${p#*:}
    rustup target list --installed 2>/dev/null | grep -qx "$t" || rustup target add "$t" >&2 \
      || die "no Rust standard library for $t (rustup target add $t)"
  done
}

# run ARCH BINARY ARGS...: the binary, under qemu-aarch64-static where the machine is not
# arm64 (with or without a binfmt_misc handler).
run() {
  local arch=$1; shift
  if [ "$arch" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then
    qemu-aarch64-static "$@"
  else
    "$@"
  fi
}

# static_for ARCH FILE: FILE is an ELF executable for ARCH's machine with no program
# interpreter (static; static-pie included).
static_for() {
  local want machine
  case $1 in amd64) want="Advanced Micro Devices X86-64" ;; arm64) want=AArch64 ;; esac
  machine=$(LC_ALL=C readelf -h "$2" | sed -n 's/^ *Machine: *//p')
  [ "$machine" = "$want" ] || die "$2: built for '$machine', not $1"
  if LC_ALL=C readelf -l "$2" | grep -q 'INTERP'; then
    die "$2 is dynamically linked ($(LC_ALL=C readelf -l "$2" | grep -o 'interpreter: [^]]*')): the images and \`sexton install\` need a static binary"
  fi
}

# The in-pod binary, its slim variant and kubectl-sexton for both platforms:
# - sexton and sexton-slim from profile release (LTO), each built alone (-p): a workspace
#   build would unify features and give the in-pod binary some of the cluster side's
#   (Cargo.toml). Both platforms in one cargo, so that one's single-threaded LTO link runs
#   while the other compiles.
# - kubectl-sexton from profile release-nolto (Cargo.toml says why): for linux/amd64 the
#   workspace build the tests run (lib.sh build_workspace), so the tests test the shipped
#   binary; for linux/arm64 built alone.
# The two families are separate steps (in-pod, cluster) so that scripts/test.sh can build
# the first in the background while the tests run: profile release takes cargo's lock of
# target/release, the tests that of target/release-nolto.
in_pod_binaries() {
  local p targets=()
  for p in "${PLATFORMS[@]}"; do targets+=(--target "${p#*:}"); done
  log "building sexton and sexton-slim for ${PLATFORMS[*]%%:*}"
  cargo build --release --locked "${targets[@]}" -p sexton
  copy_each release sexton sexton
  cargo build --release --locked "${targets[@]}" -p sexton --no-default-features
  copy_each release sexton sexton-slim
}

cluster_binaries() {
  log "building kubectl-sexton (linux/amd64: the tests' workspace build; linux/arm64 alone)"
  build_workspace    # (x86_64-unknown-linux-gnu: .cargo/config.toml's default target)
  cargo build --profile release-nolto --locked --target aarch64-unknown-linux-gnu -p kubectl-sexton
  copy_each release-nolto kubectl-sexton kubectl-sexton
}

# Each binary is static for its machine and runs (arm64: emulated); quick-exit ignores
# whatever arguments it gets.
verify_binaries() {
  local p arch dir b
  for p in "${PLATFORMS[@]}"; do
    arch=${p%%:*} dir="$OUT/bin/linux-$arch"
    for b in sexton sexton-slim kubectl-sexton; do
      [ -x "$dir/$b" ] || die "$dir/$b was not built"
      static_for "$arch" "$dir/$b"
    done
    run "$arch" "$dir/sexton" --version >/dev/null || die "$dir/sexton --version failed"
    run "$arch" "$dir/sexton-slim" quick-exit --any args 2>/dev/null || die "$dir/sexton-slim quick-exit failed"
    run "$arch" "$dir/kubectl-sexton" --version >/dev/null || die "$dir/kubectl-sexton --version failed"
  done
}

# copy_each PROFILE BINARY NAME: target/<triple>/PROFILE/BINARY of each platform to
# bin/linux-<arch>/NAME, by a rename: the file may be running (the full run's background
# benchmarks run bin/linux-amd64/sexton-slim while the quick start's publish builds again),
# and a copy onto a running binary fails with "Text file busy"; a rename leaves the running
# process its old file.
copy_each() {
  local p dir
  for p in "${PLATFORMS[@]}"; do
    dir="$OUT/bin/linux-${p%%:*}"
    mkdir -p "$dir"
    cp "$ROOT/target/${p#*:}/$1/$2" "$dir/.$3.tmp.$$"
    mv -f "$dir/.$3.tmp.$$" "$dir/$3"
  done
}

B=(buildah --root "$STORE/storage" --runroot "$STORE/run" --storage-driver vfs)

# labels TITLE DESCRIPTION: the --label arguments every image gets (the Dockerfile's
# `labelled` stage, plus the image's own title and description).
labels() {
  printf -- '--label\0%s\0' \
    "org.opencontainers.image.source=$SOURCE" \
    "org.opencontainers.image.version=$VERSION" \
    "org.opencontainers.image.revision=$REVISION" \
    "org.opencontainers.image.licenses=$LICENSE" \
    "org.opencontainers.image.vendor=sexton" \
    "org.opencontainers.image.title=$1" \
    "org.opencontainers.image.description=$2"
}

# image NAME TAG BINARY DEST TITLE DESCRIPTION [buildah config args...]: NAME:TAG in
# target/images/NAME, one image per platform with BINARY (of bin/linux-ARCH) at DEST.
image() {
  local name=$1 tag=$2 bin=$3 dest=$4 title=$5 desc=$6; shift 6
  local list="sexton-images/$name:$tag" p arch c lab=()
  mapfile -d '' lab < <(labels "$title" "$desc")
  "${B[@]}" manifest rm "$list" >/dev/null 2>&1 || true
  for p in "${PLATFORMS[@]}"; do
    arch=${p%%:*}
    c=$("${B[@]}" from --arch "$arch" --os linux scratch)
    "${B[@]}" copy --chmod 0755 "$c" "$OUT/bin/linux-$arch/$bin" "$dest" >/dev/null
    "${B[@]}" config --arch "$arch" --os linux --created-by "scripts/images.sh" "${lab[@]}" "$@" "$c"
    "${B[@]}" commit --quiet --format oci --identity-label=false --timestamp "$CREATED" --manifest "$list" "$c" >/dev/null
    "${B[@]}" rm "$c" >/dev/null
  done
  mkdir -p "$OUT/$name"
  "${B[@]}" manifest push --quiet --all --format oci "$list" "oci:$OUT/$name:$tag"
  "${B[@]}" manifest rm "$list" >/dev/null
  log "built $REPO/$name:$tag (linux/amd64, linux/arm64) in target/images/$name"
}

images() {
  rm -rf "$STORE" "$OUT/sexton" "$OUT/sexton-quick-exit" "$OUT/kubectl-sexton"
  mkdir -p "$STORE"
  image sexton "$VERSION" sexton /sexton sexton \
    "sexton, the in-pod supervisor of sidecar lifecycles" \
    --entrypoint '["/sexton"]'
  image sexton "$VERSION-slim" sexton-slim /sexton sexton \
    "sexton, the in-pod supervisor (slim: tombstones only, no Kubernetes API client)" \
    --entrypoint '["/sexton"]'
  image sexton-quick-exit "$VERSION" sexton-slim /sexton sexton-quick-exit \
    "sexton quick-exit: the SidecarTerminator's replacement image, exits 0 whatever its arguments" \
    --user 65532:65532 --entrypoint '["/sexton", "quick-exit"]'
  image kubectl-sexton "$VERSION" kubectl-sexton /kubectl-sexton kubectl-sexton \
    "kubectl-sexton: sexton's controllers and admission webhook" \
    --user 65532:65532 --port 8080/tcp --port 8081/tcp --port 8443/tcp --entrypoint '["/kubectl-sexton"]'
  rm -rf "$STORE"
}

check() {
  python3 "$ROOT/scripts/check-images.py" --dockerfile "$ROOT/Dockerfile" --images "$OUT" \
    --version "$VERSION" --revision "$REVISION" \
    sexton:"$VERSION"=sexton sexton:"$VERSION-slim"=sexton-slim \
    sexton-quick-exit:"$VERSION"=sexton-quick-exit kubectl-sexton:"$VERSION"=kubectl-sexton
}

# One line per image: its layout, tag, shipped reference and digest (of the multi-platform
# index; "-" if not built).
refs() {
  local r dir digest
  for r in sexton:"$VERSION" sexton:"$VERSION-slim" sexton-quick-exit:"$VERSION" kubectl-sexton:"$VERSION"; do
    dir="$OUT/${r%%:*}" digest=-
    if [ -f "$dir/index.json" ]; then
      digest=$(python3 -c 'import json, sys
print(next((m["digest"] for m in json.load(open(sys.argv[1]))["manifests"]
            if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == sys.argv[2]), "-"))' "$dir/index.json" "${r#*:}")
    fi
    echo "$dir ${r#*:} $REPO/$r $digest"
  done
}

case "${1:-build}" in
  build) need_tools; in_pod_binaries; cluster_binaries; verify_binaries; images; check ;;
  binaries) need_tools; in_pod_binaries; cluster_binaries; verify_binaries ;;
  in-pod) need_tools; in_pod_binaries ;;
  cluster) need_tools; cluster_binaries ;;
  package) need_tools; verify_binaries; images; check ;;
  tools) need_tools ;;
  check) check ;;
  refs) refs ;;
  *) echo "usage: $0 [build|binaries|in-pod|cluster|package|tools|check|refs]" >&2; exit 2 ;;
esac
