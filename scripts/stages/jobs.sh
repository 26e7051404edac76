# shellcheck shell=bash
# What the stages need, built or started once per run (scripts/test.sh): one table. A stage
# names these in its STAGE_NEEDS; a job names the jobs it needs itself.
#
#   job NAME NICENESS NEEDS COMMAND
#
# NICENESS `first`: run in the foreground at the beginning of the run, before anything starts
# in the background; `fg`: in the foreground when a step first needs it. A number: a
# background job, started at the beginning of the run (in this table's order, after what it
# needs) at that niceness, and waited for, at the foreground's priority, by the first step
# that needs it. Only what the run's stages reach is run. A cold run is CPU-bound on two cores: what is not needed next is built in the background
# at a priority that lets what is needed next go first, so that the stages that mostly wait
# (the tests, the node's scenarios, the release's pushes) leave no core idle.
#
#   name          niceness needs                command
job go            first ""                  need_go
job image-tools   first ""                  scripts/images.sh tools   # (once, before any apt-get of the jobs below)
job registry      0    ""                   scripts/registry.sh up
job desktop-build 0    "image-tools"        desktop_build
job go-builds     0    "go"                 go_builds
job bench-tools   10   "go"                 SEXTON_BENCH_PEERS=if-built bench/webhook/run.sh --tools
job book-tools    10   ""                   scripts/tools.sh mdbook
job release-tools 19   "go"                 release_tools
job in-pod        10   "image-tools"        scripts/images.sh in-pod
job cluster       fg   "image-tools"        scripts/images.sh cluster
job services      fg   "go-builds registry" services_up

# Go >= 1.24 builds the control plane, the node and the chart's tools. kubectl: the
# machine's, else the one built from the same Kubernetes release with the control plane
# (go-builds; the stages' services wait for that build).
need_go() {
  need_cmd go || { echo "Go >= 1.24 is needed to build the test control plane (testenv/go.mod)" >&2; exit 1; }
  need_cmd kubectl || PATH="$(scripts/testenv.sh kubectl-dir --no-build):$PATH"
}

# The registries (scripts/registry.sh: Debian's docker-registry, test images pushed with
# skopeo) need nothing the run builds, so they start first, at the foreground's priority:
# started after the workspace build, beside every background build, they came up minutes
# later, on the way to the tests. (Their daemons are sessions of their own: the EXIT trap's
# kill of the background jobs spares them, and `registry.sh down` stops them.)

# The desktop plugin (scripts/desktop.sh): its tools (Wine from apt, zig and cargo-zigbuild
# from PyPI, rustup's three targets: mostly downloads) at the foreground's priority, so that
# they are done within minutes and no apt-get of a later stage waits for dpkg's lock behind a
# starved one, then its three builds at the lowest priority: they take the CPU the stages
# leave idle (the tests and the node's scenarios mostly wait), and are checked by the desktop
# stage. After image-tools, so that two apt-gets never run at once (each also waits for
# dpkg's lock: -o DPkg::Lock::Timeout).
desktop_build() {
  scripts/desktop.sh tools
  echo 19 2>/dev/null >/proc/self/autogroup || true
  nice -n 19 scripts/desktop.sh build
}

# The test control plane (etcd, kube-apiserver, kube-controller-manager, kubectl) and, when
# the run reaches the e2e stage, the node's kubelet, kube-scheduler and containerd, in one go
# build (scripts/testenv.sh, cached in ~/.cache/sexton-testenv), with helm; then actionlint
# and the tests' Go stand-ins. kubectl too: the machine's may be missing or of another
# release, and bench/scale/run.sh and e2e/quickstart.py use this one; in the same go build it
# shares most packages. Built beside the workspace's Rust build: one after the other, they
# left a core idle most of the time.
go_builds() {
  local plane=(kube-apiserver kube-controller-manager etcd kubectl)
  [ "${TEST_PLANE:-}" != node ] || plane+=(kubelet kube-scheduler containerd)   # (one go build: see testenv.sh)
  scripts/tools.sh actionlint
  scripts/testenv.sh build "${plane[@]}" helm
  scripts/testenv.sh old-webhook
  scripts/testenv.sh vendor-webhook
}

# The release step's tools (cosign, cargo-cyclonedx, krew), needed last: at the lowest
# priority. scripts/tools.sh's lock makes the release step wait for a build still under way
# rather than start a second one.
release_tools() {
  local t
  for t in cosign cargo-cyclonedx krew; do scripts/tools.sh "$t" || true; done
}

# The control plane is started on 127.0.0.1, and stopped again at the end if this run
# started it (with the e2e node: a failed `down`, such as a containerd shim left behind,
# fails the run). The same for the test registries (tests/registry.rs).
services_up() {
  scripts/testenv.sh up
  scripts/registry.sh up
}
