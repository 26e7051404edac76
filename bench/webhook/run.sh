#!/usr/bin/env bash
# The admission webhook's latency under load: `kubectl-sexton webhook` (release build) on
# loopback with TLS, driven by vegeta at constant rates over HTTP/1.1 keep-alive (as the API
# server calls webhooks), with realistic AdmissionReviews of a Job's Pod: one with a sidecar
# carrying OpenKruise's marker (native injection: a JSON patch), one with no sidecar (admitted
# unchanged). The webhook's CPU (utime + stime) and RSS (every second) at each rate, then a
# long run at 500 requests/s for memory. Next to it, measured the same way one after the
# other: bench/webhook/gofloor, a minimal Go webhook (net/http, k8s.io/api types) that
# returns the same patch, the floor of what an admission webhook costs.
#   bench/webhook/run.sh                 100, 500, 1 000 req/s x both cases x both servers (30 s
#                                    each after a 5 s warm-up) and 5 minutes at 500 req/s per
#                                    server (about 20 minutes without waits); rewrites the
#                                    results of "Admission webhook: latency under load" in
#                                    BENCHMARKS.md
#   bench/webhook/run.sh --quick         3 s per rate after 1 s of warm-up, a 10 s long run, BENCHMARKS.md
#                                    left alone: to check the harness (about 70 s without waits)
#   bench/webhook/run.sh --secs N --warmup N --soak-secs N (0: none) --rates 100,500,1000
#   bench/webhook/run.sh --no-update     BENCHMARKS.md left alone
#   bench/webhook/run.sh --no-go-floor   sexton alone
#   bench/webhook/run.sh --bin FILE      measure this kubectl-sexton (no build)
#   bench/webhook/run.sh --kubeconfig F  give the webhook this cluster (default: see below)
#   bench/webhook/run.sh --max-wait N    wait at most N s per window for builds to end (600)
#   bench/webhook/run.sh --max-wait-total N   ... and N s over the whole run (1800)
#   bench/webhook/run.sh --tools         only build vegeta and the Go floor (scripts/test.sh: in the
#                                    background, beside the Rust build)
#   bench/webhook/run.sh --nice N        run both webhooks and vegeta at this niceness (e.g. -10:
#                                    ahead of builds that never stop; root); said in the results
# Before each window it waits until no build process (rustc, cargo, their linkers, go and
# its compile/link) has run for 3 s (other engineers build on this machine); windows with
# more than 0.25 cores of other load are measured again once. Raw results:
# target/bench/webhook.json (stamped: bench/lib/stamp.py), the tables in target/bench/webhook.md.
#
# No API server is needed: with --kubernetes-version the webhook asks the API server for
# nothing at start, and these reviews (no refusal, so no Event; `native` needs no registry
# lookup) make it call nothing either. Its client is built from a kubeconfig that points at
# a closed port; the run fails if the webhook logs anything at warn or error.
#
# vegeta is built from its Go module into ~/.cache/sexton-bench (VEGETA_BIN to use another),
# and so is the Go floor (bench/webhook/gofloor: its go.mod and go.sum pin k8s.io/api;
# GOFLOOR_BIN to use another build; with SEXTON_BENCH_PEERS=if-built, only if built before).
set -euo pipefail
CALLER=$PWD   # (paths given with --bin and --kubeconfig are the caller's)
abs() { case $1 in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }
cd "$(dirname "$0")/../.."
SECS=30 WARMUP=5 SOAK=300 RATES=100,500,1000 UPDATE=true BIN="" KUBECONFIG_FILE="" MAX_WAIT=600
MAX_WAIT_TOTAL=1800 GO_FLOOR=true NICE="" TOOLS_ONLY=false
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) SECS=3 WARMUP=1 SOAK=10 UPDATE=false; export SEXTON_BENCH_SETTLE=${SEXTON_BENCH_SETTLE:-0} ;;
    --secs) SECS=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --soak-secs) SOAK=$2; shift ;;
    --rates) RATES=$2; shift ;;
    --no-update) UPDATE=false ;;
    --bin) BIN="$(abs "$2")"; shift ;;
    --kubeconfig) KUBECONFIG_FILE="$(abs "$2")"; shift ;;
    --max-wait) MAX_WAIT=$2; shift ;;
    --max-wait-total) MAX_WAIT_TOTAL=$2; shift ;;
    --no-go-floor) GO_FLOOR=false ;;
    --nice) NICE=$2; shift ;;
    --tools) TOOLS_ONLY=true ;;
    *) echo "bench/webhook/run.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=scripts/lib.sh
. scripts/lib.sh    # (log)
LIB_NAME=bench/webhook
OUT=target/bench
WORK=$OUT/webhook
rm -rf "$WORK" && mkdir -p "$WORK"

CACHE="${SEXTON_BENCH_CACHE:-$HOME/.cache/sexton-bench}"
VEGETA_VERSION="${VEGETA_VERSION:-v12.13.0}"
VEGETA="${VEGETA_BIN:-$CACHE/bin/vegeta-$VEGETA_VERSION}"
if [ ! -x "$VEGETA" ]; then
  log "building vegeta $VEGETA_VERSION from its Go module into $CACHE/bin"
  mkdir -p "$CACHE/bin"
  tmp="$(mktemp -d)"
  # (the compiler flags of every Go build here, scripts/lib.sh's GO_GCFLAGS: with the same
  # flags, the standard library the test control plane's build compiled serves this one)
  GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
    -gcflags "$(. scripts/lib.sh && echo "$GO_GCFLAGS")" -ldflags "-s -w" \
    "github.com/tsenart/vegeta/v12@$VEGETA_VERSION" >&2
  mv "$tmp/vegeta" "$VEGETA" && rmdir "$tmp"
fi
VEGETA_MOD="$(go version -m "$VEGETA" 2>/dev/null | awk '$1 == "mod" { print $3 }')"
VEGETA_GO="$(go version "$VEGETA" 2>/dev/null | awk '{ print $2 }')"
VEGETA_DESC="${VEGETA_MOD:-$VEGETA_VERSION} (github.com/tsenart/vegeta/v12, built with ${VEGETA_GO:-go})"

# The Go floor, named after its source (a change to it builds it again).
GOFLOOR_DESC=""
if $GO_FLOOR; then
  src=bench/webhook/gofloor
  GOFLOOR="${GOFLOOR_BIN:-$CACHE/bin/gofloor-$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-12)}"
  if [ ! -x "$GOFLOOR" ] && [ "${SEXTON_BENCH_PEERS:-build}" = if-built ]; then
    log "the Go floor is not built, and SEXTON_BENCH_PEERS=if-built builds no peer: sexton alone"
    GO_FLOOR=false
  fi
fi
if $GO_FLOOR; then
  if [ ! -x "$GOFLOOR" ]; then
    log "building the Go floor ($src) into $CACHE/bin"
    mkdir -p "$CACHE/bin"
    (cd "$src" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
      go build -trimpath -ldflags "-s -w" -o "$GOFLOOR.tmp" . >&2)
    mv "$GOFLOOR.tmp" "$GOFLOOR"
  fi
  K8S_API="$(go version -m "$GOFLOOR" 2>/dev/null | awk '$1 == "dep" && $2 == "k8s.io/api" { print $3 }')"
  GOFLOOR_GO="$(go version "$GOFLOOR" 2>/dev/null | awk '{ print $2 }')"
  GOFLOOR_DESC="(k8s.io/api ${K8S_API:-?}, ${GOFLOOR_GO:-go}, $(stat -c %s "$GOFLOOR" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta') bytes)"
fi

if $TOOLS_ONLY; then
  log "built: $VEGETA${GOFLOOR_DESC:+ and the Go floor $GOFLOOR}"
  exit 0
fi

COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates Cargo.lock || echo '+changes')"
if [ -z "$BIN" ]; then
  # the build that ships for linux/amd64 (Cargo.toml, profile release-nolto)
  (. scripts/lib.sh && build_workspace >&2)
  BIN=target/x86_64-unknown-linux-gnu/release-nolto/kubectl-sexton
  BUILT="built from \`$COMMIT\`"
else
  # a binary built by someone else: its date says which tree it is (copy it with cp -p),
  # HEAD only when measured
  BUILT="given with --bin, built $(date -u -r "$BIN" +%Y-%m-%dT%H:%M:%SZ) (HEAD when measured: \`$COMMIT\`)"
fi
# (a copy: another build replacing the binary during the run changes nothing measured)
cp "$BIN" "$WORK/kubectl-sexton"

# A throwaway serving certificate: ECDSA P-256 like the self-managed mode's (rcgen).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null

if [ -z "$KUBECONFIG_FILE" ]; then
  KUBECONFIG_FILE="$WORK/kubeconfig"
  cat >"$KUBECONFIG_FILE" <<'EOF'
apiVersion: v1
kind: Config
clusters:
- name: unreachable
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: unreachable
  context: {cluster: unreachable, user: nobody}
current-context: unreachable
users:
- name: nobody
  user: {token: none}
EOF
fi

RUN=()
[ -z "$NICE" ] || RUN=(nice -n "$NICE")
# The webhook as deploy/webhook.yaml runs it (JSON logs at info: one line per injection),
# its log in a file. The Go floor likewise (its own JSON line per injection).
"${RUN[@]}" "$WORK/kubectl-sexton" webhook --tls-cert-file "$WORK/tls.crt" --tls-key-file "$WORK/tls.key" \
  --listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 \
  --kubernetes-version 1.34 --kubeconfig "$KUBECONFIG_FILE" --sexton-image ghcr.io/sexton-dev/sexton:0.1.0 \
  --log-format json 2>"$WORK/webhook.log" &
PID=$!
GOPID=""
if $GO_FLOOR; then
  "${RUN[@]}" "$GOFLOOR" --listen 127.0.0.1:0 --tls-cert-file "$WORK/tls.crt" --tls-key-file "$WORK/tls.key" \
    2>"$WORK/gofloor.log" &
  GOPID=$!
fi
stop() {
  for p in $PID $GOPID; do
    if kill "$p" 2>/dev/null; then wait "$p" 2>/dev/null || true; fi
  done
}
trap stop EXIT
# bound FILE MESSAGE: the address a server logged with MESSAGE (tracing: "message", slog: "msg")
bound() {
  grep -E "\"(message|msg)\":\"$2\"" "$1" | sed -n 's/.*"bound":"\([^"]*\)".*/\1/p' | head -1
}
started() { # started FILE PID NAME
  for _ in $(seq 100); do
    [ -n "$(bound "$1" 'serving the webhook')" ] && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  cat "$1" >&2
  echo "bench/webhook/run.sh: $3 did not start" >&2
  exit 1
}
started "$WORK/webhook.log" "$PID" "the webhook"
ADDR="$(bound "$WORK/webhook.log" 'serving the webhook')"
METRICS="$(bound "$WORK/webhook.log" 'serving metrics-addr')"
SERVERS=(--server "sexton,$PID,https://$ADDR/mutate,http://$METRICS/metrics")
log "webhook PID $PID on https://$ADDR/mutate; vegeta $VEGETA_DESC"
if $GO_FLOOR; then
  started "$WORK/gofloor.log" "$GOPID" "the Go floor"
  GOADDR="$(bound "$WORK/gofloor.log" 'serving the webhook')"
  SERVERS+=(--server "go,$GOPID,https://$GOADDR/mutate")
  log "Go floor PID $GOPID on https://$GOADDR/mutate $GOFLOOR_DESC"
fi

python3 bench/lib/stamp.py begin >"$OUT/webhook.stamp.json"
python3 bench/webhook/measure.py run "${SERVERS[@]}" --ca "$WORK/tls.crt" --work "$WORK" \
  --vegeta "$VEGETA" --vegeta-version "$VEGETA_DESC" --go-floor "$GOFLOOR_DESC" \
  --commit "$BUILT" --binary-bytes "$(stat -c %s "$WORK/kubectl-sexton")" \
  --rates "$RATES" --secs "$SECS" --warmup "$WARMUP" --soak-secs "$SOAK" \
  --max-wait "$MAX_WAIT" --max-wait-total "$MAX_WAIT_TOTAL" ${NICE:+--nice "$NICE"} \
  --out "$OUT/webhook.json"

if grep -hE '"level":"(WARN|ERROR)"' "$WORK/webhook.log" "$WORK"/gofloor.log >&2 2>/dev/null; then
  echo "bench/webhook/run.sh: a webhook logged warnings or errors (above): results not recorded" >&2
  exit 1
fi
python3 bench/lib/stamp.py end "$OUT/webhook.stamp.json" "$OUT/webhook.json"
python3 bench/webhook/measure.py markdown "$OUT/webhook.json" | tee "$OUT/webhook.md"
if $UPDATE; then
  python3 bench/webhook/measure.py update "$OUT/webhook.json" BENCHMARKS.md
  log "BENCHMARKS.md updated"
fi
