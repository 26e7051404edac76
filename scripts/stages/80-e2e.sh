# shellcheck shell=bash disable=SC2034
# End to end on a real node (scripts/e2e-cluster.sh: containerd 2.x, runc, kubelet,
# kube-scheduler, the images of the images stage; e2e/run.sh: the scenarios with real Jobs),
# the benchmarks that need the node, on it (the scenarios leave it up): one run per strategy;
# then README.md's quick start, last: its walk pulls the shipped images from the registry
# under the registry's names, the same image IDs as the node's sexton:e2e and kin, after
# which containerd 2.4's CRI plugin no longer finds sexton:e2e (ErrImageNeverPull while
# `ctr images ls` lists it), so nothing may use the node's images after it.
STAGE_HELP="end-to-end scenarios on a real node (e2e/run.sh: containerd, kubelet, the images),
then the quick forms of bench/completion/run.sh, bench/deletion/run.sh and
bench/image-volume/run.sh on that node, then README.md's quick start walked on it in order
(e2e/quickstart.py)"
STAGE_NEEDS="images services"
run() {
  RERUN="  e2e/run.sh   (or e2e/run.sh NAME for one scenario: e2e/run.sh --list)"; e2e/run.sh
  RERUN=""; timed bench-node bench_node
  RERUN="  e2e/quickstart.py"; e2e/quickstart.py; RERUN=""
}
bench_node() {
  bench_quick completion 1 bench/completion/run.sh --quick --runs 1
  bench_quick deletion 1 bench/deletion/run.sh --quick
  bench_quick image-volume 1 bench/image-volume/run.sh --quick
}
