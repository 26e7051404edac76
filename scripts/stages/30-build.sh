# shellcheck shell=bash disable=SC2034
# The whole workspace: the pure core, the in-pod binary and the cluster-side binary, with
# profile release-nolto (Cargo.toml says why; scripts/lib.sh's build_workspace). When the run
# goes on to ship it (the images or desktop stage), the shipped kubectl-sexton binaries are
# built first, here (`cluster?`: the cluster job, if the run reaches it: the same workspace
# build, whose linux/amd64 kubectl-sexton ships, and linux/arm64's), while the Go builds
# still run.
STAGE_HELP="the workspace with profile release-nolto, benches included (cargo build)"
STAGE_NEEDS="cluster?"
run() { build_workspace; }
