# shellcheck shell=bash disable=SC2034
# The release, as the workflow makes it, pushed to the local test registry
# (scripts/release.sh: binaries, SBOM, krew manifest, chart, signed checksums, images).
STAGE_HELP="the release rehearsal into the local registry (scripts/release.sh local)"
STAGE_NEEDS="images release-tools"
run() { RERUN="  scripts/release.sh local"; scripts/release.sh local; RERUN=""; }
