#!/usr/bin/env python3
"""The measuring half of bench/deletion/run.sh: a running pod is deleted while its main drains
3 s through its proxy (the `deletion` pod of e2e/manifests/contract.yaml), for each way of
ending the sidecar, interleaved.

  measure.py --namespace NS --manifests DIR --strategies S1,S2,... --runs N --out FILE.json
             [--table FILE.md]
      DIR/S.json is the pod of strategy S (its name is replaced per run).

Per run: the pod is created and waited for Ready (its main served through the proxy once),
then deleted. The containers' programs write wall-clock stamps (busybox ts) into their
termination messages: the main's SIGTERM and exit, the proxy's child's SIGTERM and exit,
and the main's failed requests during its drain. The pod's end is when a watch line first
shows the phase Succeeded or Failed (this machine's clock, as the stamps). The pod carries a
finalizer of the benchmark so that its last status can be read; it is removed after.
"""
import argparse, json, os, statistics, subprocess, sys, time

# the helpers of bench/completion/measure.py: die, kubectl, statuses
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "completion"))
from measure import die, kubectl, statuses  # noqa: E402

LABELS = {
    "native": "native sidecar (`inject --strategy native`)",
    "wrap": "sexton-wrapped (`inject --strategy wrap`)",
    "native-wrap": "native sidecar, also sexton-wrapped (`inject --strategy native-wrap`)",
    "kubexit": "kubexit-wrapped (stop signal forwarded at once)",
}


def message(pod, name):
    """The termination message of container `name` as {key: value} (`term 17..`, `ok 6 fail 0`)."""
    t = statuses(pod).get(name, {}).get("state", {}).get("terminated") or {}
    out = {"code": t.get("exitCode")}
    for line in (t.get("message") or "").splitlines():
        words = line.split()
        for k, v in zip(words[::2], words[1::2]):
            out[k] = float(v) if "." in v else int(v)
    return out


def run_one(ns, strategy, manifest, rnd):
    pod = json.loads(json.dumps(manifest))
    name = "deletion-%s-%d" % (strategy, rnd)
    pod["metadata"]["name"] = name
    kubectl("apply", "-f", "-", ns=ns, input=json.dumps(pod))
    kubectl("wait", "--for=condition=Ready", "pod/" + name, "--timeout=120s", ns=ns, timeout=130)
    watch = subprocess.Popen(["kubectl", "-n", ns, "get", "pod", name, "-w",
                              "-o", "jsonpath={.status.phase}{\"\\n\"}"],
                             stdout=subprocess.PIPE, text=True)
    deleted = time.time()
    kubectl("delete", "pod", name, "--wait=false", ns=ns)
    end = None
    deadline = time.time() + 90
    for line in watch.stdout:
        if line.strip() in ("Succeeded", "Failed"):
            end = time.time()
            break
        if time.time() > deadline:
            break
    watch.kill()
    watch.wait()
    if end is None:
        die("%s: not terminal 90 s after its deletion" % name)
    final = json.loads(kubectl("get", "pod", name, "-o", "json", ns=ns))
    kubectl("patch", "pod", name, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]', ns=ns)
    main, proxy = message(final, "main"), message(final, "proxy")
    t0 = main.get("term")
    if t0 is None:
        die("%s: the main recorded no SIGTERM: %s" % (name, main))
    rel = lambda v: None if v is None else round((v - t0) * 1000)
    return {
        "strategy": strategy, "round": rnd, "phase": final["status"].get("phase"),
        "main_term_after_delete_ms": round((t0 - deleted) * 1000),
        "main_exit_ms": rel(main.get("exit")), "proxy_term_ms": rel(proxy.get("term")),
        "proxy_exit_ms": rel(proxy.get("exit")), "pod_terminal_ms": rel(end),
        "failed_requests": main.get("fail"), "ok_requests": main.get("ok"),
        "main_code": main["code"], "proxy_code": proxy["code"],
    }


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def table(runs, strategies):
    rows = ["| strategy | main SIGTERM (after delete) | proxy's SIGTERM | proxy exit | main exit | pod terminal | failed requests (all runs) | phases |",
            "|---|---|---|---|---|---|---|---|"]
    fmt = lambda ms: "—" if ms is None else "%+.2f s" % (ms / 1000)
    for s in strategies:
        r = [x for x in runs if x["strategy"] == s]
        phases = {}
        for x in r:
            phases[x["phase"]] = phases.get(x["phase"], 0) + 1
        rows.append("| %s | %s | %s | %s | %s | %s | %d of %d | %s |" % (
            LABELS.get(s, s), fmt(med(x["main_term_after_delete_ms"] for x in r)),
            fmt(med(x["proxy_term_ms"] for x in r)), fmt(med(x["proxy_exit_ms"] for x in r)),
            fmt(med(x["main_exit_ms"] for x in r)), fmt(med(x["pod_terminal_ms"] for x in r)),
            sum(x["failed_requests"] or 0 for x in r), sum((x["failed_requests"] or 0) + (x["ok_requests"] or 0) for x in r),
            ", ".join("%s %d" % kv for kv in sorted(phases.items()))))
    return "\n".join(rows) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--namespace", required=True)
    p.add_argument("--manifests", required=True)
    p.add_argument("--strategies", required=True)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--out", required=True)
    p.add_argument("--table")
    a = p.parse_args()
    strategies = a.strategies.split(",")
    manifests = {s: json.load(open("%s/%s.json" % (a.manifests, s))) for s in strategies}
    runs = []
    for rnd in range(1, a.runs + 1):
        for s in strategies:
            r = run_one(a.namespace, s, manifests[s], rnd)
            print(json.dumps(r), file=sys.stderr)
            runs.append(r)
    json.dump({"runs": runs}, open(a.out, "w"), indent=1)
    t = table(runs, strategies)
    if a.table:
        open(a.table, "w").write(t)
    print(t)


if __name__ == "__main__":
    main()
