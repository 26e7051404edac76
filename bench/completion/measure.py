#!/usr/bin/env python3
"""The measuring half of bench/completion/run.sh: time from the main container's exit to the
pod's phase Succeeded (or Failed), as a watch of the API server sees it, on the real node.

  measure.py run --namespace NS --manifests DIR --strategies S1,S2,... --runs N --out FILE.json
                 [--kubectl-sexton BIN] [--timeout SECS] [--table FILE.md]
      DIR/S.json is the Job of strategy S (one object; its name is replaced per run). The
      strategies are run interleaved (S1 S2 ... S1 S2 ...), one Job at a time. With the
      strategy `controller` or `safety-net` in the list, `kubectl-sexton controller` (the
      SidecarTerminator, and the safety net reading --webhook-configuration) runs in the
      background for the whole run, scoped to NS. The strategy `kruise` runs its Jobs in
      --kruise-namespace instead, out of that controller's sight; OpenKruise's manager
      (started by run.sh) watches every namespace, and the pods' Events are checked at the
      end: a pod swapped by another strategy's controller stops the run.
  measure.py native-wrap WRAP.json
      prints strategy e: the `inject --strategy wrap` output with the sidecar moved to the
      init containers (after sexton-install) with restartPolicy Always; still wrapped.
  measure.py kruise CONTROLLER.json IMAGE
      prints strategy g: strategy d's Job with the sidecar also naming IMAGE in
      KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE, which OpenKruise needs to swap.

Start of a run: main's own clock reading, taken by its last command (`busybox ts '%.s'`,
gettimeofday, microseconds) and put into its termination message; the pod status carries it.
(The pod status's `finishedAt` has whole seconds only; it is kept as a cross-check.)
End: `time.time_ns()` when the line of `kubectl get pods -w` that first shows the phase
Succeeded or Failed is read. Both clocks are this machine's CLOCK_REALTIME. The same watch
also shows the sidecar's image in spec.containers: where a controller swaps it (d, f, g),
the time it first shows another image is the swap as the API server's watch delivers it;
and main's exit code: from the event that first shows main terminated to the one that shows
the swap is the swapper's reaction, seen through the same watch as the swapper's own.
"""
import argparse, json, os, platform, selectors, statistics, subprocess, sys, threading, time
from datetime import datetime, timezone

SIDECAR = "proxy"
MAIN = "main"
LABELS = {
    "wrap": "sexton-wrapped (`inject --strategy wrap`)",
    "kubexit": "kubexit-wrapped",
    "native": "native sidecar (`inject --strategy native`)",
    "controller": "controller image swap (SidecarTerminator)",
    "native-wrap": "native sidecar, also sexton-wrapped",
    "safety-net": "safety net: the swap, the webhook not answering",
    "kruise": "OpenKruise's SidecarTerminator (its swap, virtual-kubelet node)",
}
KRUISE_IMAGE_ENV = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE"
# Who swapped a pod's sidecar, by the Event each swapper records on the pod: OpenKruise's
# SidecarTerminator, sexton's SidecarTerminator, sexton's safety net.
SWAPPERS = {"SidecarTerminator": "kruise", "SidecarSwapped": "controller",
            "SidecarsEndedBySafetyNet": "safety-net"}


def die(msg):
    sys.exit("measure.py: error: " + msg)


def kubectl(*args, ns=None, input=None, timeout=30):
    cmd = ["kubectl"] + (["-n", ns] if ns else []) + list(args)
    r = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def busy_ticks():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def parse_time(s):
    """RFC 3339 (whole seconds, as the API server writes them) -> epoch seconds."""
    return int(datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())


def parse_stamp(msg):
    """`SECONDS.MICROSECONDS` (busybox ts '%.s') -> nanoseconds since the epoch."""
    sec, _, frac = msg.strip().partition(".")
    if not sec.isdigit() or not frac.isdigit():
        die("main's termination message is not a time stamp: %r" % msg)
    return int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])


def statuses(pod):
    st = pod.get("status", {})
    return {c["name"]: c for c in st.get("initContainerStatuses", []) + st.get("containerStatuses", [])}


class Controller:
    """`kubectl-sexton controller` in the background; ready once it logs that its cache is filled."""

    def __init__(self, binary, ns, log_path, timeout, webhook_configuration):
        self.log = open(log_path, "w")
        self.filled = threading.Event()
        # its caches: pods, and for the safety net namespaces and the webhook's configuration
        self.caches = 3 if webhook_configuration else 1
        # one process: the safety net leaves OpenKruise's markers to the SidecarTerminator
        # beside it, so that strategy d's pods are swapped by the SidecarTerminator alone
        net = ["--controllers", "sidecar-terminator,safety-net",
               "--webhook-configuration", webhook_configuration] if webhook_configuration else \
            ["--controllers", "sidecar-terminator"]
        self.proc = subprocess.Popen(
            [binary, "controller", "--namespace", ns] + net + [
             "--quick-exit-image", "sexton-quick-exit:e2e",
             "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._drain, daemon=True).start()
        if not self.filled.wait(timeout):
            self.stop()
            die("the controller did not fill its cache within %ds (log: %s)" % (timeout, log_path))

    def _drain(self):
        for line in self.proc.stderr:
            self.log.write(line)
            self.log.flush()
            if "cache filled" in line:
                self.caches -= 1
                if self.caches == 0:
                    self.filled.set()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


def sidecar_image(job):
    """The sidecar's image in spec.containers (None where it is not there: a native sidecar)."""
    return next((c["image"] for c in job["spec"]["template"]["spec"]["containers"]
                 if c["name"] == SIDECAR), None)


def set_work(job, seconds):
    """Main's `sleep 2;` becomes `sleep SECONDS;` (exactly one occurrence, wrapped or not)."""
    spec = job["spec"]["template"]["spec"]
    hits = 0
    for c in spec["containers"]:
        if c["name"] != MAIN:
            continue
        for field in ("command", "args"):
            for i, arg in enumerate(c.get(field) or []):
                if "sleep 2;" in arg:
                    c[field][i] = arg.replace("sleep 2;", "sleep %.3f;" % seconds)
                    hits += 1
    if hits != 1:
        die("%s: main's command has %d `sleep 2;`, not 1" % (job["metadata"]["name"], hits))


def as_created(name, job, pod):
    """The pod is the Job's template as this run wrote it: no webhook changed it at admission.
    The test API server is shared, and a webhook that serves this namespace (the cargo
    tests' `sexton-webhook` did, before it excluded namespaces labelled sexton-e2e) would
    make a strategy's pod another's: a safety-net pod injected as a native sidecar was once
    measured as the safety net (BENCHMARKS.md, "Safety net: main exit to pod Succeeded")."""
    # (images are not compared: the swap of d and f changes the sidecar's, as it should)
    tmpl = job["spec"]["template"]
    def shape(meta, spec):
        return ((meta.get("annotations") or {}).get("sexton.dev/injected"),
                [c["name"] for c in spec.get("initContainers") or []],
                [c["name"] for c in spec.get("containers") or []])
    want, got = shape(tmpl.get("metadata", {}), tmpl["spec"]), shape(pod["metadata"], pod["spec"])
    if got != want:
        die("%s: the pod is not the Job's template (a webhook of another process changed it at "
            "admission; the run says nothing): sexton.dev/injected, init containers, containers "
            "%s, want %s" % (name, got, want))


def run_one(ns, strategy, manifest, rnd, timeout, work):
    job = json.loads(json.dumps(manifest))
    name = "%s-%d" % (strategy, rnd)
    job["metadata"]["name"] = name
    job["metadata"].pop("namespace", None)   # kubectl's client dry-run writes "default"
    set_work(job, work)
    b0 = busy_ticks()
    load0 = os.getloadavg()[0]
    kubectl("create", "-f", "-", ns=ns, input=json.dumps(job))
    # The watch starts after the Job exists; it lists the pod, then watches it. A watch
    # started after main's exit would make the run invalid: checked below.
    t_watch = time.time_ns()
    w = subprocess.Popen(
        ["kubectl", "-n", ns, "get", "pods", "-l", "job-name=" + name, "-w",
         "-o", "jsonpath={.metadata.name}|{.status.phase}|"
               "{.spec.containers[?(@.name==\"%s\")].image}|"
               "{.status.containerStatuses[?(@.name==\"%s\")].state.terminated.exitCode}{\"\\n\"}"
               % (SIDECAR, MAIN)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    sel = selectors.DefaultSelector()
    sel.register(w.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    image = sidecar_image(job)
    buf, timeline, t_end, phase, t_swap, t_main_seen = b"", [], None, None, None, None
    try:
        while t_end is None:
            left = deadline - time.monotonic()
            if left <= 0:
                die("%s: no terminal phase within %ds; seen: %s" % (name, timeout, timeline))
            if not sel.select(left):
                continue
            chunk = os.read(w.stdout.fileno(), 65536)
            now = time.time_ns()
            if not chunk:
                die("%s: the watch ended: %s" % (name, w.stderr.read().decode().strip()))
            buf += chunk
            while b"\n" in buf and t_end is None:
                line, buf = buf.split(b"\n", 1)
                # name|phase|the sidecar's image in spec.containers|main's exit code once terminated
                parts = (line.decode().split("|") + [""] * 4)[:4]
                p = parts[1]
                if not timeline or timeline[-1][1] != p:
                    timeline.append((now, p))
                if t_main_seen is None and parts[3]:
                    t_main_seen = now
                if t_swap is None and image and parts[2] != image:
                    t_swap = now
                if p in ("Succeeded", "Failed"):
                    t_end, phase = now, p
    finally:
        sel.close()
        w.terminate()
        try:
            w.wait(5)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait(5)
    b1 = busy_ticks()
    pods = json.loads(kubectl("get", "pods", "-l", "job-name=" + name, "-o", "json", ns=ns))["items"]
    if len(pods) != 1:
        die("%s: %d pods" % (name, len(pods)))
    pod = pods[0]
    as_created(name, job, pod)
    cs = statuses(pod)
    term = cs.get(MAIN, {}).get("state", {}).get("terminated")
    if not term or "message" not in term:
        die("%s: main has no terminated state with a message: %s" % (name, cs.get(MAIN)))
    t_main = parse_stamp(term["message"])
    finished = parse_time(term["finishedAt"])
    if t_watch >= t_main:
        die("%s: the watch started after main exited; the run says nothing" % name)
    # finishedAt is the container's exit truncated to the second: never before main's stamp's
    # second, never after the phase was seen.
    if not (t_main // 10**9 <= finished <= t_end // 10**9):
        die("%s: finishedAt %s does not fit main's stamp %d ns and the end %d ns" % (name, term["finishedAt"], t_main, t_end))
    side = cs.get(SIDECAR, {})
    side_term = side.get("state", {}).get("terminated") or {}
    secs = (t_end - t_main) / 1e9
    swap = None if t_swap is None else round((t_swap - t_main) / 1e9, 6)
    # the swapper's reaction as the watch sees it: main's exit shown, then the swap shown
    reaction = None if t_swap is None or t_main_seen is None else round((t_swap - t_main_seen) / 1e9, 6)
    busy = (b1[0] - b0[0]) / max(1, b1[1] - b0[1]) * (os.cpu_count() or 1)
    return {
        "strategy": strategy, "round": rnd, "job": name, "namespace": ns, "pod": pod["metadata"]["name"],
        "main_sleep_s": work,
        "seconds": round(secs, 6), "swap_seen_s": swap, "swap_seen_ns": t_swap,
        "main_exit_seen_ns": t_main_seen, "swap_after_exit_seen_s": reaction,
        "main_stamp_ns": t_main, "main_finished_at": term["finishedAt"], "main_exit_code": term.get("exitCode"),
        "phase_seen_ns": t_end, "phase": phase, "watch_started_ns": t_watch,
        "sidecar_restart_count": side.get("restartCount"),
        "sidecar_exit_code": side_term.get("exitCode"), "sidecar_image": side.get("image"),
        "timeline": [{"t_ns": t, "phase": p} for t, p in timeline],
        "machine_busy_cores": round(busy, 2), "loadavg_1m_at_start": load0,
    }


def attribute_swaps(runs, namespaces):
    """Sets each run's `swapped_by` from the pods' Events, and stops the run where a pod was
    swapped by another strategy's controller than its own: OpenKruise's manager watches every
    namespace (its --namespace flag panics in v1.8.2), and is kept off the other strategies'
    pods only by its own rules (on a virtual-kubelet node it swaps only sidecars that name an
    image), sexton's controller by its --namespace."""
    by_pod = {}
    for ns in namespaces:
        for e in json.loads(kubectl("get", "events", "-o", "json", ns=ns))["items"]:
            who = SWAPPERS.get(e.get("reason"))
            if who and e.get("involvedObject", {}).get("kind") == "Pod":
                by_pod.setdefault((ns, e["involvedObject"]["name"]), set()).add(who)
    wrong = []
    for r in runs:
        r["swapped_by"] = sorted(by_pod.get((r["namespace"], r["pod"]), ()))
        if set(r["swapped_by"]) - {r["strategy"]}:
            wrong.append("%s (swapped by %s)" % (r["pod"], ", ".join(r["swapped_by"])))
    if wrong:
        die("pods swapped by another strategy's controller (the run says nothing): " + "; ".join(wrong))
    # (and whether OpenKruise's manager, watching every namespace of a shared API server, acted
    # on anyone else's pod while it ran: its Event is the same for a swap and for a
    # ContainerRecreateRequest)
    if "kruise" in {r["strategy"] for r in runs}:
        other = sorted({"%s/%s" % (e["metadata"]["namespace"], e["involvedObject"]["name"])
                        for e in json.loads(kubectl("get", "events", "-A", "--field-selector",
                                                    "reason=SidecarTerminator", "-o", "json"))["items"]
                        if e["metadata"]["namespace"] not in namespaces})
        if other:
            print("measure.py: warning: OpenKruise's SidecarTerminator also acted on pods outside "
                  "this benchmark: " + ", ".join(other), file=sys.stderr)


def summary(runs, strategies):
    out = {}
    for s in strategies:
        v = [r["seconds"] for r in runs if r["strategy"] == s]
        swaps = [r["swap_seen_s"] for r in runs if r["strategy"] == s and r["swap_seen_s"] is not None]
        react = [r["swap_after_exit_seen_s"] for r in runs
                 if r["strategy"] == s and r["swap_after_exit_seen_s"] is not None]
        out[s] = {"label": LABELS.get(s, s), "median": statistics.median(v), "min": min(v), "max": max(v),
                  "values": v, "swap_seen_values": swaps,
                  "swap_seen_median": statistics.median(swaps) if swaps else None,
                  "swap_after_exit_seen_values": react,
                  "swap_after_exit_seen_median": statistics.median(react) if react else None,
                  "sidecar_restart_counts": [r["sidecar_restart_count"] for r in runs if r["strategy"] == s],
                  "phases": [r["phase"] for r in runs if r["strategy"] == s]}
    return out


def table(summ, strategies):
    """The table; with a column for the swap where a strategy's sidecar image was swapped."""
    swapped = any(summ[s]["swap_seen_values"] for s in strategies)
    head = "| strategy | median (s) | min (s) | max (s) | all runs, in order (s) | sidecar restarts |"
    rule = "|---|---:|---:|---:|---|---|"
    if swapped:
        head += (" swap seen after main's exit, median (min–max) (s) |"
                 " swap seen after main's exit was seen, median (min–max) (ms) |")
        rule += "---|---|"
    rows = [head, rule]
    for s in strategies:
        x = summ[s]
        row = "| %s | %.2f | %.2f | %.2f | %s | %s |" % (
            x["label"], x["median"], x["min"], x["max"], ", ".join("%.2f" % v for v in x["values"]),
            ", ".join(str(c) for c in x["sidecar_restart_counts"]))
        if swapped:
            w, q = x["swap_seen_values"], x["swap_after_exit_seen_values"]
            row += " %.2f (%.2f–%.2f) |" % (x["swap_seen_median"], min(w), max(w)) if w else " – |"
            row += " %.0f (%.0f–%.0f) |" % (x["swap_after_exit_seen_median"] * 1e3, min(q) * 1e3, max(q) * 1e3) \
                if q else " – |"
        rows.append(row)
    return "\n".join(rows) + "\n"


def cmd_run(a):
    strategies = a.strategies.split(",")
    manifests = {}
    for s in strategies:
        path = os.path.join(a.manifests, s + ".json")
        with open(path) as f:
            manifests[s] = json.load(f)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    controller = None
    if "safety-net" in strategies and not a.webhook_configuration:
        die("the strategy safety-net needs --webhook-configuration")
    if "controller" in strategies or "safety-net" in strategies:
        if not a.kubectl_sexton:
            die("the strategies controller and safety-net need --kubectl-sexton")
        net = a.webhook_configuration if "safety-net" in strategies else None
        controller = Controller(a.kubectl_sexton, a.namespace, a.out + ".controller.log", a.timeout, net)
    if "kruise" in strategies and not a.kruise_namespace:
        die("the strategy kruise needs --kruise-namespace (a namespace sexton's controller does not watch)")
    ns_of = {s: a.kruise_namespace if s == "kruise" else a.namespace for s in strategies}
    runs = []
    try:
        for rnd in range(1, a.runs + 1):
            # The kubelet looks at its containers once a second (the PLEG's relist), and
            # every pod starts on that grid: with a fixed 2 s of work, each strategy's main
            # would exit at its own fixed phase of the grid, and the phase, not the strategy,
            # would decide up to a second. Round r works 2 + (r-1)/N s, N rounds: the exits
            # of every strategy are spread evenly over the second.
            work = round(2 + (rnd - 1) / a.runs, 3) if a.spread else 2.0
            for s in strategies:
                r = run_one(ns_of[s], s, manifests[s], rnd, a.timeout, work)
                swap = "" if r["swap_seen_s"] is None else "swap seen at %.3f s, %s after main's exit was; " % (
                    r["swap_seen_s"], "?" if r["swap_after_exit_seen_s"] is None else
                    "%.0f ms" % (r["swap_after_exit_seen_s"] * 1e3))
                print("%-12s round %d: %.3f s  (%s; %ssidecar restarts %s, exit %s; machine busy %.2f cores)" % (
                    s, rnd, r["seconds"], r["phase"], swap, r["sidecar_restart_count"], r["sidecar_exit_code"],
                    r["machine_busy_cores"]), file=sys.stderr, flush=True)
                runs.append(r)
    finally:
        if controller:
            controller.stop()
    attribute_swaps(runs, sorted(set(ns_of.values())))
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    summ = summary(runs, strategies)
    result = {
        "started": started, "namespace": a.namespace, "kruise_namespace": a.kruise_namespace,
        "runs_per_strategy": a.runs, "order": strategies,
        "spread": a.spread,
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
                    "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
        "summary": summ, "runs": runs,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    t = table(summ, strategies)
    if a.table:
        with open(a.table, "w") as f:
            f.write(t)
    print(t)


def cmd_native_wrap(a):
    with open(a.wrap) as f:
        job = json.load(f)
    spec = job["spec"]["template"]["spec"]
    side = [c for c in spec["containers"] if c["name"] == SIDECAR]
    if len(side) != 1 or not any(i["name"] == "sexton-install" for i in spec.get("initContainers", [])):
        die("%s is not a wrap output with a container %r and sexton-install" % (a.wrap, SIDECAR))
    env = {e["name"]: e.get("value") for e in side[0].get("env", [])}
    if side[0]["command"][0] != "/sexton/sexton" or env.get("KUBEXIT_DEATH_DEPS") != MAIN:
        die("the sidecar of %s is not wrapped with KUBEXIT_DEATH_DEPS=%s" % (a.wrap, MAIN))
    spec["containers"] = [c for c in spec["containers"] if c["name"] != SIDECAR]
    side[0]["restartPolicy"] = "Always"
    inits = spec["initContainers"]
    at = next(i for i, c in enumerate(inits) if c["name"] == "sexton-install") + 1
    inits.insert(at, side[0])
    json.dump(job, sys.stdout, indent=1)
    print()


def cmd_kruise(a):
    with open(a.controller) as f:
        job = json.load(f)
    side = [c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == SIDECAR]
    if len(side) != 1 or not any(e["name"] == "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT" for e in side[0].get("env", [])):
        die("%s is not strategy d's Job: no container %r with OpenKruise's marker" % (a.controller, SIDECAR))
    side[0]["env"].append({"name": KRUISE_IMAGE_ENV, "value": a.image})
    json.dump(job, sys.stdout, indent=1)
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--namespace", required=True)
    r.add_argument("--manifests", required=True)
    r.add_argument("--strategies", required=True)
    r.add_argument("--runs", type=int, default=7)
    r.add_argument("--out", required=True)
    r.add_argument("--table")
    r.add_argument("--kubectl-sexton")
    r.add_argument("--webhook-configuration",
                   help="strategy safety-net: the MutatingWebhookConfiguration the net reads")
    r.add_argument("--kruise-namespace",
                   help="strategy kruise: the namespace of its Jobs (not --namespace, which sexton's controller watches)")
    r.add_argument("--timeout", type=int, default=120)
    r.add_argument("--no-spread", dest="spread", action="store_false",
                   help="main works exactly 2 s in every round (no spread over the relist period)")
    n = sub.add_parser("native-wrap")
    n.add_argument("wrap")
    k = sub.add_parser("kruise")
    k.add_argument("controller")
    k.add_argument("image")
    a = p.parse_args()
    {"run": cmd_run, "native-wrap": cmd_native_wrap, "kruise": cmd_kruise}[a.cmd](a)


if __name__ == "__main__":
    main()
