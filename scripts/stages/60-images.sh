# shellcheck shell=bash disable=SC2034
# The images that ship (scripts/images.sh): the static binaries for linux/amd64 and
# linux/arm64 (cross-compiled; the in-pod ones with LTO, in the background while the tests
# run), the three multi-platform OCI images built from them, and the check that they are
# what the Dockerfile describes. The e2e node runs these images.
STAGE_HELP="the shipped static binaries (linux/amd64, linux/arm64, release profile with LTO)
and their OCI images, checked against the Dockerfile    (scripts/images.sh)"
STAGE_NEEDS="cluster in-pod"
run() { scripts/images.sh package; }
