# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Helpers that several e2e scenarios share (e2e/scenarios/); sourced by e2e/run.sh after its
# set-up, which defines the ones every scenario uses (fail, pass, fresh_ns, ...).

# the pod's containers and init containers: phase name=exit ...
all_states() {
  kubectl -n "$1" get pods -l "job-name=$2" \
    -o jsonpath='{range .items[*]}{.status.phase}{range .status.initContainerStatuses[*]} {.name}={.state.terminated.exitCode}{end}{range .status.containerStatuses[*]} {.name}={.state.terminated.exitCode}{end}{end}'
}

# bin_volume NS JOB: the Job's pod's volume sexton-bin ("image REF", "emptyDir") and its init
# containers' names.
bin_volume() {
  kubectl -n "$1" get pods -l "job-name=$2" \
    -o jsonpath='{range .items[0].spec.volumes[?(@.name=="sexton-bin")]}{.image.reference}{.emptyDir}{end} init=[{.items[0].spec.initContainers[*].name}]'
}

# the pod's init and regular containers: phase name=exit/restarts ... (the kubelet lists
# each kind's statuses in the order of their names)
restart_states() {
  kubectl -n "$1" get pods -l "job-name=$2" \
    -o jsonpath='{range .items[*]}{.status.phase}{range .status.initContainerStatuses[*]} {.name}={.state.terminated.exitCode}/{.restartCount}{end}{range .status.containerStatuses[*]} {.name}={.state.terminated.exitCode}/{.restartCount}{end}{end}'
}

# job_webhook STRATEGY CODE: e2e/manifests/job-webhook.yaml for STRATEGY (auto: no annotation
# sexton.dev/inject, the default) and main's exit CODE.
job_webhook() {
  sed -e "s/STRATEGY/$1/g" -e "s/MAIN_CODE/$2/g" -e '/sexton.dev\/inject: auto$/d' "$M/job-webhook.yaml"
}

# The API server calls the webhook as soon as it has read the new configuration, which takes
# a moment: until then, a dry run of the Job's pod in the labelled namespace comes back not
# injected.
webhook_called() {
  local pod
  pod=$(job_webhook auto 0 | kubectl create --dry-run=client -o json -f - \
    | python3 -c 'import json, sys
j = json.load(sys.stdin)
t = j["spec"]["template"]
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "annotations": t["metadata"]["annotations"]}, "spec": t["spec"]}))')
  kubectl -n "$1" create --dry-run=server -o jsonpath='{.metadata.annotations.sexton\.dev/injected}' -f - <<<"$pod" \
    | grep -q '"mechanism":"native"'
}

# start_webhook N DIR LABELLED_NS: the release binary's webhook on this machine, over TLS with
# an openssl-made certificate for 127.0.0.1 (a CA of its own), on a port the kernel picks,
# with admin credentials (the RBAC of deploy/rbac-webhook.yaml is tested in tests/webhook.rs),
# registered by URL as sexton-e2e-PID (e2e/manifests/webhook-configuration.yaml; it sorts
# where sexton-webhook does), and called by the API server: WEBHOOK_PID, WEBHOOK_CONFIG,
# WEBHOOK_PORT, WEBHOOK_METRICS and WEBHOOK_LOG set. N names the scenario in failures.
start_webhook() {
  local n=$1 dir=$2 lab=$3 port
  rm -rf "$dir"; mkdir -p "$dir"; WEBHOOK_LOG="$dir/webhook.log"
  ca_create "$dir" sexton-e2e-webhook-ca
  cert_issue "$dir" "$dir/serving" /CN=127.0.0.1 serverAuth "IP:127.0.0.1"
  "$CTL_BIN" webhook --listen 127.0.0.1:0 --tls-cert-file "$dir/serving.crt" --tls-key-file "$dir/serving.key" \
    --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 --sexton-image sexton:e2e --kubeconfig "$KUBECONFIG" \
    >"$WEBHOOK_LOG" 2>&1 &
  WEBHOOK_PID=$!
  wait_until 30 grep -q 'serving the webhook bound=' "$WEBHOOK_LOG" || fail "$n: the webhook did not start: $(cat "$WEBHOOK_LOG")"
  port=$(sed -n 's/.*serving the webhook bound=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WEBHOOK_LOG")
  WEBHOOK_PORT=$port
  WEBHOOK_METRICS=$(sed -n 's/.*serving metrics-addr bound=\([0-9.:]*\).*/\1/p' "$WEBHOOK_LOG")
  if [ -z "$port" ] || [ -z "$WEBHOOK_METRICS" ]; then fail "$n: no addresses in the webhook's log: $(cat "$WEBHOOK_LOG")"; fi
  # auto's binary source reads the nodes' runtimes (until then it copies the binary)
  wait_until 30 grep -q 'node runtimes known nodes=1' "$WEBHOOK_LOG" || fail "$n: the webhook did not read the node: $(cat "$WEBHOOK_LOG")"
  WEBHOOK_CONFIG="sexton-e2e-$$"
  sed -e "s/NAME/$WEBHOOK_CONFIG/" -e "s/PORT/$port/g" -e "s/CA_BUNDLE/$(base64 -w0 "$dir/ca.crt")/g" \
    "$M/webhook-configuration.yaml" | kubectl apply -f - >/dev/null || fail "$n: cannot create the MutatingWebhookConfiguration"
  wait_until 30 webhook_called "$lab" \
    || fail "$n: the API server did not call the webhook at https://127.0.0.1:$port within 30 s; its log: $(cat "$WEBHOOK_LOG")"
}

job_pod() { kubectl -n "$1" get pods -l "job-name=$2" -o jsonpath='{.items[0].metadata.name}'; }

# start_vendor VENDOR DIR LABEL [--sidecar-args]: the stand-in of VENDOR's injector
# (testenv/vendor-webhook) on this machine, registered under the vendor's own configuration
# name for the namespaces labelled LABEL, its sidecar a busybox that serves the vendor's quit
# endpoint (quit-server.sh), as its command (or, with --sidecar-args, its args). The configuration's name is the cargo tests' too (testbed::Vendor):
# their lock is held meanwhile (fd 8).
start_vendor() {
  local vendor=$1 dir=$2 label=$3 how=${4:---sidecar-command} bin port
  bin=$("$ROOT/scripts/testenv.sh" vendor-webhook) || fail "14: cannot build testenv/vendor-webhook"
  rm -rf "$dir"; mkdir -p "$dir"
  ca_create "$dir" "sexton-e2e-$vendor-ca"
  cert_issue "$dir" "$dir/serving" /CN=127.0.0.1 serverAuth "IP:127.0.0.1"
  port=$(free_port)
  "$bin" --vendor "$vendor" --print-configuration --url "https://127.0.0.1:$port/mutate" \
    --ca-bundle "$dir/ca.crt" --namespace-label "$label" >"$dir/configuration.json" \
    || fail "14: vendor-webhook --print-configuration failed"
  VENDOR_CONFIG=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["metadata"]["name"])' <"$dir/configuration.json")
  exec 8>"$TESTENV_STATE/vendor-$VENDOR_CONFIG.lock"
  flock -w 120 8 || fail "14: $VENDOR_CONFIG is held by a test process for 120 s"
  "$bin" --vendor "$vendor" --listen "127.0.0.1:$port" --cert "$dir/serving.crt" --key "$dir/serving.key" \
    --image busybox:e2e "$how" "$(python3 -c 'import json, sys; print(json.dumps(["/bin/busybox", "sh", "-c", open(sys.argv[1]).read()]))' "$ROOT/testenv/vendor-webhook/quit-server.sh")" \
    >"$dir/vendor.log" 2>&1 &
  VENDOR_PID=$!
  kubectl apply -f "$dir/configuration.json" >/dev/null || fail "14: cannot register $VENDOR_CONFIG"
}

stop_vendor() {
  if [ -n "$VENDOR_CONFIG" ]; then
    kubectl delete mutatingwebhookconfiguration "$VENDOR_CONFIG" --ignore-not-found --request-timeout=20s >/dev/null 2>&1 || true
    VENDOR_CONFIG=""
    exec 8>&-
  fi
  if [ -n "$VENDOR_PID" ]; then
    kill "$VENDOR_PID" 2>/dev/null || true
    wait "$VENDOR_PID" 2>/dev/null || true
    VENDOR_PID=""
  fi
}

# dead_webhook N DIR: sexton's webhook configuration (scenario 10's) calling a port of this
# machine that nobody listens on, as when every replica is gone: the API server admits the
# pods unchanged (failurePolicy Ignore). WEBHOOK_CONFIG set (deleted on any exit).
dead_webhook() {
  local n=$1 dir=$2 port
  rm -rf "$dir"; mkdir -p "$dir"
  ca_create "$dir" sexton-e2e-dead-webhook-ca
  port=$(free_port)
  WEBHOOK_CONFIG="sexton-e2e-$$"
  sed -e "s/NAME/$WEBHOOK_CONFIG/" -e "s/PORT/$port/g" -e "s/CA_BUNDLE/$(base64 -w0 "$dir/ca.crt")/g" \
    "$M/webhook-configuration.yaml" | kubectl apply -f - >/dev/null || fail "$n: cannot create the MutatingWebhookConfiguration"
}

# net_controller N NS LOG: the controller with the safety net alone, for NS, reading
# WEBHOOK_CONFIG; returns once it is ready (its caches filled).
net_controller() {
  local n=$1 health
  controller "$2" "$3" --quick-exit-image sexton-quick-exit:e2e --controllers safety-net \
    --webhook-configuration "$WEBHOOK_CONFIG"
  wait_until 30 grep -q 'serving health-addr bound=' "$3" || fail "$n: the controller did not start: $(cat "$3")"
  health=$(sed -n 's/.*serving health-addr bound=\([0-9.:]*\).*/\1/p' "$3")
  wait_until 30 curl -sf --max-time 2 "http://$health/readyz" -o /dev/null || fail "$n: the controller is not ready: $(tail -5 "$3")"
}

# sidecar_end NS POD NAME: "IMAGE EXIT RESTARTS STARTED FINISHED" of a container's state.
sidecar_end() {
  kubectl -n "$1" get pod "$2" -o json | python3 -c '
import json, sys
pod, name = json.load(sys.stdin), sys.argv[1]
for s in pod["status"].get("containerStatuses", []):
    if s["name"] == name:
        t = s.get("state", {}).get("terminated") or {}
        print(s["image"], t.get("exitCode", "running"), s.get("restartCount", 0), t.get("startedAt", "-"), t.get("finishedAt", "-"))' "$3"
}
