#!/usr/bin/env bash
# The release and chart tools, built from their own sources at pinned versions (Go modules
# from the module proxy, a crate from crates.io) and cached outside the repository, as
# scripts/testenv.sh does for the control plane. Prints the path of the binary.
#
#   scripts/tools.sh helm              helm (charts/sexton: lint, template)
#   scripts/tools.sh actionlint        actionlint (.github/workflows)
#   scripts/tools.sh cosign            cosign (signs SHA256SUMS in scripts/release.sh)
#   scripts/tools.sh cargo-cyclonedx   cargo-cyclonedx (the SBOM in scripts/release.sh)
#   scripts/tools.sh krew              krew (installs the plugin manifest in scripts/release.sh)
#   scripts/tools.sh mdbook            mdbook (the documentation site, docs/)
#   scripts/tools.sh cargo-zigbuild    cargo-zigbuild and zig (PyPI: cargo-zigbuild, ziglang),
#                                      the desktop plugin's cross-linker (scripts/desktop.sh)
#   scripts/tools.sh versions          the pinned versions, one `name version` a line
#   scripts/tools.sh NAME --cached     the path only if NAME is built already, else exit 1
#                                      (the tests ask so, to fail fast rather than build)
#
# Each binary goes to $SEXTON_TOOLS_CACHE/NAME-VERSION/NAME (default ~/.cache/sexton-tools),
# built once: a new version is a new directory. The Go modules have no `replace`
# directives, so `go install MODULE/cmd/NAME@VERSION` builds them with their own go.mod and
# go.sum, checked against the checksum database.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
LIB_NAME=tools

ACTIONLINT_VERSION=v1.7.12
COSIGN_VERSION=v3.1.3
CYCLONEDX_VERSION=0.5.9
KREW_VERSION=v0.4.3
MDBOOK_VERSION=0.5.4
ZIGBUILD_VERSION=0.24.1
ZIGLANG_VERSION=0.17.1

TOOLS="${SEXTON_TOOLS_CACHE:-$HOME/.cache/sexton-tools}"

# wait_for_other_build NAME: holds NAME's lock until this script exits, so that a build of
# it under way elsewhere (scripts/test.sh builds the release tools ahead, in the background)
# is waited for instead of run twice into the same directory.
wait_for_other_build() {
  mkdir -p "$TOOLS"
  exec 9>"$TOOLS/.$1.lock"
  flock -w 1800 9 || die "another build of $1 has held $TOOLS/.$1.lock for 30 minutes"
}

# cached_or_built NAME BIN BUILD...: prints BIN, after running BUILD... under NAME's lock
# unless BIN exists (with --cached: exit 1 instead of building).
cached_or_built() {
  local name=$1 bin=$2; shift 2
  if [ "$CACHED_ONLY" = 1 ]; then
    [ -x "$bin" ] || exit 1
    echo "$bin"; return
  fi
  wait_for_other_build "$name"
  if [ ! -x "$bin" ]; then
    local start=$SECONDS
    "$@"
    log "built $name in $((SECONDS - start))s"
  fi
  echo "$bin"
}

# go_tool NAME PACKAGE@VERSION [LDFLAGS]: builds NAME unless cached, prints its path.
go_tool() {
  local name=$1 pkg=$2 ldflags="-s -w ${3:-}"
  local dir="$TOOLS/$name-${pkg##*@}"
  cached_or_built "$name" "$dir/$name" go_build "$name" "$pkg" "$ldflags" "$dir"
}
go_build() { # NAME PACKAGE@VERSION LDFLAGS DIR
  local name=$1 pkg=$2 ldflags=$3 dir=$4
  command -v go >/dev/null || die "go is needed to build $name (Go >= 1.26: $pkg)"
  log "building $pkg into $dir"
  mkdir -p "$dir"
  GOBIN="$dir/.tmp" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go install -trimpath -gcflags "$GO_GCFLAGS" -ldflags "$ldflags" "$pkg" >&2 || die "building $pkg failed"
  mv "$dir/.tmp/$name" "$dir/$name"
  rmdir "$dir/.tmp"
}

# cargo_tool NAME VERSION CARGO-INSTALL-FLAGS...: installs crate NAME unless cached, prints
# its path.
cargo_tool() {
  local name=$1 version=$2; shift 2
  local dir="$TOOLS/$name-$version"
  cached_or_built "$name" "$dir/bin/$name" cargo_build "$name" "$version" "$dir" "$@"
}
cargo_build() { # NAME VERSION DIR CARGO-INSTALL-FLAGS...
  local name=$1 version=$2 dir=$3; shift 3
  log "building $name $version into $dir"
  # (from outside the repository: its .cargo/config.toml is not for these crates)
  mkdir -p "$dir" && cd "$dir"
  # (no debug information in the --debug builds: nobody debugs these, and it was a fifth of
  # mdbook's build: CONTRIBUTING.md, where a cold run's time goes)
  CARGO_PROFILE_DEV_DEBUG=0 nice -n 10 cargo install --quiet --locked --root "$dir" --version "$version" "$@" "$name" >&2 \
    || die "building $name failed"
}

# pip_tool NAME VERSION PACKAGE==VERSION...: NAME from PyPI's wheels (prebuilt binaries, as
# these two ship) into a virtual environment of its own unless cached, prints its path.
pip_tool() {
  local name=$1 version=$2; shift 2
  local dir="$TOOLS/$name-$version"
  cached_or_built "$name" "$dir/bin/$name" pip_build "$dir" "$@"
}
pip_build() { # DIR PACKAGE==VERSION...
  local dir=$1; shift
  log "installing $* into $dir"
  rm -rf "$dir"
  python3 -m venv "$dir" && "$dir/bin/pip" install --quiet --disable-pip-version-check "$@" >&2 \
    || die "installing $* failed"
}

CACHED_ONLY=0; [ "${2:-}" != --cached ] || CACHED_ONLY=1
case "${1:-}" in
  helm)
    # Built with the test control plane, from testenv/go.mod (whose version it is: lib.sh's
    # HELM_VERSION): helm v4.0 is built on Kubernetes 1.34's client libraries, as the plane
    # is, so one go build compiles the ~600 packages they share once (client-go, api,
    # apimachinery, kubectl, kustomize) instead of twice. Later helm 4 releases moved to
    # newer Kubernetes libraries, which the plane's 1.34 cannot share.
    exec "$(dirname "$0")/testenv.sh" helm ${2:+"$2"} ;;
  actionlint)
    go_tool actionlint "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" \
      "-X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION" ;;
  cosign)
    go_tool cosign "github.com/sigstore/cosign/v3/cmd/cosign@$COSIGN_VERSION" \
      "-X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION" ;;
  krew)
    go_tool krew "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" \
      "-X sigs.k8s.io/krew/internal/version.gitTag=$KREW_VERSION" ;;
  cargo-cyclonedx)
    # --debug: it reads `cargo metadata` once per release, in well under a second even
    # unoptimised, and its build takes half the CPU of an optimised one (a cold CI run is
    # CPU-bound).
    cargo_tool cargo-cyclonedx "$CYCLONEDX_VERSION" --debug ;;
  mdbook)
    # Without default features: no `serve` (tokio, axum) and no `watch` (notify), which the
    # build of docs/ does not use, and no search index (a page per concern needs none).
    # --debug, as cargo-cyclonedx: unoptimised it still builds docs/ in about a second.
    cargo_tool mdbook "$MDBOOK_VERSION" --no-default-features --debug ;;
  cargo-zigbuild)
    # (zig, from the ziglang wheel, is found by cargo-zigbuild as `python3 -m ziglang`: the
    # environment's bin/ must come first on the PATH, as scripts/desktop.sh puts it)
    pip_tool cargo-zigbuild "$ZIGBUILD_VERSION" "cargo-zigbuild==$ZIGBUILD_VERSION" "ziglang==$ZIGLANG_VERSION" ;;
  versions)
    printf '%s %s\n' helm "$HELM_VERSION" actionlint "$ACTIONLINT_VERSION" \
      cosign "$COSIGN_VERSION" cargo-cyclonedx "$CYCLONEDX_VERSION" krew "$KREW_VERSION" \
      mdbook "$MDBOOK_VERSION" cargo-zigbuild "$ZIGBUILD_VERSION" ziglang "$ZIGLANG_VERSION" ;;
  *) echo "usage: $0 helm|actionlint|cosign|cargo-cyclonedx|krew|mdbook|cargo-zigbuild|versions" >&2; exit 2 ;;
esac
