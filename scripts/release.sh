#!/usr/bin/env bash
# A release of sexton, step by step: .github/workflows/release.yaml runs these steps on a tag,
# and every one of them runs here too (`local`, in scripts/test.sh), against the test
# registry instead of ghcr.io and with a throwaway key instead of the workflow's identity.
#
#   scripts/release.sh binaries     static binaries for linux/amd64 and linux/arm64
#                                   (scripts/images.sh binaries) and the plugin for macOS
#                                   amd64/arm64 and Windows amd64 (scripts/desktop.sh build),
#                                   archived into dist/ (.tar.gz; Windows .zip)
#   scripts/release.sh sbom         dist/sexton_vVERSION.cdx.json: CycloneDX SBOM of the shipped
#                                   crates and everything they link (cargo-cyclonedx)
#   scripts/release.sh krew         dist/sexton.yaml: the krew manifest of `kubectl sexton`,
#                                   all five platforms, with the archives' sha256
#   scripts/release.sh chart        dist/sexton-VERSION.tgz: the Helm chart, packaged
#   scripts/release.sh checksums    dist/SHA256SUMS of every file above
#   scripts/release.sh sign         dist/SHA256SUMS.sigstore.json (cosign sign-blob, a bundle)
#   scripts/release.sh verify       the bundle checked against SHA256SUMS, and SHA256SUMS
#                                   against the files
#   scripts/release.sh images       the OCI images of target/images (scripts/images.sh)
#   scripts/release.sh push REPO    the images, every platform (skopeo copy --all), as
#                                   REPO/NAME:TAG, and the chart as oci://REPO/charts/sexton
#   scripts/release.sh local        all of it, pushed to 127.0.0.1:15000 (scripts/registry.sh)
#                                   and signed with a key made for the run; then pulled back
#                                   and compared
#
# Signing (SEXTON_SIGN): `keyless` in the workflow, with its OIDC identity (Fulcio
# certificate, Rekor transparency log entry), verified with
#   cosign verify-blob --bundle SHA256SUMS.sigstore.json \
#     --certificate-identity-regexp '^https://github.com/sexton-dev/sexton/\.github/workflows/release\.yaml@refs/tags/v' \
#     --certificate-oidc-issuer https://token.actions.githubusercontent.com SHA256SUMS
# or `key` (the default) with the key pair COSIGN_KEY / COSIGN_PUB (password in
# COSIGN_PASSWORD), no transparency log: what runs here.
#
# Settings: DIST (default dist/), COSIGN, CARGO_CYCLONEDX, HELM (default: scripts/tools.sh
# builds them), SEXTON_IMAGE_REPO (the images' repository in refs, default ghcr.io/sexton-dev).
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
LIB_NAME=release
cd "$ROOT"

VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$VERSION" ] || die "no version in Cargo.toml's [workspace.package]"
TAG="v$VERSION"
DIST="${DIST:-$ROOT/dist}"
GITHUB_REPO=sexton-dev/sexton
DOWNLOAD="https://github.com/$GITHUB_REPO/releases/download/$TAG"
ARCHES=(amd64 arm64)
# the plugin's platforms: OS-ARCH (the directory under target/images/bin)
# (SEXTON_DESKTOP_PLATFORMS: the desktop ones, scripts/desktop.sh; a release and
# scripts/test.sh's rehearsal have all three)
read -r -a DESKTOP_PLATFORMS <<<"${SEXTON_DESKTOP_PLATFORMS:-darwin-amd64 darwin-arm64 windows-amd64}"
PLUGIN_PLATFORMS=(linux-amd64 linux-arm64 "${DESKTOP_PLATFORMS[@]}")
# file times inside the archives: the commit's (same commit and binaries, same archives)
CREATED=$(git log -1 --format=%ct 2>/dev/null || echo 0)

tool() { # NAME VARIABLE: the variable's value if set, else scripts/tools.sh NAME
  local v=${!2:-}
  if [ -n "$v" ]; then echo "$v"; else "$ROOT/scripts/tools.sh" "$1"; fi
}

# archive_name NAME OS-ARCH: the file name of NAME's archive for a platform (.zip on
# Windows, where tar.gz is no one's habit; krew takes both).
archive_name() {
  case ${2%-*} in
    windows) echo "${1}_${TAG}_${2%-*}_${2#*-}.zip" ;;
    *) echo "${1}_${TAG}_${2%-*}_${2#*-}.tar.gz" ;;
  esac
}

# archive NAME OS-ARCH FILE...: dist/NAME_vVERSION_OS_ARCH.tar.gz (Windows: .zip) holding
# FILE... (and the README and LICENSE), reproducible: sorted, root-owned, the commit's time,
# no gzip timestamp.
archive() {
  local name=$1 plat=$2; shift 2
  local out dir
  out="$DIST/$(archive_name "$name" "$plat")"
  dir=$(mktemp -d)
  cp "$@" "$ROOT/README.md" "$ROOT/LICENSE" "$dir/"
  case $out in
    *.zip) python3 - "$dir" "$out" "$CREATED" <<'PY'
import os, sys, time, zipfile
src, out, created = sys.argv[1], sys.argv[2], int(sys.argv[3])
stamp = time.gmtime(max(created, 315532800))[:6]   # (zip's dates start in 1980)
with zipfile.ZipFile(out, "w") as z:
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        info = zipfile.ZipInfo(name, stamp)
        info.external_attr = (0o100755 if os.access(path, os.X_OK) else 0o100644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(path, "rb") as f:
            z.writestr(info, f.read(), compresslevel=9)
PY
      ;;
    *) tar -C "$dir" --sort=name --mtime="@$CREATED" --owner=0 --group=0 --numeric-owner -cf - . \
         | gzip -9n >"$out" ;;
  esac
  rm -rf "$dir"
}

# plugin_file OS-ARCH: the plugin's file name on that platform.
plugin_file() { case $1 in windows-*) echo kubectl-sexton.exe ;; *) echo kubectl-sexton ;; esac; }

binaries() {
  [ -x scripts/images.sh ] || die "scripts/images.sh is missing (it builds and checks the binaries)"
  scripts/images.sh binaries
  scripts/desktop.sh tools    # (Wine: check_krew runs the Windows plugin)
  scripts/desktop.sh build
  mkdir -p "$DIST"
  local arch bin plat
  for arch in "${ARCHES[@]}"; do
    bin="$ROOT/target/images/bin/linux-$arch"
    for f in sexton sexton-slim; do
      [ -x "$bin/$f" ] || die "$bin/$f was not built"
    done
    archive sexton "linux-$arch" "$bin/sexton" "$bin/sexton-slim"
  done
  for plat in "${PLUGIN_PLATFORMS[@]}"; do
    bin="$ROOT/target/images/bin/$plat/$(plugin_file "$plat")"
    [ -f "$bin" ] || die "$bin was not built"
    archive kubectl-sexton "$plat" "$bin"
  done
  log "binaries: $(cd "$DIST" && echo ./*.tar.gz ./*.zip)"
}

# The SBOM of each shipped crate: every crate it depends on (normal and build
# dependencies) for linux (the arm64 build has the same crates), in one directory;
# cargo-cyclonedx writes next to each Cargo.toml, so the files are moved out.
sbom() {
  local cyclonedx; cyclonedx=$(tool cargo-cyclonedx CARGO_CYCLONEDX)
  mkdir -p "$DIST"
  "$cyclonedx" cyclonedx --format json --spec-version 1.5 --target x86_64-unknown-linux-gnu --all \
    --override-filename "sbom-$TAG" >&2
  local crate
  for crate in sexton kubectl-sexton; do
    mv "crates/$crate/sbom-$TAG.json" "$DIST/${crate}_${TAG}.cdx.json"
  done
  # (the SBOMs of crates that ship nothing)
  find crates -name "sbom-$TAG.json" -delete
  python3 - "$DIST" "$TAG" <<'EOF'
import json, sys
dist, tag = sys.argv[1], sys.argv[2]
# (cargo metadata resolves features for the whole workspace, tests included, so an SBOM is a
# superset of what `cargo tree -p CRATE -e normal` says the binary links: the in-pod one
# lists kube-runtime, which its tests use)
for crate, must in (("sexton", "nix"), ("kubectl-sexton", "kube-runtime")):
    bom = json.load(open(f"{dist}/{crate}_{tag}.cdx.json"))
    names = {c["name"] for c in bom.get("components", [])}
    assert bom["metadata"]["component"]["name"] == crate, f"{crate}: SBOM describes {bom['metadata']['component']['name']}"
    assert must in names, f"{crate}: SBOM lacks {must} ({len(names)} components)"
    print(f"release: SBOM {crate}: {len(names)} components", file=sys.stderr)
EOF
}

# krew's manifest (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/): one
# platform per OS and architecture, each the archive's URL in the GitHub release and its
# sha256.
krew() {
  local plat file sum exe platforms=""
  for plat in "${PLUGIN_PLATFORMS[@]}"; do
    file=$(archive_name kubectl-sexton "$plat")
    exe=$(plugin_file "$plat")
    [ -f "$DIST/$file" ] || die "dist/$file is missing (run: scripts/release.sh binaries)"
    sum=$(sha256sum "$DIST/$file" | cut -d' ' -f1)
    platforms+="  - selector:
      matchLabels:
        os: ${plat%-*}
        arch: ${plat#*-}
    uri: $DOWNLOAD/$file
    sha256: $sum
    files:
      - from: $exe
        to: .
      - from: README.md
        to: .
      - from: LICENSE
        to: .
    bin: $exe
"
  done
  cat >"$DIST/sexton.yaml" <<EOF
# krew plugin manifest of kubectl-sexton $TAG (generated by scripts/release.sh krew)
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: sexton
spec:
  version: $TAG
  homepage: https://github.com/$GITHUB_REPO
  shortDescription: Sidecar lifecycle for Jobs - inject, controllers, EphemeralJobs
  description: |
    kubectl sexton injects sexton into manifests (inject, uninject), shows the
    results of EphemeralJobs (ejob results), prints the EphemeralJob CRD, and
    says which versions of sexton's controller and webhook a cluster runs
    (version). The same binary runs the SidecarTerminator and EphemeralJob
    controllers and the admission webhook in the cluster.
  platforms:
$platforms
EOF
  check_krew "$DIST/sexton.yaml"
  log "krew manifest: dist/sexton.yaml"
}

# krew itself installs the manifest, for each platform, from the archive in dist/ (krew
# checks the manifest, the archive's sha256 and the files it names), into a throwaway
# KREW_ROOT. The installed plugin must be that platform's binary, and it runs where this
# machine can run it: linux/arm64 under qemu-aarch64-static, windows/amd64 under Wine
# (scripts/desktop.sh installs it; the macOS ones are only compared).
check_krew() {
  local krew root plat exe installed out
  krew=$(tool krew KREW)
  for plat in "${PLUGIN_PLATFORMS[@]}"; do
    root=$(mktemp -d)
    exe=$(plugin_file "$plat")
    KREW_ROOT="$root" KREW_OS="${plat%-*}" KREW_ARCH="${plat#*-}" KREW_NO_UPGRADE_CHECK=1 "$krew" install --manifest="$1" \
      --archive="$DIST/$(archive_name kubectl-sexton "$plat")" </dev/null >"$root/log" 2>&1 \
      || { cat "$root/log" >&2; die "krew refused dist/sexton.yaml for $plat"; }
    installed=$(find "$root/store/sexton" -name "$exe" -type f | head -1)
    [ -n "$installed" ] || die "krew installed no $exe for $plat"
    cmp -s "$installed" "$ROOT/target/images/bin/$plat/$exe" || die "krew installed another $exe for $plat"
    case $plat in
      linux-*) out=$(run "${plat#*-}" "$installed" version --client) \
        || die "the plugin krew installed for $plat does not run" ;;
      windows-*) out=$(WINEPREFIX="${XDG_CACHE_HOME:-$HOME/.cache}/sexton-wine" WINEDEBUG=-all \
          wine "$installed" version --client | tr -d '\r') \
        || die "the plugin krew installed for $plat does not run under Wine" ;;
      *) out="client: kubectl-sexton $VERSION" ;;
    esac
    [ "$out" = "client: kubectl-sexton $VERSION" ] || die "$plat plugin says: $out"
    rm -rf "$root"
  done
  log "krew installs dist/sexton.yaml on ${PLUGIN_PLATFORMS[*]}"
}

# run ARCH BINARY ARGS...: arm64 binaries under qemu-aarch64-static on other machines.
run() {
  local arch=$1; shift
  if [ "$arch" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then qemu-aarch64-static "$@"; else "$@"; fi
}

chart() {
  local helm; helm=$(tool helm HELM)
  mkdir -p "$DIST"
  "$helm" lint --strict charts/sexton >&2
  "$helm" package charts/sexton --destination "$DIST" >&2
  [ -f "$DIST/sexton-$VERSION.tgz" ] || die "helm package made no dist/sexton-$VERSION.tgz"
}

checksums() {
  [ -d "$DIST" ] || die "nothing in dist/ to sum"
  (cd "$DIST" && find . -maxdepth 1 -type f ! -name 'SHA256SUMS*' ! -name 'cosign.*' -printf '%P\n' \
    | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
  log "SHA256SUMS: $(wc -l <"$DIST/SHA256SUMS") files"
}

sign() {
  local cosign; cosign=$(tool cosign COSIGN)
  [ -f "$DIST/SHA256SUMS" ] || die "dist/SHA256SUMS is missing (run: scripts/release.sh checksums)"
  case "${SEXTON_SIGN:-key}" in
    keyless)
      "$cosign" sign-blob --yes --bundle "$DIST/SHA256SUMS.sigstore.json" "$DIST/SHA256SUMS" >/dev/null ;;
    key)
      [ -n "${COSIGN_KEY:-}" ] || die "COSIGN_KEY (a cosign private key file) is not set; or SEXTON_SIGN=keyless"
      "$cosign" sign-blob --yes --key "$COSIGN_KEY" --use-signing-config=false --tlog-upload=false \
        --bundle "$DIST/SHA256SUMS.sigstore.json" "$DIST/SHA256SUMS" >/dev/null ;;
    *) die "SEXTON_SIGN=${SEXTON_SIGN}: neither keyless nor key" ;;
  esac
  log "signed: dist/SHA256SUMS.sigstore.json"
}

verify() {
  local cosign; cosign=$(tool cosign COSIGN)
  (cd "$DIST" && sha256sum --quiet --strict -c SHA256SUMS) || die "dist/ does not match SHA256SUMS"
  case "${SEXTON_SIGN:-key}" in
    keyless)
      "$cosign" verify-blob --bundle "$DIST/SHA256SUMS.sigstore.json" \
        --certificate-identity-regexp "^https://github.com/$GITHUB_REPO/\.github/workflows/release\.yaml@refs/tags/v" \
        --certificate-oidc-issuer https://token.actions.githubusercontent.com "$DIST/SHA256SUMS" \
        || die "the signature of dist/SHA256SUMS does not verify" ;;
    key)
      [ -n "${COSIGN_PUB:-}" ] || die "COSIGN_PUB (the public key file) is not set"
      "$cosign" verify-blob --key "$COSIGN_PUB" --insecure-ignore-tlog=true \
        --bundle "$DIST/SHA256SUMS.sigstore.json" "$DIST/SHA256SUMS" \
        || die "the signature of dist/SHA256SUMS does not verify" ;;
  esac
  log "verified: SHA256SUMS and its signature"
}

images() {
  [ -x scripts/images.sh ] || die "scripts/images.sh is missing (it builds the images)"
  scripts/images.sh
}

# push REPO: each image of `scripts/images.sh refs` (LAYOUT TAG REFERENCE DIGEST, the
# reference in REPO), then the chart. A plain-HTTP registry (127.0.0.1) is reached without TLS.
push() {
  local repo=${1:?usage: release.sh push REPO}
  local plain=() helm_plain=() layout tag ref
  case "$repo" in 127.0.0.1:*|localhost:*) plain=(--dest-tls-verify=false) helm_plain=(--plain-http) ;; esac
  command -v skopeo >/dev/null || die "skopeo is needed to push the images"
  while read -r layout tag ref _; do
    [ -d "$layout" ] || die "$layout: no image layout (run: scripts/release.sh images)"
    skopeo copy --all --preserve-digests --retry-times 3 "${plain[@]}" "oci:$layout:$tag" "docker://$ref" >&2
    log "pushed $ref"
  done < <(SEXTON_IMAGE_REPO="$repo" scripts/images.sh refs)
  local helm; helm=$(tool helm HELM)
  [ -f "$DIST/sexton-$VERSION.tgz" ] || chart
  "$helm" push "$DIST/sexton-$VERSION.tgz" "oci://$repo/charts" "${helm_plain[@]}" >&2
  log "pushed the chart: oci://$repo/charts/sexton:$VERSION"
}

# Everything, here: built, archived, summed, signed with a key made for this run, verified,
# pushed to the anonymous test registry, and pulled back: the images' indexes must have
# both platforms and the digests of target/images, the chart must be the packaged one.
local_release() {
  local repo=127.0.0.1:15000/sexton-release-test
  "$ROOT/scripts/registry.sh" up >/dev/null
  rm -rf "$DIST"
  binaries
  sbom
  krew
  chart
  checksums
  local keys; keys=$(mktemp -d)
  trap 'rm -rf "$keys"' RETURN
  local cosign; cosign=$(tool cosign COSIGN)
  (cd "$keys" && COSIGN_PASSWORD=release-test "$cosign" generate-key-pair >/dev/null 2>&1) \
    || die "cosign generate-key-pair failed"
  COSIGN_KEY="$keys/cosign.key" COSIGN_PUB="$keys/cosign.pub" COSIGN_PASSWORD=release-test \
    SEXTON_SIGN=key sign
  COSIGN_PUB="$keys/cosign.pub" SEXTON_SIGN=key verify
  # a changed file must fail the check
  cp "$DIST/SHA256SUMS" "$keys/sums"
  echo "tampered" >>"$DIST/SHA256SUMS"
  # (another process: `set -e` does not apply inside an `if` condition)
  if COSIGN_PUB="$keys/cosign.pub" SEXTON_SIGN=key DIST="$DIST" "$ROOT/scripts/release.sh" verify 2>/dev/null; then
    die "a tampered SHA256SUMS verified"
  fi
  cp "$keys/sums" "$DIST/SHA256SUMS"
  images
  push "$repo"
  pulled_back "$repo"
  log "local release $TAG: $(cd "$DIST" && echo *)"
}

pulled_back() {
  local repo=$1 layout tag ref want got
  while read -r layout tag ref want; do
    got="sha256:$(skopeo inspect --raw --tls-verify=false "docker://$ref" | sha256sum | cut -d' ' -f1)"
    [ "$want" = "$got" ] || die "$ref: the registry has $got, target/images $want"
    skopeo inspect --raw --tls-verify=false "docker://$ref" | python3 -c '
import json, sys
idx = json.load(sys.stdin)
plats = sorted(m["platform"]["os"] + "/" + m["platform"]["architecture"] for m in idx.get("manifests", []))
assert plats == ["linux/amd64", "linux/arm64"], sys.argv[1] + ": platforms " + str(plats)
' "$ref" || die "$ref is not an index of linux/amd64 and linux/arm64"
  done < <(SEXTON_IMAGE_REPO="$repo" scripts/images.sh refs)
  local helm tmp; helm=$(tool helm HELM); tmp=$(mktemp -d)
  "$helm" pull "oci://$repo/charts/sexton" --version "$VERSION" --plain-http --destination "$tmp" >&2
  cmp -s "$tmp/sexton-$VERSION.tgz" "$DIST/sexton-$VERSION.tgz" || die "the pulled chart differs from dist/"
  rm -rf "$tmp"
  log "pulled back: every image with both platforms, and the chart"
}

case "${1:-}" in
  binaries) binaries ;;
  sbom) sbom ;;
  krew) krew ;;
  chart) chart ;;
  checksums) checksums ;;
  sign) sign ;;
  verify) verify ;;
  images) images ;;
  push) shift; push "$@" ;;
  local) local_release ;;
  version) echo "$VERSION" ;;
  check-tag)
    # the workflow's tag must be the workspace version's
    [ "${2:-}" = "$TAG" ] || die "tag '${2:-}' is not $TAG (Cargo.toml's version)" ;;
  *) echo "usage: $0 binaries|sbom|krew|chart|checksums|sign|verify|images|push REPO|local|version|check-tag TAG" >&2; exit 2 ;;
esac
