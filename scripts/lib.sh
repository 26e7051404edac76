# shellcheck shell=bash
# Helpers shared by scripts/testenv.sh, scripts/e2e-cluster.sh and e2e/run.sh: where things
# live, messages, bounded waits, processes tracked by pid file, TCP ports, certificates and
# kubeconfigs. Sourced, never run; `lib_init NAME STATE_DIR` comes first.

# Where things live, for every script (the environment overrides them).
# shellcheck disable=SC2034  # used by the scripts that source this file
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTENV_STATE="${SEXTON_TESTENV_STATE:-/tmp/sexton-testenv}"
E2E_STATE="${SEXTON_E2E_STATE:-/tmp/sexton-e2e}"
API_PORT="${SEXTON_API_PORT:-16443}"
# The Kubernetes release pinned in testenv/go.mod, and the binaries built from it.
K8S_VERSION="$(sed -nE 's/^(require)?[[:space:]]*k8s\.io\/kubernetes (v[0-9.]+).*/\2/p' "$ROOT/testenv/go.mod" | head -1)"
HELM_VERSION="$(sed -nE 's/^(require)?[[:space:]]*helm\.sh\/helm\/v4 (v[0-9.]+).*/\2/p' "$ROOT/testenv/go.mod" | head -1)"
# containerd (with its runc shim and ctr) for the e2e node, pinned in the same go.mod and
# built in the same go build; cached beside the release's binaries, in a directory of its
# version (the node's containerd finds its shim on PATH).
CONTAINERD_VERSION="$(sed -nE 's/^(require)?[[:space:]]*github\.com\/containerd\/containerd\/v2 (v[0-9.]+).*/\2/p' "$ROOT/testenv/go.mod" | head -1)"
CACHE_ROOT="${SEXTON_TESTENV_CACHE:-$HOME/.cache/sexton-testenv}"
# shellcheck disable=SC2034
CACHE="$CACHE_ROOT/$K8S_VERSION"
# shellcheck disable=SC2034
CONTAINERD_DIR="$CACHE/containerd-$CONTAINERD_VERSION"

# node_ctr ARGS...: the e2e node's ctr (built with its containerd), on its containerd; without
# the warning containerd 2.x has every client print on cgroup v1 (see e2e-cluster.sh).
node_ctr() {
  "$CONTAINERD_DIR/ctr" --address "$E2E_STATE/containerd.sock" "$@" \
    2> >(grep -v 'support for cgroup v1 is deprecated' >&2)
}

# Every Go build's compiler flags: no DWARF from the compiler (the links' -w drops it
# anyway), which saves CPU in every build from an empty cache, and a cold run compiles a
# lot of Go (CONTRIBUTING.md, where a cold run's time goes).
# shellcheck disable=SC2034  # (used by the scripts that source this file)
GO_GCFLAGS="all=-dwarf=false"

# The workspace build that the tests run and that kubectl-sexton ships from for linux/amd64
# (scripts/images.sh takes its binary from target/x86_64-unknown-linux-gnu/release-nolto):
# one command, so that both get the very same build (Cargo.toml, profile release-nolto). The
# benches are included: their harness must keep compiling, and any other choice of targets
# would resolve other features and build the binary a second time.
build_workspace() { (cd "$ROOT" && cargo build --profile release-nolto --locked --benches "$@"); }

# lib_init NAME STATE_DIR: NAME prefixes every message; STATE_DIR holds the pid files and logs.
# A relative STATE_DIR is refused: pid files would land in whatever directory the script
# runs from (a scheduler.pid was once committed at the repository's root).
lib_init() {
  LIB_NAME=$1 LIB_STATE=$2
  case "$LIB_STATE" in
    /*) ;;
    *) die "state directory '$LIB_STATE' is not an absolute path" ;;
  esac
  [ -n "$K8S_VERSION" ] || die "no k8s.io/kubernetes version in testenv/go.mod"
}

# log MESSAGE, die MESSAGE: one line on stderr, prefixed with LIB_NAME (lib_init's NAME, or
# set by the script), else the script's file name; die exits 1. Every script's messages.
log() { echo "${LIB_NAME:-${0##*/}}: $*" >&2; }
die() { echo "${LIB_NAME:-${0##*/}}: error: $*" >&2; exit 1; }

# apt_install PACKAGE...: Debian's packages, quietly (sudo unless root; the package lists
# updated once per script). Every apt-get waits up to 10 minutes for dpkg's lock rather than
# fail at once: scripts/test.sh installs from background steps (desktop.sh's Wine) while
# later stages install theirs.
APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null || die "missing: $* (install it with your package manager)"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  log "installing $*"
  [ $APT_UPDATED = 1 ] || { $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null; APT_UPDATED=1; }
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}

# quietly COMMAND...: runs COMMAND with its output hidden, unless it fails.
quietly() {
  local out
  out=$("$@" 2>&1) || die "$1 failed: $out"
}

not() { ! "$@"; }

# wait_until SECONDS COMMAND...: runs COMMAND (output discarded) every 0.2 s until it
# succeeds; returns 1 after SECONDS.
wait_until() {
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}

# wait_for WHAT SECONDS COMMAND...: wait_until, and after SECONDS die naming WHAT, with the
# end of each log of the state directory: a caller's cleanup (scripts/test.sh's EXIT trap
# runs `down`) removes that directory, and with it the only trace of why.
wait_for() {
  local what=$1 secs=$2 f; shift 2
  wait_until "$secs" "$@" && return 0
  for f in "$LIB_STATE"/*.log; do
    [ -f "$f" ] || continue
    echo "${LIB_NAME:-${0##*/}}: the end of $f:" >&2
    tail -n 15 "$f" | sed 's/^/  /' >&2
  done
  die "$what not ready after ${secs}s (logs in $LIB_STATE)"
}

## Processes. A pid file holds "PID START": START, the process's start time (clock ticks
## after boot), names one process for good, so a stale pid file never points at a stranger
## that got the same PID.

# stat_of PID: sets STAT to the fields of /proc/PID/stat after the command name (which may
# hold spaces and parentheses): STAT[0] the state, STAT[1] the parent, STAT[19] the start time.
stat_of() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -r -a STAT <<<"${s##*) }"
}

start_time() { stat_of "$1" && echo "${STAT[19]}"; }

# running PID [START]: the process exists and has not exited. A zombie has exited: only its
# parent can reap it, and that parent may be slow or never do it (PID 1 of a container).
running() {
  stat_of "$1" && [ "${STAT[0]}" != Z ] && { [ -z "${2:-}" ] || [ "${STAT[19]}" = "$2" ]; }
}

# children_of PID: the PIDs of PID's children, zombies included.
children_of() {
  local p
  for p in /proc/[0-9]*; do
    stat_of "${p#/proc/}" && [ "${STAT[1]}" = "$1" ] && echo "${p#/proc/}"
  done
  return 0
}

record_pid() { echo "$2 $(start_time "$2")" >"$LIB_STATE/$1.pid"; }

# pid_of NAME: the PID in NAME's pid file.
pid_of() { local pid _; read -r pid _ <"$LIB_STATE/$1.pid" && echo "$pid"; }

# alive NAME: the process NAME's pid file names is running.
alive() {
  local pid start
  [ -f "$LIB_STATE/$1.pid" ] || return 1
  read -r pid start <"$LIB_STATE/$1.pid" || [ -n "${pid:-}" ] || return 1
  running "$pid" "$start"
}

# spawn NAME COMMAND...: starts COMMAND in the background, output in STATE/NAME.log,
# recorded in STATE/NAME.pid. In a session of its own: it runs until `down`, and a Ctrl-C
# meant for the caller (e2e/run.sh, a test) must not reach it; the daemons here (kubelet,
# containerd, kube-apiserver) handle SIGINT, and a half-killed node leaves orphaned shims.
# (setsid keeps the PID: a background child of a script is no process group leader.)
spawn() {
  local name=$1; shift
  setsid "$@" >"$LIB_STATE/$name.log" 2>&1 </dev/null &
  record_pid "$name" $!
}

# spawn_reaped NAME COMMAND...: like spawn, with COMMAND as the child of a reaper of our own
# (REAPER below) whose PID goes into NAME's pid file. For daemons whose children outlive them
# by design: containerd's shims.
spawn_reaped() {
  local name=$1; shift
  command -v python3 >/dev/null || die "python3 is needed (apt-get install python3)"
  printf '%s' "$REAPER" >"$LIB_STATE/reaper.py"
  setsid python3 "$LIB_STATE/reaper.py" "$name" "$@" >"$LIB_STATE/$name.log" 2>&1 </dev/null &
  record_pid "$name" $!
}

# The reaper: a child subreaper (prctl PR_SET_CHILD_SUBREAPER) that runs COMMAND, forwards
# SIGTERM to it, and reaps every process it adopts; it exits once COMMAND and everything it
# adopted have exited. Why: the kernel gives an orphan to its nearest subreaper ancestor,
# else to PID 1. containerd daemonizes each shim (`containerd-shim-runc-v2 start` forks the
# shim and exits), so without a subreaper the shims belong to PID 1, which in a container is
# often a process that never reaps: every exited shim stayed <defunct>. Under the reaper
# they are reaped at once, and the reaper's own exit proves that none is left.
# shellcheck disable=SC2016
REAPER='# the reaper of scripts/lib.sh (spawn_reaped): reaper.py NAME COMMAND...
import ctypes, os, signal, sys
name, argv = sys.argv[1], sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(15, ("reap-" + name)[:15].encode(), 0, 0, 0)  # PR_SET_NAME: what ps shows
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("reaper: prctl(PR_SET_CHILD_SUBREAPER): " + os.strerror(ctypes.get_errno()))
child = os.fork()
if child == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print("reaper: cannot run %s: %s" % (argv[0], e), file=sys.stderr, flush=True)
    os._exit(127)
done = False
def forward(sig, _frame):
    if not done:
        os.kill(child, sig)
signal.signal(signal.SIGTERM, forward)
code = 0
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        break  # nothing left: the command and everything it left behind are reaped
    if pid == child:
        done = True
        code = os.waitstatus_to_exitcode(status)
        print("reaper: %s exited (%d)" % (argv[0], code), flush=True)
sys.exit(code if code >= 0 else 128 - code)
'

# stop [-t SECONDS] NAME...: for each NAME in turn, SIGTERM to the process in its pid file,
# SIGKILL after SECONDS (default 5), until it has exited; then waits for all to be reaped
# (await_reaped). A stale pid file is only removed.
stop() {
  local secs=5 name pid start stopped=()
  if [ "$1" = -t ]; then secs=$2; shift 2; fi
  for name in "$@"; do
    [ -f "$LIB_STATE/$name.pid" ] || continue
    read -r pid start <"$LIB_STATE/$name.pid" || true
    if [ -n "${pid:-}" ] && running "$pid" "$start"; then
      kill "$pid" 2>/dev/null || true
      # (kube-apiserver takes 60 s to drain its connections: no need to wait for that here)
      if ! wait_until "$secs" not running "$pid" "$start"; then
        kill -9 "$pid" 2>/dev/null || true
        wait_until 5 not running "$pid" "$start" || die "$name (pid $pid) survived SIGKILL"
      fi
      stopped+=("$name $pid $start")
    fi
    rm -f "$LIB_STATE/$name.pid"
  done
  for name in "${stopped[@]}"; do
    # shellcheck disable=SC2086  # name pid start
    await_reaped $name
  done
}

# gone PID START: not even a zombie any more (exited and reaped).
gone() { ! stat_of "$1" || [ "${STAT[19]}" != "$2" ]; }

# await_reaped NAME PID START: a daemon that exited stays a zombie until its parent reaps it;
# once `up` has exited, that parent is PID 1 (or the nearest subreaper), which may reap late
# or never. Waits a little, so that what stops daemons leaves a clean process table, and
# says who does not reap.
await_reaped() {
  wait_until 5 gone "$2" "$3" && return 0
  stat_of "$2" && log "$1 (pid $2) exited, but its parent (pid ${STAT[1]}) has not reaped it in 5s"
  return 0
}

## Ports

# port_in_use PORT [HOST]: something accepts TCP connections on HOST (127.0.0.1):PORT.
port_in_use() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

# free_port: a TCP port of 127.0.0.1 that was free a moment ago (bound and released), picked
# at random in 27000-29999, below the kernel's ephemeral range, so that no outgoing
# connection's source port takes it before its server binds it; none of our fixed ports is
# in that band (testbed::free_ports in crates/testbed/src/local.rs says why, and picks alike).
# Where the ephemeral range reaches into the band, the kernel picks.
free_port() {
  python3 - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
ports = random.sample(range(27000, 30000), 200) if low >= 30000 else []
for port in ports + [0]:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(s.getsockname()[1])
    break
PY
}

# ports_free WHAT PORT...: dies naming WHAT's first port (on 127.0.0.1) that is taken.
ports_free() {
  local what=$1 p; shift
  for p in "$@"; do
    port_in_use "$p" && die "port $p on 127.0.0.1 ($what) is taken by another process"
  done
  return 0
}

## Certificates (openssl) and kubeconfigs

# ca_create DIR CN: a certificate authority, DIR/ca.key and DIR/ca.crt.
ca_create() {
  command -v openssl >/dev/null || die "openssl is needed (apt-get install openssl)"
  quietly openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$2" \
    -keyout "$1/ca.key" -out "$1/ca.crt"
}

# cert_issue CA_DIR OUT SUBJECT USAGE [SAN]: OUT.key and OUT.crt, signed by CA_DIR's CA.
# USAGE is clientAuth (SUBJECT /CN=user/O=group is who the API server or kubelet sees) or
# serverAuth (SAN: the names and addresses served, "IP:127.0.0.1, DNS:localhost").
cert_issue() {
  local ca=$1 out=$2 subj=$3 usage=$4 san=${5:-}
  {
    echo "[ext]"
    echo "basicConstraints = CA:FALSE"
    echo "keyUsage = digitalSignature, keyEncipherment"
    echo "extendedKeyUsage = $usage"
    [ -z "$san" ] || echo "subjectAltName = $san"
  } >"$out.ext"
  quietly openssl req -new -newkey rsa:2048 -nodes -subj "$subj" -keyout "$out.key" -out "$out.csr"
  quietly openssl x509 -req -in "$out.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial \
    -days 3650 -extfile "$out.ext" -extensions ext -out "$out.crt"
  rm -f "$out.ext" "$out.csr"
}

# write_kubeconfig FILE USER CERT: a kubeconfig for the test API server, as USER with the
# client certificate CERT.crt and CERT.key.
write_kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sexton-testenv
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $TESTENV_STATE/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $3.crt
    client-key: $3.key
contexts:
- name: sexton-testenv
  context: {cluster: sexton-testenv, user: $2}
current-context: sexton-testenv
EOF
}
