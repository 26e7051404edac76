# shellcheck shell=bash disable=SC2034  # (globals that e2e/run.sh and other files read)
# Scenario 12, contract (e2e/run.sh contract; sourced by e2e/run.sh, which defines the
# helpers of e2e/lib.sh and the node's setup):
#   The sidecar contract (docs/strategies.md, "The sidecar contract"): one declaration per case
#   (e2e/manifests/contract.yaml), injected native, wrap and native-wrap, all run at once:
#   deletion (a running pod deleted while its main drains 3 s through its proxy: no failed
#   request, the sidecar ends with 0, the pod Succeeded), two-mains (1 s and 5 s), on-failure
#   (one failed attempt), crash (the proxy crashes once and is back), startup (the main
#   starts once the proxy's startupProbe passed), two-sidecars (proxy stops before logs).
#   The three strategies give the same outcome.

# Scenario 11: the SidecarTerminator of scenario 3 again, now run by the node from the
# shipped image kubectl-sexton (e2e/manifests/controller-image.yaml); the pods must run the
# very images of target/images (their imageID is the layout's digest).
# A container's state and termination message in a pod (as JSON in a file), whether it is
# an init container (native sidecars) or not: "EXIT|MESSAGE" (newlines as spaces).
container_end() { # pod.json container
  python3 -c '
import json, sys
pod, name = json.load(sys.stdin), sys.argv[1]
for s in pod["status"].get("initContainerStatuses", []) + pod["status"].get("containerStatuses", []):
    if s["name"] == name:
        t = s.get("state", {}).get("terminated") or {}
        print("%s|%s" % (t.get("exitCode", ""), " ".join((t.get("message") or "").split())))
' "$2" <"$1"
}
terminal() { # ns pod
  case "$(kubectl -n "$1" get pod "$2" -o jsonpath='{.status.phase}')" in Succeeded|Failed) return 0 ;; esac
  return 1
}

scenario12() {
  local ns s j pod st end dir="$E2E_STATE/scenario12" strategies="native wrap native-wrap"
  ns=$(fresh_ns contract)
  mkdir -p "$dir"
  kubectl -n "$ns" apply -f "$M/contract-lib.yaml" >/dev/null
  for s in $strategies; do
    sed "s/STRATEGY/$s/g" "$M/contract.yaml" \
      | "$CTL_BIN" inject --strategy "$s" --sexton-image sexton:e2e -f - >"$dir/$s.yaml" 2>"$dir/inject-$s.log" \
      || fail "12: inject $s: $(cat "$dir/inject-$s.log")"
    kubectl -n "$ns" apply -f "$dir/$s.yaml" >/dev/null
  done
  # deletion: each pod deleted once its main served through the proxy (Ready); the test's
  # finalizer keeps the pod, so its last status can be read
  for s in $strategies; do
    kubectl -n "$ns" wait --for=condition=Ready "pod/deletion-$s" --timeout=120s >/dev/null \
      || fail "12: deletion-$s not Ready: $(kubectl -n "$ns" get pod "deletion-$s" -o jsonpath='{.status}')"
  done
  for s in $strategies; do kubectl -n "$ns" delete pod "deletion-$s" --wait=false >/dev/null; done
  for s in $strategies; do
    pod=deletion-$s
    wait_until 60 terminal "$ns" "$pod" || fail "12: $pod not terminal 60 s after its deletion: $(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.status}')"
    kubectl -n "$ns" get pod "$pod" -o json >"$dir/$pod.json"
    kubectl -n "$ns" patch pod "$pod" --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
    st=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["status"]["phase"])' <"$dir/$pod.json")
    end=$(container_end "$dir/$pod.json" main)
    case "$end" in 0\|*"ok "*" fail 0 "*) ;; *) fail "12: $pod: the main's drain failed requests: $end" ;; esac
    end=$(container_end "$dir/$pod.json" proxy)
    [ "${end%%|*}" = 0 ] || fail "12: $pod: the proxy did not end with 0: $end"
    [ "$st" = Succeeded ] || fail "12: $pod: phase $st"
  done
  pass "12: deletion: the main drained 3 s through its proxy (no failed request), the proxy ended with 0, the pod Succeeded; native, wrap, native-wrap"
  for j in two-mains on-failure crash startup two-sidecars; do
    for s in $strategies; do
      kubectl -n "$ns" wait --for=condition=Complete "job/$j-$s" --timeout=120s >/dev/null \
        || fail "12: $j-$s not Complete: $(all_states "$ns" "$j-$s")"
      pod=$(job_pod "$ns" "$j-$s")
      kubectl -n "$ns" get pod "$pod" -o json >"$dir/$j-$s.json"
      for c in proxy logs; do
        end=$(container_end "$dir/$j-$s.json" $c)
        [ -z "$end" ] || [ "${end%%|*}" = 0 ] || fail "12: $j-$s: $c ended $end"
      done
    done
  done
  for s in $strategies; do
    end=$(container_end "$dir/two-sidecars-$s.json" logs)
    [ "${end#*|}" = "proxy-term proxy-exit logs-term logs-exit" ] || fail "12: two-sidecars-$s: stop order $end"
  done
  pass "12: two-mains, on-failure, crash, startup, two-sidecars Complete, sidecars ended with 0, proxy stopped before logs; native, wrap, native-wrap"
}
