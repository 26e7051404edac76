# shellcheck shell=bash disable=SC2034
# The benchmarks' quick forms (BENCHMARKS.md) that need no node: every documented benchmark
# command runs and must write its results stamped with every table filled; the figures are
# not asserted. (The node's are run by the e2e stage, on its node.) In a full run this stage
# runs in the background beside the next one, the end-to-end stage: both mostly wait (fixed
# measurement windows, pods starting), so together they take little more than the longer of
# the two (CONTRIBUTING.md, where a cold run's time goes); the arm64 stage, whose emulated
# waits are the most sensitive to load, runs after both.
STAGE_HELP="the quick forms of the other benchmarks (bench/NAME/run.sh of webhook,
webhook-hostile, scale and in-pod; bench/ships/run.py): each must write its results
stamped, every table filled (bench/lib/check.py); the figures are not asserted, but
for the webhook's peak RSS under hostile clients (within the chart's limit). (In a
full run: after the images, in the background beside the e2e stage.)"
STAGE_NEEDS="build images go-builds bench-tools"
STAGE_BESIDE_NEXT=1
run() {
  local b
  for b in webhook hostile scale run ships; do timed "bench-$b" "bench_$b"; done
}
# The admission webhook (no cluster): the workspace's kubectl-sexton, and vegeta.
bench_webhook() {
  bench_quick webhook 7 bench/webhook/run.sh --quick --bin target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton \
    --max-wait 0 --max-wait-total 0
}
# The webhook under hostile clients (slow bodies, idle TLS, oversize bodies, many
# connections from several loopback addresses) beside two legitimate clients, then 4 reviews
# at once at the limits: the p99s are reported, not asserted; the webhook's peak RSS must stay
# within the chart's memory limit (charts/sexton/values.yaml: 256Mi).
bench_hostile() {
  bench_quick hostile 2 bench/webhook-hostile/run.sh --bin target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton \
    --secs 4 --hostile-addresses 2 --out target/bench/hostile.md --max-rss-mib 256
}
# The controllers at scale, on a test control plane of their own (bench/scale/run.sh's ports).
bench_scale() { bench_quick scale 4 bench/scale/run.sh --quick --workspace-build --no-write; }
# The in-pod supervisor against kubexit (PID namespaces): the shipped linux/amd64 binaries.
bench_run() {
  bench_quick results 10 bench/in-pod/run.sh --quick --bin target/images/bin/linux-amd64/sexton \
    --slim-bin target/images/bin/linux-amd64/sexton-slim
}
# The sizes of what ships (bench/ships/run.py: the docs quote them), from the images just built.
bench_ships() { bench_quick ships 2 python3 bench/ships/run.py --no-update; }
