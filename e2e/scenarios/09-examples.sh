# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 9, examples (e2e/run.sh examples; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   Every example of examples/ as it is, but for its image names (mapped to the node's: see
#   example()), with the outcome the docs promise: the Jobs of examples/*.yaml applied
#   together in one namespace (Complete; sidecars ended with 0; birth order kept; main's
#   failed first attempt survived by its OnFailure sidecar; the markers' sidecars swapped to
#   the quick-exit image; the API birth dependency's proxy ready first and told to quit),
#   the EphemeralJob over five pods in a namespace that enforces the restricted Pod Security
#   Standard (Succeeded, 5 of 5), and examples/inject/: job.yaml alone never completes (main
#   done, the sidecar still running), job.native.yaml and job.wrap.yaml complete.

# Scenario 9 runs the examples as users find them. Only their image names change, to the
# images scripts/e2e-cluster.sh imported into the node: the tag e2e gets the default pull
# policy IfNotPresent, and containerd files busybox:e2e as docker.io/library/busybox:e2e.
EXAMPLE_IMAGES=(busybox:1.36=busybox:e2e ghcr.io/sexton-dev/sexton:0.1.0=sexton:e2e ghcr.io/sexton-dev/sexton-quick-exit:0.1.0=sexton-quick-exit:e2e)

# node_ref IMAGE: the reference under which containerd files IMAGE (as the kubelet names it).
node_ref() {
  local r=$1 host=${1%%/*}
  if [[ $r != */* ]]; then
    r="docker.io/library/$r"
  elif [[ $host != *.* && $host != *:* && $host != localhost ]]; then
    r="docker.io/$r"
  fi
  [[ ${r##*/} == *[:@]* ]] || r="$r:latest"
  echo "$r"
}

# Reads the JSON of manifests: what `kubectl create --dry-run=client -o json` prints, one
# object after the other for a file of several documents. `images`: every image they name, a
# container's or a SidecarTerminator marker's, one a line. `api PORT`: the objects as one
# List, changed where the node needs it (below).
EXAMPLE_PY='
import json, sys
text, dec, pos, items = sys.stdin.read(), json.JSONDecoder(), 0, []
while True:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos == len(text):
        break
    o, pos = dec.raw_decode(text, pos)
    items += o["items"] if o.get("kind") == "List" else [o]
for o in items:
    # the namespace of the kubeconfig, which the client dry run fills in: the examples name
    # none, and go where the scenario creates them
    o.get("metadata", {}).pop("namespace", None)
doc = {"apiVersion": "v1", "kind": "List", "items": items}
def walk(v):
    if isinstance(v, dict):
        if isinstance(v.get("image"), str):
            yield v["image"]
        if str(v.get("name", "")).endswith("_WITH_IMAGE") and isinstance(v.get("value"), str):
            yield v["value"]
        for x in v.values():
            yield from walk(x)
    elif isinstance(v, list):
        for x in v:
            yield from walk(x)
if sys.argv[1] == "images":
    print("\n".join(sorted(set(walk(items)))))
    sys.exit(0)
for o in items:
    spec = o.get("spec", {}).get("template", {}).get("spec")
    if not isinstance(spec, dict):
        continue
    api = [c for c in spec.get("containers", []) if any(e.get("name") == "KUBEXIT_POD_NAME" for e in c.get("env", []))]
    if api:
        spec["hostNetwork"] = True
        for c in api:
            c["env"] += [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                         {"name": "KUBERNETES_SERVICE_PORT", "value": sys.argv[2]}]
json.dump(doc, sys.stdout)
'

# example FILE: FILE as JSON with its image names mapped (EXAMPLE_IMAGES); fails naming any
# image it would use that is not on the node. One more change, for this node only: it has
# no Service network (no kube-proxy; the API server listens on 127.0.0.1), so a pod whose
# sexton reads the API (KUBEXIT_POD_NAME) gets the host network and the API server's address,
# as scenario 2's does.
example() {
  local f=$1 m from sedargs=() json img have
  for m in "${EXAMPLE_IMAGES[@]}"; do
    from=${m%%=*}
    sedargs+=(-e "s#([[:space:]\"'])${from//./\\.}([[:space:]\"',#]|\$)#\\1${m#*=}\\2#g")
  done
  json=$(sed -E "${sedargs[@]}" "$f" | kubectl create --dry-run=client -o json -f -) \
    || fail "9: kubectl cannot read $f"
  have=$(timeout 30 "$CONTAINERD_DIR/ctr" --address "$E2E_STATE/containerd.sock" -n k8s.io images ls -q) \
    || fail "9: cannot list the node's images"
  for img in $(python3 -c "$EXAMPLE_PY" images <<<"$json"); do
    grep -qxF "$(node_ref "$img")" <<<"$have" \
      || fail "9: $f uses image $img, which the node does not have: map it in EXAMPLE_IMAGES to an image scripts/e2e-cluster.sh imports that has the commands the example runs"
  done
  python3 -c "$EXAMPLE_PY" api "$API_PORT" <<<"$json"
}

# wait_job NS JOB CONDITION: the Job reaches CONDITION (Complete, Failed) within 120 s.
wait_job() {
  kubectl -n "$1" wait --for=condition="$3" "job/$2" --timeout=120s >/dev/null \
    || fail "9: job $2 not $3: $(restart_states "$1" "$2")"
}

# log_has NS JOB CONTAINER TEXT: the container's log (sexton's lines included) contains TEXT.
log_has() {
  local got
  got=$(kubectl -n "$1" logs "job/$2" -c "$3" --request-timeout=20s 2>&1) || fail "9: kubectl logs of $2's $3: $got"
  [[ "$got" == *"$4"* ]] || fail "9: $2: $3's log does not say '$4': $got"
}

scenario9() {
  local ns log f p got want dir="$E2E_STATE/scenario9" rns rlog
  ns=$(fresh_ns examples); log="/tmp/e2e-controller-$ns.log"
  rm -rf "$dir"; mkdir -p "$dir"
  # examples/rbac-birth-deps.yaml's proxy listens on 15020 and 15021: here on the host's network
  for p in 15020 15021; do
    ! port_in_use "$p" || fail "9: port $p on this machine is taken: the proxy of examples/rbac-birth-deps.yaml, on the host network here, needs it"
  done
  for f in "$ROOT"/examples/*.yaml "$ROOT"/examples/inject/*.yaml; do
    example "$f" >"$dir/$(basename "$(dirname "$f")")-$(basename "$f" .yaml).json"
  done
  # The SidecarTerminator, for examples/job-sidecar-terminator.yaml.
  controller "$ns" "$log" --quick-exit-image sexton-quick-exit:e2e --controllers sidecar-terminator
  # examples/ephemeraljob.yaml says its container is admitted under the `restricted` Pod
  # Security Standard: it runs in a namespace that enforces it (the API server checks an
  # ephemeral container when it is added, with the rest of the pod), over five pods labelled
  # app=web whose `app` container runs a process named nginx, restricted themselves. A root
  # pod is refused there, so the namespace really enforces it.
  rns=$(fresh_ns examples-restricted pod-security.kubernetes.io/enforce=restricted)
  rlog="/tmp/e2e-controller-$rns.log"
  if got=$(kubectl -n "$rns" create --dry-run=server -f "$M/pod-echo.yaml" 2>&1); then
    fail "9: namespace $rns admitted a root pod: it does not enforce the restricted Pod Security Standard"
  fi
  [[ "$got" == *'violates PodSecurity "restricted'* ]] || fail "9: a root pod in $rns: $got"
  controller "$rns" "$rlog" --controllers ephemeraljob
  for p in 1 2 3 4 5; do
    sed "s/NAME/web-$p/" "$M/pod-nginx.yaml" | kubectl -n "$rns" apply -f - >/dev/null
  done
  kubectl -n "$rns" wait --for=condition=Ready pod -l app=web --timeout=120s >/dev/null || fail "9: the web pods are not Ready"
  got=$(stamped "$dir/examples-ephemeraljob.json" | kubectl -n "$rns" create -f - 2>&1) || fail "9: cannot create examples-ephemeraljob: $got"
  # the other examples/*.yaml together, in one namespace: `create` fails on a name used twice
  for f in "$dir"/examples-*.json; do
    [ "$f" != "$dir/examples-ephemeraljob.json" ] || continue
    got=$(kubectl -n "$ns" create -f "$f" 2>&1) || fail "9: cannot create $(basename "$f" .json): $got"
  done

  # job-sidecar.yaml: the sidecar stopped by sexton when main is done
  wait_job "$ns" report Complete
  got=$(restart_states "$ns" report)
  [ "$got" = "Succeeded install-sexton=0/0 main=0/0 proxy=0/0" ] || fail "9: job-sidecar.yaml: $got"
  # job-birth-order.yaml, migrate: main started once the proxy's port was open (its fetch
  # would have been refused before), and the proxy was stopped when main exited
  wait_job "$ns" migrate Complete
  got=$(restart_states "$ns" migrate)
  [ "$got" = "Succeeded install-sexton=0/0 db-proxy=0/0 main=0/0" ] || fail "9: job-birth-order.yaml (migrate): $got"
  log_has "$ns" migrate main "proxy: up"
  log_has "$ns" migrate db-proxy 'death dependency "main" died with exit code 0'
  # job-birth-order.yaml, retrying-report: main's first attempt failed, the kubelet restarted
  # it, the log shipper ran on through it (KUBEXIT_DEATH_TRIGGER=success) and stopped after
  # the second attempt's 0
  wait_job "$ns" retrying-report Complete
  got=$(restart_states "$ns" retrying-report)
  [ "$got" = "Succeeded install-sexton=0/0 log-shipper=0/0 main=0/1" ] || fail "9: job-birth-order.yaml (retrying-report): $got"
  log_has "$ns" retrying-report log-shipper "not stopping the child (KUBEXIT_DEATH_TRIGGER=success"
  log_has "$ns" retrying-report log-shipper 'death dependency "main" died with exit code 0'
  # job-sidecar-terminator.yaml: both marked sidecars swapped to the quick-exit image (the
  # controller's default, and the one the marker names) and restarted by the kubelet
  wait_job "$ns" migrate-unwrapped Complete
  got=$(kubectl -n "$ns" get pods -l job-name=migrate-unwrapped \
    -o jsonpath='{.items[0].status.phase}{range .items[0].status.containerStatuses[*]} {.name}:{.image}:{.state.terminated.exitCode}:{.restartCount}{end}')
  want="Succeeded main:docker.io/library/busybox:e2e:0:0 proxy:docker.io/library/sexton-quick-exit:e2e:0:1 sql-proxy:docker.io/library/sexton-quick-exit:e2e:0:1"
  [ "$got" = "$want" ] || fail "9: job-sidecar-terminator.yaml: '$got', want '$want'; controller log $log"
  # rbac-birth-deps.yaml: main started once the unwrapped proxy was ready as the kubelet
  # reported it (read through the API with the example's RBAC), and its shutdown hook told
  # the proxy to quit
  wait_job "$ns" migrate-mesh Complete
  got=$(restart_states "$ns" migrate-mesh)
  [ "$got" = "Succeeded install-sexton=0/0 main=0/0 proxy=0/0" ] || fail "9: rbac-birth-deps.yaml: $got"
  log_has "$ns" migrate-mesh main "migrated through the proxy"
  log_has "$ns" migrate-mesh main "shutdown hook succeeded"
  log_has "$ns" migrate-mesh proxy "told to quit"
  # ephemeraljob.yaml: every web pod checked, two at a time, under the restricted standard
  kubectl -n "$rns" wait --for=jsonpath='{.status.phase}'=Succeeded ejob/check-alive --timeout=120s >/dev/null \
    || fail "9: ephemeraljob.yaml: $(kubectl -n "$rns" get ejob check-alive -o jsonpath='{.status}'); controller log $rlog"
  stop_controllers
  got=$(kubectl -n "$rns" get ejob check-alive -o jsonpath='{.status.match} {.status.succeeded} {.status.failed}')
  [ "$got" = "5 5 0" ] || fail "9: ephemeraljob.yaml: match/succeeded/failed = $got"
  pass "9: examples/*.yaml together: report, migrate, retrying-report (main restarted once), migrate-unwrapped (sidecars swapped), migrate-mesh (API birth dependency, shutdown hook) Complete, sidecars ended with 0; ejob check-alive Succeeded 5/5 in a namespace enforcing the restricted Pod Security Standard"

  # examples/inject/: each form of the Job `report` in a namespace of its own
  local native wrap plain
  native=$(fresh_ns inject-native) wrap=$(fresh_ns inject-wrap) plain=$(fresh_ns inject-none)
  kubectl -n "$native" create -f "$dir/inject-job.native.json" >/dev/null
  kubectl -n "$wrap" create -f "$dir/inject-job.wrap.json" >/dev/null
  kubectl -n "$plain" create -f "$dir/inject-job.json" >/dev/null
  wait_job "$native" report Complete
  got=$(all_states "$native" report)
  [ "$got" = "Succeeded proxy=0 main=0" ] || fail "9: inject/job.native.yaml: $got"
  wait_job "$wrap" report Complete
  got=$(all_states "$wrap" report)
  [ "$got" = "Succeeded sexton-install=0 main=0 proxy=0" ] || fail "9: inject/job.wrap.yaml: $got"
  # job.yaml as it is: main ends, the sidecar runs on, and so does the pod
  kubectl -n "$plain" wait --for=jsonpath='{.status.active}'=1 job/report --timeout=60s >/dev/null \
    || fail "9: inject/job.yaml: no pod"
  kubectl -n "$plain" wait --for=jsonpath='{.status.containerStatuses[?(@.name=="main")].state.terminated.exitCode}'=0 \
    pod -l job-name=report --timeout=60s >/dev/null || fail "9: inject/job.yaml: main did not end with 0: $(all_states "$plain" report)"
  got=$(kubectl -n "$plain" get pods -l job-name=report \
    -o jsonpath='{.items[0].status.phase} {.items[0].status.containerStatuses[?(@.name=="proxy")].state.running.startedAt}')
  [[ "$got" == "Running "?* ]] || fail "9: inject/job.yaml: after main's exit: $got, want the pod Running and its proxy running"
  [ -z "$(kubectl -n "$plain" get job report -o jsonpath='{.status.conditions[?(@.status=="True")].type}')" ] \
    || fail "9: inject/job.yaml: the Job ended without sexton"
  kubectl delete namespace "$plain" --wait=false >/dev/null
  pass "9: examples/inject/: job.native.yaml and job.wrap.yaml Complete (sidecar 0); job.yaml alone: main ended, the sidecar and the pod still running"
}
