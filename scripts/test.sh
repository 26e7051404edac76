#!/usr/bin/env bash
# Runs every test: unit tests of the pure core, integration tests that run the real
# (static, release) binary as PID 1 of separate PID namespaces, tests against a real
# kube-apiserver built from Go modules (crates/*/tests), the arm64 build under emulation,
# end-to-end scenarios on a real node, and the release rehearsal. Installs and builds what
# it needs. `scripts/test.sh --help` lists the stages.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh    # (build_workspace)

usage() {
  cat <<'EOF'
usage: scripts/test.sh                 every stage below, in order (CI: .ci/run)
       scripts/test.sh --quick         the contributor's loop: unit, property and in-pod
                                       integration tests; no Go, no control plane, no images
                                       (a few minutes warm)
       scripts/test.sh --stage NAME    one stage, with what it needs built or started first
       scripts/test.sh CARGO-TEST-ARGS the `test` stage with these arguments for cargo test
                                       (e.g. -p sexton --test faults_graveyard), after the
                                       builds and services it needs; no arm64, e2e, release
       scripts/test.sh --help

stages (each prints its seconds at the end of the run; a failure prints the command that
reruns the failing test alone):
  setup    packages the tests use (apt-get), PID namespaces
  layers   the crates' dependency rules (cargo tree; docs/architecture.md)
  images   the shipped static binaries (linux/amd64, linux/arm64, release profile with LTO)
           and their OCI images, checked against the Dockerfile    (scripts/images.sh)
  build    the workspace with profile release-nolto, benches included (cargo build)
  lint     helm lint of the chart, deploy/ rendered from it, actionlint of the workflows,
           the documentation site (scripts/book.sh: mdbook, links, a screenshot)
  test     cargo test: every crate's tests, against the test API server
           (scripts/testenv.sh) and registries (scripts/registry.sh), started here
  arm64    the in-pod integration tests again with the shipped arm64 binary under
           qemu-aarch64-static
  e2e      end-to-end scenarios on a real node (e2e/run.sh: containerd, kubelet, the images),
           then README.md's quick start walked on it in order (e2e/quickstart.py), then
           the quick forms of bench/completion.sh and bench/deletion.sh on that node
  desktop  the plugin for macOS and Windows, cross-built and checked (scripts/desktop.sh:
           the .exe under Wine against the Linux binary; the Mach-O files' platform, CPU,
           links and arm64's signature)
  bench    the quick forms of the other benchmarks (bench/webhook.sh, bench/webhook-hostile.sh,
           bench/scale.sh, bench/run.sh, bench/ships.py): each must write its results
           stamped, every table filled (bench/check.py); the figures are not asserted, but
           for the webhook's peak RSS under hostile clients (within the chart's limit). (In a
           full run: after the images, in the background beside the e2e stage.)
  release  the release rehearsal into the local registry (scripts/release.sh local)

Services this script starts are stopped at its end; one already running is reused and left.
Without this script: `scripts/testenv.sh up` and `scripts/registry.sh up`, then
`cargo test --profile release-nolto [--workspace --test FILE -- --exact NAME]` (the whole
workspace, so that the build is the full run's: a subset of it resolves other features and
builds every dependency again).
EOF
}

MODE=full STAGE="" CARGO_ARGS=()
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --quick) MODE=quick; [ $# -eq 1 ] || { usage >&2; exit 2; } ;;
  --stage)
    MODE=stage STAGE=${2:-}
    case "$STAGE" in
      setup|layers|images|build|lint|test|arm64|e2e|desktop|bench|release) ;;
      *) echo "test.sh: --stage needs one of setup layers images build lint test arm64 e2e desktop bench release, not '${STAGE}'" >&2; exit 2 ;;
    esac
    [ $# -eq 2 ] || { usage >&2; exit 2; } ;;
  "") ;;
  *) MODE=cargo CARGO_ARGS=("$@") ;;
esac

need() { command -v "$1" >/dev/null 2>&1; }

# timed NAME CMD...: runs CMD, adding its seconds to the summary printed at the end.
TIMES=""
timed() {
  local name=$1 t0=$SECONDS; shift
  "$@"
  TIMES="$TIMES $name $((SECONDS - t0))"
}

# ---- setup ---------------------------------------------------------------------------

# What every stage needs; `go` only where the control plane, the node or the chart tools
# are built.
setup() {
  need cargo || { echo "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }
  local missing=()
  need unshare || missing+=(util-linux)
  need mkfifo || missing+=(coreutils)
  need setpriv || missing+=(util-linux)
  need python3 || missing+=(python3)
  # bindfs (FUSE) gives a real filesystem on which inotify delivers nothing for writes made
  # by other "containers": the failure mode of sandboxes such as gVisor.
  need bindfs || missing+=(bindfs)
  need fusermount || need fusermount3 || missing+=(fuse3)
  need openssl || missing+=(openssl)
  need readelf || missing+=(binutils)
  [ $MODE = quick ] || need shellcheck || missing+=(shellcheck)   # (actionlint runs it)
  [ $MODE = quick ] || need chromium || missing+=(chromium)       # (the docs' screenshot, lint)
  [ $MODE = quick ] || [ -x /bin/busybox ] || missing+=(busybox-static)   # (vendors.rs: the stand-in sidecar)
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  # The integration tests create PID namespaces: root, or unprivileged user namespaces.
  if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
    echo "the integration tests need to create PID namespaces (run as root)" >&2
    exit 1
  fi
}

need_go() {
  need go || { echo "Go >= 1.24 is needed to build the test control plane (testenv/go.mod)" >&2; exit 1; }
  # kubectl: the machine's, else the one built from the same Kubernetes release with the
  # control plane (start_go_builds; the stages' services wait for that build)
  need kubectl || PATH="$(scripts/testenv.sh kubectl-dir --no-build):$PATH"
}

# ---- background builds ----------------------------------------------------------------

# bg NAME NICENESS CMD...: runs CMD in a session of its own (so that the EXIT trap stops it
# with its children), its output in $TMPDIR/sexton-test-NAME.log; wait_bg NAME: waits for
# it, and on failure shows its output and fails the run.
declare -A BG=()
# With autogroup scheduling (kernel.sched_autogroup_enabled=1, the default of many
# kernels, this machine kind's included), a new session is a scheduling group of its own
# that shares the CPU equally with the foreground's whatever its processes' niceness: the
# group's niceness is set as well (/proc/self/autogroup), or a background build at 19 would
# take as much CPU as the tests it should yield to.
# Each job's CPU time (user + system, its children's included: bash's `times`) goes to
# $TMPDIR/sexton-test-NAME.cpu, and the end of the run sums them up: a cold run is CPU-bound,
# so the CPU-seconds say where its minutes go.
bg() {
  local name=$1 n=$2; shift 2
  rm -f "${TMPDIR:-/tmp}/sexton-test-$name.cpu"
  # shellcheck disable=SC2016  # (expanded by the inner shell)
  setsid bash -c 'n=$1 name=$2; shift 2; echo "$n" 2>/dev/null >/proc/self/autogroup || true
    nice -n "$n" "$@"; rc=$?
    times >"${TMPDIR:-/tmp}/sexton-test-$name.cpu"; exit $rc' bg "$n" "$name" "$@" \
    >"${TMPDIR:-/tmp}/sexton-test-$name.log" 2>&1 </dev/null &
  BG[$name]=$! BG_NAMES="$BG_NAMES $name"
}
# cpu_of NAME: the CPU-seconds of background job NAME, once it has ended ("?" before).
cpu_of() {
  local t; t=$(tail -1 "${TMPDIR:-/tmp}/sexton-test-$1.cpu" 2>/dev/null) || { echo "?"; return; }
  # (`times`' second line, its children's: "1m2.500s 0m3.250s", user and system)
  python3 -c 'import re,sys; print(round(sum(int(m)*60+float(s) for m,s in re.findall(r"(\d+)m([\d.]+)s", sys.argv[1]))))' "$t"
}
BG_NAMES=""
# A job waited for runs at the foreground's priority from then on (its session's autogroup
# and every process of its group): on a machine busy with other work, a build started at
# 10 or 19 would otherwise crawl while the whole run waits for it (a warm run beside two CPU
# burners waited over 8 minutes for the in-pod LTO build at 10). Lowering a niceness needs
# root; without it the job keeps its own.
wait_bg() {
  [ -n "${BG[$1]:-}" ] || return 0
  local pid=${BG[$1]}
  echo 0 2>/dev/null >"/proc/$pid/autogroup" || true
  renice -n 0 -g "$pid" >/dev/null 2>&1 || true
  wait "$pid" && { unset "BG[$1]"; return 0; }
  cat "${TMPDIR:-/tmp}/sexton-test-$1.log" >&2
  echo "test.sh: the background build '$1' failed (output above)" >&2; exit 1
}

# The test control plane (etcd, kube-apiserver, kube-controller-manager) for the tests
# against the API server, and on a full run the e2e node's kubelet and kube-scheduler, are
# built from Go modules on first use (scripts/testenv.sh, cached in ~/.cache/sexton-testenv),
# as are helm and actionlint (scripts/tools.sh, ~/.cache/sexton-tools): on a new machine
# ~20 minutes of builds, which run in the background while the Rust binaries build. The
# release profile's LTO keeps one core busy for minutes at a time and leaves the other
# idle; one after the other, the two took over half of a cold run.
start_go_builds() {
  # (kubectl too: the machine's may be missing or of another release, and bench/scale.sh
  # and e2e/quickstart.py use this one; in the same go build it shares most packages)
  local plane=(kube-apiserver kube-controller-manager etcd kubectl)
  [ "$1" = node ] && plane+=(kubelet kube-scheduler containerd)   # (one go build: see testenv.sh)
  # shellcheck disable=SC2016  # (expanded by the inner shell)
  bg go-builds 0 bash -c 'set -e; scripts/tools.sh actionlint
    scripts/testenv.sh build "$@"; scripts/testenv.sh old-webhook; scripts/testenv.sh vendor-webhook' _ "${plane[@]}" helm
}
# The webhook benchmark's load generator (vegeta; the Go floor, a peer, only if built before):
# needed from the bench stage on, so at priority 10.
start_bench_tools() { bg bench-tools 10 env SEXTON_BENCH_PEERS=if-built bench/webhook.sh --tools; }

# The release step's tools (cosign, cargo-cyclonedx, krew: ~13 minutes of builds when not
# cached) are built ahead, in the background at the lowest priority: the tests leave a core
# idle much of the time. scripts/tools.sh's lock makes the release step wait for a build
# still under way rather than start a second one.
# mdbook (the lint stage builds the documentation site with it): 5.2 CPU-minutes when not
# cached (309 CPU-s measured on the 2-core machine, 2026-11-27; without its server and
# watcher), at priority 10 beside the workspace build, which leaves a core idle at times;
# the lint stage waits for it. Cached, the book's build and checks take ~3 s.
start_book_tools() { bg book-tools 10 scripts/tools.sh mdbook; }

# The desktop plugin (scripts/desktop.sh): its tools (Wine from apt, zig and cargo-zigbuild
# from PyPI, rustup's three targets: mostly downloads) at the foreground's priority, so that
# they are done within minutes and no apt-get of a later stage waits for dpkg's lock behind a
# starved one (a cold run here took 18 minutes for the PyPI install alone at priority 19), then
# its builds (three; ~700 CPU-s in all with Wine's install, measured: scripts/desktop.sh)
# at the lowest priority: they take the CPU the stages leave idle (the tests and the node's
# scenarios mostly wait), and are checked after the end-to-end stage. Started after
# images.sh's tools, so that two apt-gets never run at once (each also waits for dpkg's
# lock: -o DPkg::Lock::Timeout).
start_desktop() {
  # shellcheck disable=SC2016  # (expanded by the inner shell)
  bg desktop 0 bash -c 'scripts/desktop.sh tools || exit
    echo 19 2>/dev/null >/proc/self/autogroup || true
    exec nice -n 19 scripts/desktop.sh build'
}
desktop() { wait_bg desktop; scripts/desktop.sh check; }

start_release_tools() {
  # shellcheck disable=SC2016  # (expanded by the inner shell)
  bg release-tools 19 bash -c 'for t in cosign cargo-cyclonedx krew; do scripts/tools.sh "$t" || true; done'
}

# ---- services -------------------------------------------------------------------------

# The control plane is started on 127.0.0.1, and stopped again at the end if this run
# started it (with the e2e node: a failed `down`, such as a containerd shim left behind,
# fails the run). The same for the test registries of tests/registry.rs (scripts/registry.sh:
# Debian's docker-registry and skopeo, installed by `up` if missing).
STOP_TESTENV=0 STOP_REGISTRY=0
services() {
  scripts/testenv.sh status >/dev/null 2>&1 || STOP_TESTENV=1
  scripts/registry.sh status >/dev/null 2>&1 || STOP_REGISTRY=1
  scripts/testenv.sh up
  wait_bg registry
  scripts/registry.sh up
}
# The test registries (scripts/registry.sh: Debian's docker-registry, test images pushed
# with skopeo) need nothing the run builds. A full run starts them first, in the background
# at the foreground's priority: started after the workspace build, beside every background
# build, they took about 3 minutes to come up (two cold runs, 2026-11-27), on the way to the
# tests. (Its daemons are sessions of their own: the EXIT trap's kill of the background
# jobs spares them, and `registry.sh down` stops them.)
start_registry() {
  scripts/registry.sh status >/dev/null 2>&1 || STOP_REGISTRY=1
  bg registry 0 scripts/registry.sh up
}

# shellcheck disable=SC2154  # rc is assigned by the trap itself
trap 'rc=$?
  for pid in "${BG[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
  if [ $STOP_TESTENV = 1 ]; then scripts/e2e-cluster.sh down || rc=1; scripts/testenv.sh down; fi
  if [ $STOP_REGISTRY = 1 ]; then scripts/registry.sh down || rc=1; fi
  [ $rc = 0 ] || [ -z "${RERUN:-}" ] || printf "\ntest.sh: to rerun what failed alone:\n%s\n" "$RERUN" >&2
  exit $rc' EXIT

# ---- stages ---------------------------------------------------------------------------

# The layers (docs/architecture.md): the in-pod binary links none of the cluster side's
# crates, and the pure core nothing that does I/O.
forbidden() { # package, regex of crates it must not depend on
  local found
  found=$(cargo tree -p "$1" -e normal --prefix none | sed 's/ .*//' | grep -E "^($2)\$" | sort -u || true)
  if [ -n "$found" ]; then
    echo "$1 depends on ${found//$'\n'/ }: see docs/architecture.md" >&2; exit 1
  fi
}
layers() {
  forbidden sexton 'kube|kube-client|kube-runtime|kube-derive|kube-lease-manager|k8s-openapi|tokio|tokio-macros|hyper|prometheus-client|schemars|axum'
  forbidden sexton-core 'nix|libc|tokio|kube|kube-client|k8s-openapi|hyper|mio|socket2'
  forbidden sexton-inject 'nix|libc|tokio|kube|kube-client|k8s-openapi|hyper|mio|socket2|reqwest|oci-client'
  forbidden sexton 'sexton-inject'
}

# The images that ship (scripts/images.sh): the static binaries for linux/amd64 and
# linux/arm64 (cross-compiled), the three multi-platform OCI images built from them, and the
# check that they are what the Dockerfile describes. The e2e node runs these images.
images() { scripts/images.sh; }

# The whole workspace: the pure core, the in-pod binary and the cluster-side binary, with
# profile release-nolto (Cargo.toml says why); done already by `images` on a full run, whose
# linux/amd64 kubectl-sexton it is.
build() { build_workspace; }

# The chart, the workflows and the documentation site. The chart's server-side dry runs
# are in crates/kubectl-sexton/tests/chart.rs, the docs' generated references in
# crates/kubectl-sexton/tests/docs.rs.
lint() {
  HELM="$(scripts/tools.sh helm)"; export HELM
  "$HELM" lint --strict charts/sexton
  scripts/manifests.sh check              # deploy/ is the chart rendered
  "$(scripts/tools.sh actionlint)" .github/workflows/*.yaml
  wait_bg book-tools
  scripts/book.sh                         # mdbook build docs, every link and anchor, a screenshot
  python3 bench/check.py --self-test      # the benchmarks' checker flags what it is for
}

# cargo_test PREFIX ARGS...: cargo test, its output also kept, so that a failure names the
# command that reruns just the failing tests (PREFIX: environment to repeat, or "").
cargo_test() {
  local prefix=$1 out rc=0; shift
  out=$(mktemp "${TMPDIR:-/tmp}/sexton-test-cargo.XXXXXX")
  cargo test --profile release-nolto "$@" 2>&1 | tee "$out" || rc=$?
  [ "$rc" = 0 ] || RERUN=$(rerun_hint "$prefix" "$out")
  rm -f "$out"
  return "$rc"
}

# rerun_hint PREFIX LOG: from cargo test's output, one command per failed test binary that
# runs just its failed tests (cargo names the binary: "to rerun pass `-p X --test Y`"). The
# command selects the workspace, not the package: a subset of the packages resolves other
# features and would rebuild every dependency (test names are unique in the workspace).
rerun_hint() {
  python3 - "$1" "$2" <<'EOF'
import re, sys
prefix, log = sys.argv[1], open(sys.argv[2], errors="replace").read()
failed, names, out = [], [], []
for line in log.splitlines():
    m = re.match(r"^---- (\S+) stdout ----", line)
    if m:
        names.append(m.group(1))
    m = re.search(r"to rerun pass `([^`]+)`", line) or re.match(r"^\s+`(-p [^`]+)`$", line)
    if m:
        failed.append(m.group(1))
for target in failed:
    target = re.sub(r"-p \S+", "--workspace", target)
    exact = " ".join(names) if len(failed) == 1 and names else ""
    tail = f" -- --exact {exact}" if exact else ""
    out.append(f"  {prefix}cargo test --profile release-nolto {target}{tail}")
print("\n".join(out) or f"  {prefix}cargo test --profile release-nolto  (no failing test named: see the output above)")
EOF
}

cargo_tests() { cargo_test "" "$@"; }

# The in-pod binary for arm64, emulated: the supervisor's integration tests again, each
# container now the shipped arm64 build (SEXTON_TEST_BIN), which the kernel hands to
# qemu-aarch64-static (binfmt_misc; registered here if the machine has none). The test
# harness stays native. All of them (api, faults_*, resilience, supervisor) but five that
# observe what qemu-user changes, not sexton:
#  - huge_file_at_tombstone_path_is_not_read_whole measures sexton's peak RSS: qemu's;
#  - child_killed_by_realtime_signal_exits_128_plus_n_with_the_signal_named and
#    realtime_stop_signal_during_birth_wait_ends_without_starting_the_child: qemu-user keeps
#    host realtime signals for itself and renumbers the guest's (a native child killed by
#    signal 34 is reported to sexton as 32);
#  - sigterm_while_waiting_for_own_lock_ends_without_starting_the_child watches sexton's
#    /proc/PID/exe and signal mask: the emulator's;
#  - orphans_are_reaped_as_pid1_and_as_subreaper: qemu-user 7.2 refuses
#    PR_SET_CHILD_SUBREAPER (EINVAL), so sexton cannot reap as a non-PID-1 subreaper there.
# The names are unique in the workspace, so the test binaries of the test stage are reused.
ARM64_TESTS=(--test supervisor --test faults_process --test faults_graveyard --test faults_extra --test resilience --test api)
ARM64_SKIP=(--skip huge_file_at_tombstone_path_is_not_read_whole --skip child_killed_by_realtime_signal_exits_128_plus_n_with_the_signal_named --skip realtime_stop_signal_during_birth_wait_ends_without_starting_the_child --skip sigterm_while_waiting_for_own_lock_ends_without_starting_the_child --skip orphans_are_reaped_as_pid1_and_as_subreaper)
# Every bounded wait of these tests is stretched by SEXTON_TEST_SLOWDOWN (testbed's
# `slowdown`): the emulated binary runs its start-up and system calls several times slower
# than the native one (measured here: the same tests take EMULATION_FACTOR times as long).
EMULATION_FACTOR=5
arm64() {
  arm64_emulation
  local -x SEXTON_TEST_BIN="$PWD/target/images/bin/linux-arm64/sexton" SEXTON_TEST_SLOWDOWN=$EMULATION_FACTOR
  cargo_test "SEXTON_TEST_BIN=$SEXTON_TEST_BIN SEXTON_TEST_SLOWDOWN=$SEXTON_TEST_SLOWDOWN " \
    "${ARM64_TESTS[@]}" -- --exact "${ARM64_SKIP[@]}"
}
# An aarch64 binary executed on another machine runs under qemu-aarch64-static: Debian's
# qemu-user-static registers it with binfmt_misc (flag F: the interpreter is opened at
# registration, so it also runs in other mount namespaces, unshare --mount-proc's).
arm64_emulation() {
  [ "$(uname -m)" != aarch64 ] || return 0
  need qemu-aarch64-static || apt_install qemu-user-static
  local bm=/proc/sys/fs/binfmt_misc
  [ -e "$bm/register" ] || mount -t binfmt_misc binfmt_misc "$bm" \
    || { echo "binfmt_misc cannot be mounted: the arm64 tests need it (qemu-user-static)" >&2; exit 1; }
  if [ ! -e "$bm/qemu-aarch64" ]; then
    cat /usr/lib/binfmt.d/qemu-aarch64.conf > "$bm/register" \
      || { echo "cannot register qemu-aarch64 with binfmt_misc" >&2; exit 1; }
  fi
  grep -q '^flags: .*F' "$bm/qemu-aarch64" \
    || { echo "$bm/qemu-aarch64 lacks flag F: the arm64 binary would not run in the tests' mount namespaces" >&2; exit 1; }
}

# End to end on a real node (scripts/e2e-cluster.sh: containerd 2.x, runc, kubelet,
# kube-scheduler, the images of scripts/images.sh; e2e/run.sh: the scenarios with real
# Jobs). A failed scenario is rerun alone with `e2e/run.sh N`.
e2e() {
  RERUN="  e2e/run.sh   (or e2e/run.sh N for scenario N: see its header)"; e2e/run.sh
  RERUN="  e2e/quickstart.py"; e2e/quickstart.py; RERUN=""
}
e2e_stage() { timed e2e e2e; timed bench-node bench_node; }

# The benchmarks' quick forms (BENCHMARKS.md): every documented benchmark command runs,
# where what it needs is up already, and its results must come out stamped with every table
# filled (bench/check.py); the figures are not asserted (they are not stable on shared
# machines). The peers they compare against are measured only if built before
# (SEXTON_BENCH_PEERS=if-built): their cold builds took minutes (kubexit 13, the webhook's Go
# floor 25, both on this loaded 2-core machine; OpenKruise's manager ~7 quiet). The webhook's
# load generator (vegeta) is built from its Go module when missing. A failed one is rerun
# alone with its command.
# Wall time in a cold run on the 2-core machine kind (2026-11-27, in the background beside
# the e2e stage, without kubexit): bench/webhook.sh --quick 68 s, webhook-hostile.sh 30 s,
# scale.sh --quick 119 s, run.sh --quick 95 s; the node's two (completion, deletion) 74 s;
# bench/ships.py under 1 s. Loaded (load 20-36, nice 10), run.sh --quick's harness took
# 145 s with kubexit and webhook.sh --quick 469 s (its windows are 68 s).
# bench_quick NAME TABLES CMD...: runs CMD, then checks target/bench/NAME.md.
bench_quick() {
  local name=$1 tables=$2; shift 2
  RERUN="  $*"
  SEXTON_BENCH_PEERS=if-built SEXTON_BENCH_SETTLE=0 "$@" >"${TMPDIR:-/tmp}/sexton-test-bench-$name.log" 2>&1 \
    || { tail -40 "${TMPDIR:-/tmp}/sexton-test-bench-$name.log" >&2; echo "test.sh: $* failed (its output's end above)" >&2; return 1; }
  python3 bench/check.py "target/bench/$name.md" --tables "$tables"
  RERUN=""
}
# The admission webhook (no cluster): the workspace's kubectl-sexton, and vegeta (the
# bench-tools job, waited for first).
bench_webhook() {
  bench_quick webhook 7 bench/webhook.sh --quick --bin target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton \
    --max-wait 0 --max-wait-total 0
}
# The webhook under hostile clients (slow bodies, idle TLS, oversize bodies, many
# connections from several loopback addresses) beside two legitimate clients, then 4 reviews
# at once at the limits: the p99s are reported, not asserted; the webhook's peak RSS must stay
# within the chart's memory limit (charts/sexton/values.yaml: 256Mi).
bench_hostile() {
  bench_quick hostile 2 bench/webhook-hostile.sh --bin target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton \
    --secs 4 --hostile-addresses 2 --out target/bench/hostile.md --max-rss-mib 256
}
# The controllers at scale, on a test control plane of their own (bench/scale.sh's ports).
bench_scale() { bench_quick scale 4 bench/scale.sh --quick --workspace-build --no-write; }
# The in-pod supervisor against kubexit (PID namespaces): the shipped linux/amd64 binaries.
bench_run() {
  bench_quick results 10 bench/run.sh --quick --bin target/images/bin/linux-amd64/sexton \
    --slim-bin target/images/bin/linux-amd64/sexton-slim
}
# The sizes of what ships (bench/ships.py: the docs quote them), from the images just built.
bench_ships() { bench_quick ships 2 python3 bench/ships.py --no-update; }
# The quick forms that need no node (webhook, hostile clients, scale, run), one after the
# other in the background, beside the end-to-end stage. Each runs for windows of fixed length
# (a minute or two; bench_quick's measured times above) and mostly waits, as do the node's
# scenarios (0.7 of a core, measured in a cold run): one after the other, the two took 12 of a
# cold run's 41 minutes. Their figures are not asserted; the node's scenarios bound every
# wait. The arm64 stage, whose emulated waits are the most sensitive to load, runs after.
start_benches() {
  export -f bench_quick bench_webhook bench_hostile bench_scale bench_run
  # shellcheck disable=SC2016  # (expanded by the inner shell)
  bg benches 0 bash -c 'set -e; for b in webhook hostile scale run; do
    t0=$SECONDS; "bench_$b"; echo "test.sh: bench-$b took $((SECONDS - t0)) s"; done'
}

# On the real node, after the scenarios (which leave it up): one run per strategy.
bench_node() {
  bench_quick completion 1 bench/completion.sh --quick --runs 1
  bench_quick deletion 1 bench/deletion.sh --quick
  bench_quick image-volume 1 bench/image-volume.sh --quick
}

# The release, as the workflow makes it, pushed to the local test registry
# (scripts/release.sh: binaries, SBOM, krew manifest, chart, signed checksums, images).
release() { RERUN="  scripts/release.sh local"; scripts/release.sh local; RERUN=""; }

# The contributor's loop: everything that needs neither Go nor a control plane nor images,
# built with the same profile as the full run (so each warms the other): the unit and
# property tests of every crate, sexton-inject's golden files, the webhook fuzzed as a process, and the in-pod integration
# tests (real processes in PID namespaces; contract.rs: sexton-core's and the in-pod one) but
# api.rs, which talks to the API server.
# --workspace, as the full run's build and tests: a subset of the packages would resolve
# other features and build everything a second time.
QUICK_TESTS=(--workspace --lib --bins
  --test core_properties --test tombstone_fuzz --test golden --test admission --test contract --test webhook_fuzz
  --test supervisor --test faults_process --test faults_graveyard --test faults_extra --test resilience --test docs)

# ---- the run ----------------------------------------------------------------------------

case $MODE in
  quick)
    setup
    timed quick cargo_tests "${QUICK_TESTS[@]}" ;;
  stage)
    setup
    case $STAGE in
      setup) ;;
      layers) timed layers layers ;;
      images) timed images images ;;
      build) timed build build ;;
      lint) need_go; timed lint lint ;;
      test) need_go; start_go_builds no-node; timed build build; timed go-builds wait_bg go-builds
        services; timed test cargo_tests ;;
      arm64) need_go; start_go_builds no-node; timed images images; timed build build
        timed go-builds wait_bg go-builds; services; timed arm64 arm64 ;;   # (api.rs: the API server)
      e2e) need_go; start_go_builds node; timed images images; timed go-builds wait_bg go-builds
        services; e2e_stage ;;
      desktop) scripts/images.sh tools; start_desktop   # (their apt-gets one after the other)
        timed images scripts/images.sh cluster; timed desktop desktop ;;
      bench) need_go; start_go_builds no-node; start_bench_tools; timed images images; timed build build
        timed go-builds wait_bg go-builds; wait_bg bench-tools
        timed bench-webhook bench_webhook; timed bench-hostile bench_hostile; timed bench-scale bench_scale
        timed bench-run bench_run
        timed bench-ships bench_ships ;;
      release) start_release_tools; timed images images; timed release-tools wait_bg release-tools
        timed release release ;;
    esac ;;
  cargo)
    setup
    need_go
    start_go_builds no-node
    timed build build
    timed go-builds wait_bg go-builds
    services
    timed test cargo_tests "${CARGO_ARGS[@]}" ;;
  full)
    # A cold run is CPU-bound on two cores: everything not needed next is built in the
    # background, at a priority that lets what is needed next go first, so that the
    # stages that mostly wait (the tests, the node's scenarios, the release's pushes) leave
    # no core idle. The Go builds at the priority of the foreground (the control plane is
    # needed as soon as the workspace is built), the in-pod LTO builds (needed for the
    # images after the tests) at 10, the release tools (needed last) at 19; a job waited
    # for is raised to the foreground's priority (wait_bg).
    setup
    need_go
    scripts/images.sh tools      # (once, before two images.sh run at the same time)
    start_registry
    start_desktop
    start_go_builds node
    start_bench_tools
    start_book_tools
    start_release_tools
    bg in-pod 10 scripts/images.sh in-pod
    timed layers layers
    timed cluster scripts/images.sh cluster   # (the build stage: the tests' workspace build)
    timed go-builds wait_bg go-builds
    timed lint lint
    services
    timed test cargo_tests
    timed in-pod wait_bg in-pod
    timed images scripts/images.sh package
    timed bench-tools wait_bg bench-tools
    start_benches                             # (beside the end-to-end stage)
    timed bench-ships bench_ships
    e2e_stage
    timed benches wait_bg benches
    timed arm64 arm64
    timed desktop desktop
    timed release release ;;
esac
echo "test.sh: seconds per step:${TIMES} (all: ${SECONDS})"
if [ -n "$BG_NAMES" ]; then
  cpu=""; for name in $BG_NAMES; do cpu="$cpu $name $(cpu_of "$name")"; done
  times >"${TMPDIR:-/tmp}/sexton-test-all.cpu"   # (not in a subshell: its children are not ours)
  echo "test.sh: CPU-seconds per background job:$cpu; of the whole run, daemons aside: $(cpu_of all)"
fi
