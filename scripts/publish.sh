#!/usr/bin/env bash
# Before a release is published: sexton from this checkout, in a registry of your own, and
# the chart installed pointing at it (docs/install.md, "Your own registry, before a release").
#
#   scripts/publish.sh REGISTRY [--no-build] [--no-push] [--no-install] [-- HELM-ARGS...]
#
# 1. builds the images (scripts/images.sh: static binaries for linux/amd64 and linux/arm64,
#    multi-platform OCI images, checked);
# 2. pushes them, every platform, as REGISTRY/sexton:VERSION, REGISTRY/sexton:VERSION-slim,
#    REGISTRY/sexton-quick-exit:VERSION and REGISTRY/kubectl-sexton:VERSION, and the chart as
#    oci://REGISTRY/charts/sexton (scripts/release.sh push; skopeo's credentials, e.g.
#    `skopeo login`; 127.0.0.1:PORT and localhost:PORT are reached over plain HTTP);
# 3. unless --no-install: `helm upgrade --install sexton charts/sexton -n sexton-system
#    --create-namespace` with the chart's three images set to REGISTRY's, and HELM-ARGS
#    (e.g. `-- --set webhook.enabled=false`, `-- --dry-run=server`). helm: $HELM, else
#    scripts/tools.sh helm.
# --no-build pushes the images target/images holds already; --no-push installs the chart
# pointing at images pushed before (the tests run it so, with `-- --dry-run=server`).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck disable=SC2034  # (read by lib.sh's log and die)
LIB_NAME=publish

usage() { echo "usage: scripts/publish.sh REGISTRY [--no-build] [--no-push] [--no-install] [-- HELM-ARGS...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
REGISTRY=${1%/}; shift
case "$REGISTRY" in
  ""|-*|*" "*|*://*) echo "publish.sh: REGISTRY must be HOST[:PORT][/PATH] (no scheme), not '$REGISTRY'" >&2; exit 2 ;;
esac
BUILD=1 PUSH=1 INSTALL=1
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) BUILD=0 ;;
    --no-push) PUSH=0 ;;
    --no-install) INSTALL=0 ;;
    --) shift; break ;;
    *) usage ;;
  esac
  shift
done
VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)

[ $BUILD = 0 ] || scripts/images.sh
if [ $PUSH = 1 ]; then
  scripts/release.sh push "$REGISTRY"
  log "pushed $REGISTRY/{sexton,sexton-quick-exit,kubectl-sexton}:$VERSION and oci://$REGISTRY/charts/sexton"
fi
[ $INSTALL = 1 ] || exit 0

HELM=${HELM:-$(command -v helm || scripts/tools.sh helm)}
# Each image value's registry is empty, its repository the whole name in REGISTRY.
install=("$HELM" upgrade --install sexton charts/sexton --namespace sexton-system --create-namespace
  --set image.registry= --set "image.repository=$REGISTRY/kubectl-sexton"
  --set controller.quickExitImage.registry= --set "controller.quickExitImage.repository=$REGISTRY/sexton-quick-exit"
  --set webhook.sextonImage.registry= --set "webhook.sextonImage.repository=$REGISTRY/sexton"
  "$@")
log "installing: ${install[*]}"
"${install[@]}"
