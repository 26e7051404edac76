#!/usr/bin/env python3
"""The admission webhook's latency under load (bench/webhook/run.sh runs this).

  measure.py run --server NAME,PID,URL[,METRICS] ... the measurement: every rate and case
                                           for each server in turn, then the long runs
  measure.py markdown RESULTS.json         the section of BENCHMARKS.md
  measure.py update RESULTS.json FILE      rewrites FILE between <!-- webhook:start/end -->

Servers: `sexton` (kubectl-sexton webhook) and `go` (bench/webhook/gofloor, the comparison
anchor), both running for the whole measurement; at each rate and case they are measured
one after the other (the order alternates), never at the same time.

Each window: wait until no build runs (rustc, cargo, go, ...; bounded per window and in
total), a warm-up at the rate whose every response is checked (the patch for the injected
case, none for the no-op case), then the timed run. vegeta measures each request from its
send to the end of its response; the webhook's CPU is utime + stime of /proc/PID/stat
across the timed run, its RSS VmRSS of /proc/PID/status every second.
"""

import argparse
import base64
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import section  # noqa: E402  (bench/lib/section.py)
import stamp  # noqa: E402  (bench/lib/stamp.py)

CLK_TCK = os.sysconf("SC_CLK_TCK")
# build processes: cargo/rustc and their linkers, Go's driver and its compile/link tools, C
BUILDERS = {"rustc", "cargo", "rust-lld", "ld.lld", "go", "compile", "link", "cc", "cc1", "cc1plus",
            "ld", "collect2"}
NAMESPACE = "bench"
CASES = ("injected", "noop")
CASE_TITLE = {
    "injected": "marked sidecar (injected)",
    "noop": "no sidecar (unchanged)",
}
SERVER_TITLE = {"sexton": "sexton", "go": "Go floor"}
DISTURBED_CORES = 0.25
TARGET_RATE, TARGET_P99_US = 500, 2000


# --- the reviews -----------------------------------------------------------------------

def job_pod(job, sidecar):
    """A Job's Pod as the API server sends it to a mutating webhook at creation: defaulted,
    with the service account's projected token volume and the default tolerations added by
    the built-in admission plugins, no name yet (generateName), managedFields set."""
    job_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"job/{job}"))
    mounts = [{"name": "kube-api-access", "readOnly": True,
               "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    defaults = {"terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
    main = {"name": "main", "image": "registry.example/reports/generate:2.14.1",
            "command": ["/app/generate"], "args": ["--since=24h", "--out=/work/report.csv"],
            "env": [{"name": "DATABASE_HOST", "value": "127.0.0.1"},
                    {"name": "DATABASE_PORT", "value": "5432"},
                    {"name": "REPORT_BUCKET", "value": "s3://reports/daily"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
            "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}},
            "volumeMounts": [{"name": "work", "mountPath": "/work"}] + mounts, **defaults}
    containers = [main]
    if sidecar:
        containers.append({
            "name": "proxy", "image": "registry.example/db/cloud-sql-proxy:2.11.0",
            "args": ["--port=5432", "--structured-logs", "project:region:reports"],
            "env": [{"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"}],
            "ports": [{"containerPort": 5432, "protocol": "TCP"}],
            "readinessProbe": {"tcpSocket": {"port": 5432}, "periodSeconds": 2, "timeoutSeconds": 1,
                               "successThreshold": 1, "failureThreshold": 3},
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
            "volumeMounts": mounts, **defaults})
    labels = {"batch.kubernetes.io/controller-uid": job_uid, "batch.kubernetes.io/job-name": job,
              "controller-uid": job_uid, "job-name": job, "app.kubernetes.io/name": "reports"}
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "generateName": f"{job}-", "namespace": NAMESPACE, "creationTimestamp": None,
            "labels": labels,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": job_uid,
                                 "controller": True, "blockOwnerDeletion": True}],
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "apiVersion": "v1", "time": "2026-11-25T00:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:finalizers": {".": {}, "v:\"batch.kubernetes.io/job-tracking\"": {}},
                                                           "f:generateName": {}, "f:labels": {".": {}, **{f"f:{k}": {} for k in labels}},
                                                           "f:ownerReferences": {".": {}, f"k:{{\"uid\":\"{job_uid}\"}}": {}}},
                                            "f:spec": {"f:containers": {f"k:{{\"name\":\"{c['name']}\"}}": {".": {}, "f:image": {}, "f:name": {}} for c in containers},
                                                       "f:restartPolicy": {}, "f:volumes": {}}}}],
        },
        "spec": {
            "volumes": [{"name": "work", "emptyDir": {}},
                        {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "containers": containers,
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {},
    }


def review(job, sidecar, uid):
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    gvr = {"group": "", "version": "v1", "resource": "pods"}
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {
        "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "namespace": NAMESPACE, "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:job-controller",
                     "uid": "9d0f8c1e-5b0e-4f0c-8a43-1b6c2e7d9f10",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
        "object": job_pod(job, sidecar), "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}


def write_targets(directory, server, url, count=1000):
    """One file per case: `count` reviews (distinct uids, 100 Jobs), in vegeta's JSON format;
    the same reviews for every server."""
    sizes = {}
    for case in CASES:
        path = os.path.join(directory, f"targets-{server}-{case}.jsonl")
        with open(path, "w") as f:
            for i in range(count):
                body = json.dumps(review(f"report-{i % 100:03d}", case == "injected",
                                         str(uuid.uuid5(uuid.NAMESPACE_URL, f"{case}/{i}"))),
                                  separators=(",", ":")).encode()
                sizes.setdefault(case, len(body))
                f.write(json.dumps({"method": "POST", "url": url,
                                    "header": {"Content-Type": ["application/json"], "Accept": ["application/json"]},
                                    "body": base64.b64encode(body).decode()}) + "\n")
    return sizes


def check_answer(case, body, uid=None):
    """The webhook's answer is what the case expects; returns the decoded patch (or None)."""
    r = json.loads(body)["response"]
    if uid is not None and r["uid"] != uid:
        raise SystemExit(f"{case}: answer for uid {r['uid']}, asked {uid}")
    if not r.get("allowed"):
        raise SystemExit(f"{case}: not allowed: {body[:300]!r}")
    patch = None
    if "patch" in r:
        # base64 as the API defines it; kube-rs writes the bytes as a JSON array of numbers,
        # which the API server's Go decoder also takes
        raw = r["patch"]
        patch = json.loads(bytes(raw) if isinstance(raw, list) else base64.b64decode(raw))
    if case == "injected":
        text = json.dumps(patch)
        if patch is None or '"restartPolicy": "Always"' not in text or "sexton.dev/injected" not in text.replace("~1", "/"):
            raise SystemExit(f"injected: no native injection in the answer: {body[:500]!r}")
    elif patch is not None or r.get("warnings"):
        raise SystemExit(f"noop: the answer changes the pod: {body[:500]!r}")
    return patch


# --- the machine and the process -------------------------------------------------------
# --- the machine and the process -------------------------------------------------------

def proc_cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def machine_ticks():
    """(busy, total) jiffies of all CPUs; busy excludes idle and iowait."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])
    return total - v[3] - v[4], total


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def builders():
    found = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/comm") as f:
                    c = f.read().strip()
            except OSError:
                continue
            if c in BUILDERS:
                found.add(c)
    return sorted(found)


def wait_quiet(max_wait, quiet_secs=3):
    """Waits (at most max_wait s) until no build process has run for quiet_secs; returns
    (seconds waited, builders seen, gave up)."""
    start, seen, quiet_since = time.monotonic(), set(), None
    while True:
        b = builders()
        now = time.monotonic()
        if b:
            seen.update(b)
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        if quiet_since is not None and (now - quiet_since >= quiet_secs or not seen):
            return round(now - start), sorted(seen), False
        if now - start > max_wait:
            return round(now - start), sorted(seen), True
        time.sleep(1)


def scrape(metrics_url):
    """The webhook's review-duration histogram: {le: count}, sum, count."""
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    buckets, total, count = {}, 0.0, 0
    for line in text.splitlines():
        m = re.match(r'sexton_webhook_review_duration_seconds_bucket\{le="([^"]+)"\} (\S+)', line)
        if m:
            buckets[m.group(1)] = int(float(m.group(2)))
        elif line.startswith("sexton_webhook_review_duration_seconds_sum"):
            total = float(line.split()[1])
        elif line.startswith("sexton_webhook_review_duration_seconds_count"):
            count = int(float(line.split()[1]))
    return {"buckets": buckets, "sum": total, "count": count}


def in_webhook(before, after):
    """Time inside the handler (body parsed → response built) over a window, from the
    webhook's own histogram: mean, and the bucket bounds holding p50 and p99."""
    n = after["count"] - before["count"]
    if n <= 0:
        return None
    les = sorted(after["buckets"], key=lambda s: float("inf") if s == "+Inf" else float(s))
    cum = [(le, after["buckets"][le] - before["buckets"].get(le, 0)) for le in les]

    def bound(q):
        for le, c in cum:
            if c >= q * n:
                return None if le == "+Inf" else float(le) * 1e6
        return None
    return {"reviews": n, "mean_us": (after["sum"] - before["sum"]) / n * 1e6,
            "p50_le_us": bound(0.5), "p99_le_us": bound(0.99)}


def connections(port):
    """Established TCP connections to the webhook's port (/proc/net/tcp, local side)."""
    n = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        n += 1
        except OSError:
            pass
    return n


# --- one window ------------------------------------------------------------------------
# --- one window ------------------------------------------------------------------------

class Server:
    """One webhook under test: `NAME,PID,URL[,METRICS]`."""

    def __init__(self, spec):
        parts = spec.split(",")
        self.name, self.pid, self.url = parts[0], int(parts[1]), parts[2]
        self.metrics = parts[3] if len(parts) > 3 and parts[3] else None
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])


class Attack:
    """vegeta attack at a constant rate; the webhook's RSS sampled every second meanwhile."""

    def __init__(self, a, server, case, rate, secs, output, bodies):
        nice = ["nice", "-n", str(a.nice)] if a.nice is not None else []
        self.cmd = nice + [a.vegeta, "attack", "-format=json", f"-targets={a.work}/targets-{server.name}-{case}.jsonl",
                    f"-rate={rate}/s", f"-duration={secs}s", "-http2=false", "-keepalive=true",
                    f"-root-certs={a.ca}", "-timeout=10s", f"-max-body={-1 if bodies else 0}",
                    f"-output={output}"]

    def run(self, pid, port):
        """Returns [(t, RSS kB, connections)] every second, and vegeta's CPU seconds."""
        samples = []
        t0 = time.monotonic()
        proc = subprocess.Popen(self.cmd)
        next_sample = 0.0
        while True:
            done, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if done:
                break
            t = time.monotonic() - t0
            if t >= next_sample:
                samples.append((round(t, 3), rss_kb(pid), connections(port)))
                next_sample += 1.0
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"vegeta attack failed ({proc.returncode}): {' '.join(self.cmd)}")
        if not samples:
            samples.append((round(time.monotonic() - t0, 3), rss_kb(pid), connections(port)))
        return samples, usage.ru_utime + usage.ru_stime


def vegeta_report(vegeta, results):
    out = subprocess.run([vegeta, "report", "-type=json", results], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def check_bodies(vegeta, results, case):
    """Every answer of the warm-up: 200 and the expected answer. A request that got no
    answer (vegeta's code 0: the connection closed or timed out, as when a starved client
    is slower than the server's read timeouts on a loaded machine) is an error the
    measured windows count, not a wrong answer: reported, and fatal only if no request
    was answered at all."""
    out = subprocess.run([vegeta, "encode", "-to=json", results], check=True,
                         capture_output=True, text=True).stdout
    n, unanswered = 0, []
    for line in out.splitlines():
        r = json.loads(line)
        if r["code"] == 0:
            unanswered.append(r.get("error"))
            continue
        if r["code"] != 200:
            raise SystemExit(f"{case}: warm-up answer {r['code']} {r.get('error')}")
        check_answer(case, base64.b64decode(r["body"]))
        n += 1
    if unanswered:
        print(f"  {case}: {len(unanswered)} warm-up request(s) not answered ({unanswered[0]})", file=sys.stderr)
    if not n:
        raise SystemExit(f"{case}: no warm-up request answered ({unanswered[0] if unanswered else 'none sent'})")
    return n


def per_10s(vegeta, results):
    """Latency by 10-second slice of a run (from vegeta's CSV encoding): p50, p99, max (µs)."""
    out = subprocess.run([vegeta, "encode", "-to=csv", results], check=True,
                         capture_output=True, text=True).stdout
    rows = [line.split(",", 3)[:3] for line in out.splitlines() if line]
    t0 = min(int(r[0]) for r in rows)
    slices = {}
    for ts, code, lat in rows:
        slices.setdefault((int(ts) - t0) // 10_000_000_000, []).append(int(lat) / 1e3)
    res = []
    for k in sorted(slices):
        v = sorted(slices[k])
        res.append({"t": k * 10, "n": len(v), "p50": v[len(v) // 2], "p99": v[min(len(v) - 1, int(len(v) * 0.99))],
                    "max": v[-1]})
    return res


def wait_for_builds(a):
    """wait_quiet within what is left of the run's budget (--max-wait-total)."""
    budget = max(0, min(a.max_wait, a.max_wait_total - a.waited_total))
    waited, seen, gave_up = wait_quiet(budget)
    a.waited_total += waited
    if waited or seen:
        print(f"  waited {waited} s for builds to end ({', '.join(seen)}){' — gave up' if gave_up else ''}",
              file=sys.stderr)
    return waited, seen, gave_up


def window(a, server, case, rate, secs, label):
    waited, seen, gave_up = wait_for_builds(a)
    tmp = tempfile.mkdtemp(dir=a.work)
    checked = 0
    if a.warmup > 0:
        Attack(a, server, case, rate, a.warmup, f"{tmp}/warmup.bin", True).run(server.pid, server.port)
        checked = check_bodies(a.vegeta, f"{tmp}/warmup.bin", case)
    load_before = loadavg()
    m0, c0, t0 = machine_ticks(), proc_cpu_ticks(server.pid), time.monotonic()
    h0 = scrape(server.metrics) if server.metrics else None
    samples, vegeta_cpu = Attack(a, server, case, rate, secs, f"{tmp}/run.bin", False).run(server.pid, server.port)
    c1, m1, t1 = proc_cpu_ticks(server.pid), machine_ticks(), time.monotonic()
    h1 = scrape(server.metrics) if server.metrics else None
    elapsed = t1 - t0
    rep = vegeta_report(a.vegeta, f"{tmp}/run.bin")
    lat = rep["latencies"]
    wh_cpu = (c1 - c0) / CLK_TCK
    busy = (m1[0] - m0[0]) / CLK_TCK
    rss = [kb for _, kb, _ in samples]
    rec = {
        "server": server.name, "case": case, "rate": rate, "label": label, "secs": secs, "elapsed_s": round(elapsed, 2),
        "requests": rep["requests"], "achieved_rate": rep["rate"], "throughput": rep["throughput"],
        "success": rep["success"], "status_codes": rep["status_codes"], "errors": rep["errors"],
        "latency_us": {k: lat[k] / 1e3 for k in ("min", "mean", "50th", "90th", "95th", "99th", "max")},
        "in_webhook": in_webhook(h0, h1) if h0 else None,
        "webhook_cpu_s": wh_cpu, "webhook_cpu_pct": 100 * wh_cpu / elapsed,
        "webhook_cpu_us_per_request": 1e6 * wh_cpu / max(1, rep["requests"]),
        "vegeta_cpu_s": vegeta_cpu, "vegeta_cpu_pct": 100 * vegeta_cpu / elapsed,
        "machine_busy_cores": busy / elapsed,
        "other_load_cores": max(0.0, (busy - wh_cpu - vegeta_cpu) / elapsed),
        "rss_kb": {"first": rss[0], "last": rss[-1], "max": max(rss), "mean": round(statistics.mean(rss))},
        "rss_samples": [[t, kb] for t, kb, _ in samples],
        "connections": {"max": max(c for _, _, c in samples), "samples": [c for _, _, c in samples]},
        "per_10s": per_10s(a.vegeta, f"{tmp}/run.bin") if label == "soak" else None,
        "loadavg_before": load_before, "loadavg_after": loadavg(),
        "waited_for_builds_s": waited, "builds_seen": seen, "gave_up_waiting": gave_up,
        "warmup_answers_checked": checked,
    }
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    l = rec["latency_us"]
    print(f"  {server.name:6} {case:8} {rate:5}/s: p50 {l['50th']:6.0f} µs  p99 {l['99th']:6.0f} µs  max {l['max']:7.0f} µs  "
          f"errors {len(rec['errors'])}  CPU {rec['webhook_cpu_pct']:5.1f}%  RSS {rec['rss_kb']['max']} kB  "
          f"vegeta {rec['vegeta_cpu_pct']:5.1f}%  other {rec['other_load_cores']:.2f} cores  load {load_before}",
          file=sys.stderr)
    return rec


def measured(a, server, case, rate, secs, label):
    """A window; measured again once if other jobs took more than 0.25 cores meanwhile."""
    rec = window(a, server, case, rate, secs, label)
    if rec["other_load_cores"] > DISTURBED_CORES:
        print(f"  disturbed ({rec['other_load_cores']:.2f} cores of other load): again", file=sys.stderr)
        again = window(a, server, case, rate, secs, label)
        again["first_attempt_other_load_cores"] = rec["other_load_cores"]
        if again["other_load_cores"] < rec["other_load_cores"]:
            rec = again
        else:
            rec["second_attempt_other_load_cores"] = again["other_load_cores"]
    return rec


def slope_kb_per_min(samples):
    n = len(samples)
    if n < 2:
        return 0.0
    xs, ys = [t for t, _ in samples], [kb for _, kb in samples]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def soak(a, server):
    rec = window(a, server, "injected", a.soak_rate, a.soak_secs, "soak")
    s = rec["rss_samples"]
    minute = [kb for t, kb in s if t < 60] or [s[0][1]]
    last = [kb for t, kb in s if t >= s[-1][0] - 60] or [s[-1][1]]
    after1 = [p for p in s if p[0] >= 60]
    rec["memory"] = {
        "start_kb": s[0][1], "end_kb": s[-1][1], "max_kb": max(kb for _, kb in s),
        "min_kb": min(kb for _, kb in s),
        "first_minute_mean_kb": round(statistics.mean(minute)),
        "last_minute_mean_kb": round(statistics.mean(last)),
        "slope_kb_per_min": round(slope_kb_per_min(s), 2),
        "slope_after_first_minute_kb_per_min": round(slope_kb_per_min(after1), 2) if len(after1) > 1 else None,
        "samples": len(s),
    }
    return rec


def system():
    def first(path, key):
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    mem_kb = int(first("/proc/meminfo", "MemTotal").split()[0])
    return {"cpu": first("/proc/cpuinfo", "model name"), "cores": os.cpu_count(),
            "memory_gib": round(mem_kb / 1024 / 1024), "kernel": os.uname().release}


def comparable(patch):
    """A patch with sexton's annotation record parsed (its text compared as JSON)."""
    out = json.loads(json.dumps(patch))
    for o in out or []:
        if o.get("path") == "/metadata/annotations" and isinstance(o.get("value"), dict):
            o["value"] = {k: json.loads(v) if k == "sexton.dev/injected" else v for k, v in o["value"].items()}
    return out


def sanity(a, server):
    """One review of each case by urllib, checked, before any load."""
    ctx = ssl.create_default_context(cafile=a.ca)
    out = {}
    for case in CASES:
        with open(f"{a.work}/targets-{server.name}-{case}.jsonl") as f:
            t = json.loads(f.readline())
        body = base64.b64decode(t["body"])
        uid = json.loads(body)["request"]["uid"]
        req = urllib.request.Request(server.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        answer = urllib.request.urlopen(req, context=ctx, timeout=5).read()
        patch = check_answer(case, answer, uid)
        response = json.loads(answer)["response"]
        out[case] = {"request_bytes": len(body), "response_bytes": len(answer),
                     "patch_encoding": "none" if "patch" not in response else
                     ("array of numbers" if isinstance(response["patch"], list) else "base64"),
                     "patch_ops": len(patch) if patch else 0, "patch": patch}
    return out


def run(a):
    servers = [Server(s) for s in a.server]
    a.waited_total = 0
    res = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": system(),
           "commit": a.commit, "binary_bytes": a.binary_bytes, "vegeta": a.vegeta_version,
           "go_floor": a.go_floor, "servers": [s.name for s in servers],
           "settings": {"rates": a.rates, "secs": a.secs, "warmup_secs": a.warmup,
                        "soak_rate": a.soak_rate, "soak_secs": a.soak_secs, "max_wait": a.max_wait,
                        "max_wait_total": a.max_wait_total, "nice": a.nice,
                        "protocol": "HTTP/1.1 keep-alive over TLS 1.3 (vegeta -http2=false)",
                        "certificate": "ECDSA P-256, self-signed (openssl)"},
           "idle_rss_kb": {}, "reviews": {}, "loadavg_start": loadavg()}
    for s in servers:
        write_targets(a.work, s.name, s.url)
        res["idle_rss_kb"][s.name] = rss_kb(s.pid)
        res["reviews"][s.name] = sanity(a, s)
    first = servers[0].name
    for s in servers[1:]:
        if comparable(res["reviews"][s.name]["injected"]["patch"]) != comparable(res["reviews"][first]["injected"]["patch"]):
            raise SystemExit(f"{s.name}: its patch differs from {first}'s:\n"
                             f"{json.dumps(res['reviews'][s.name]['injected']['patch'])}\n"
                             f"{json.dumps(res['reviews'][first]['injected']['patch'])}")
    res["same_patch"] = len(servers) > 1
    print(f"answers checked ({', '.join(s.name for s in servers)}: the same patch); idle RSS "
          f"{res['idle_rss_kb']} kB; load {res['loadavg_start']}", file=sys.stderr)
    res["windows"] = []
    i = 0
    for rate in a.rates:
        for case in CASES:
            for s in (servers if i % 2 == 0 else servers[::-1]):
                res["windows"].append(measured(a, s, case, rate, a.secs, "rate"))
            i += 1
    res["soak"] = {}
    if a.soak_secs > 0:
        for s in servers:
            print(f"{s.name}: {a.soak_secs} s at {a.soak_rate}/s", file=sys.stderr)
            res["soak"][s.name] = soak(a, s)
    res["waited_for_builds_total_s"] = a.waited_total
    res["loadavg_end"] = loadavg()
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    return res


# --- the section of BENCHMARKS.md ------------------------------------------------------

def n0(x):
    return "—" if x is None else f"{x:,.0f}"


def ratio(a, b):
    if a is None or not b:
        return ""
    r = a / b
    return f"{r:.3f}" if r < 0.1 else f"{r:.2f}" if r < 10 else f"{r:.1f}"


def signed(x):
    return "—" if x is None else f"{x:+.1f}"


def errors(w):
    return sum(v for k, v in w["status_codes"].items() if k != "200")


def target(res):
    """(met, text) for p99 ≤ 2 ms at 500 requests/s (sexton, every 500/s window)."""
    ws = [w for w in res["windows"] if w["server"] == "sexton" and w["rate"] == TARGET_RATE]
    soak = res.get("soak", {}).get("sexton")
    if soak and soak["rate"] == TARGET_RATE:
        ws.append(soak)
    if not ws:
        return None, f"no sexton window at {TARGET_RATE} requests/s"
    worst = max(w["latency_us"]["99th"] for w in ws)
    parts = [f"{CASE_TITLE[w['case']] if w['label'] != 'soak' else 'the long run'}: {n0(w['latency_us']['99th'])} µs"
             for w in ws]
    met = worst <= TARGET_P99_US and all(errors(w) == 0 for w in ws)
    return met, f"p99 {'; '.join(parts)}"


def markdown(res):
    m, s = res["machine"], res["settings"]
    names = res["servers"]
    win = {(w["server"], w["case"], w["rate"]): w for w in res["windows"]}
    go = "go" in names
    L = [stamp.line(res["stamp"]), ""] if "stamp" in res else []
    idle = ", ".join(f"{SERVER_TITLE[n]} {n0(res['idle_rss_kb'][n])} kB" for n in names)
    L.append(f"Measured {res['started']}: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux {m['kernel']}; "
             f"`kubectl-sexton` {res['commit']} ({n0(res['binary_bytes'])} bytes)"
             + (f"; the Go floor {res['go_floor']}" if go else "") + f"; vegeta {res['vegeta']}. "
             f"Load average {res['loadavg_start']} at the start, {res['loadavg_end']} at the end. "
             f"Each rate and review: {s['warmup_secs']} s warm-up (every answer checked), then {s['secs']} s measured, "
             f"{' and '.join(SERVER_TITLE[n] for n in names)} one after the other. "
             f"Reviews: {n0(res['reviews']['sexton']['injected']['request_bytes'])} bytes (injected: "
             f"{res['reviews']['sexton']['injected']['patch_ops']} patch operations"
             + (", the same patch from both" if res.get("same_patch") else "") +
             f"), {n0(res['reviews']['sexton']['noop']['request_bytes'])} bytes (unchanged). RSS when idle: {idle}."
             + (f" Both webhooks and vegeta ran at nice {s['nice']}, other jobs at 0 (`--nice`)."
                if s.get("nice") is not None else ""))
    cols = [(n, SERVER_TITLE[n]) for n in names]

    def table(title, unit, get, fmt=n0, with_ratio=True):
        L.append("")
        L.append(f"**{title}**")
        L.append("")
        head = "| rate (req/s) | review |" + "".join(f" {t} |" for _, t in cols)
        align = "|---:|---|" + "---:|" * len(cols)
        if go and with_ratio:
            head += " sexton/Go |"
            align += "---:|"
        L.append(head)
        L.append(align)
        for rate in s["rates"]:
            for case in CASES:
                vals = [get(win[(n, case, rate)]) if (n, case, rate) in win else None for n, _ in cols]
                row = f"| {n0(rate)} | {CASE_TITLE[case]} |" + "".join(f" {fmt(v)} |" for v in vals)
                if go and with_ratio:
                    row += f" {ratio(vals[names.index('sexton')], vals[names.index('go')])} |"
                L.append(row)

    table("Latency p50 (µs), seen by the client", "µs", lambda w: w["latency_us"]["50th"])
    table("Latency p99 (µs)", "µs", lambda w: w["latency_us"]["99th"])
    table("Latency max (µs)", "µs", lambda w: w["latency_us"]["max"])
    table("Webhook CPU (% of one core)", "%", lambda w: w["webhook_cpu_pct"], fmt=lambda v: f"{v:.1f}")
    table("Webhook CPU per review (CPU-µs)", "µs", lambda w: w["webhook_cpu_us_per_request"])
    table("Webhook RSS, max over the window (kB)", "kB", lambda w: w["rss_kb"]["max"])

    ws = res["windows"]
    others = sorted(w["other_load_cores"] for w in ws)
    still = [w for w in ws if w["other_load_cores"] > DISTURBED_CORES]
    sx = [w for w in ws if w["server"] == "sexton" and w.get("in_webhook")]
    hw = "; ".join(f"{n0(w['rate'])}/s {w['case']} {w['in_webhook']['mean_us']:.0f} µs" for w in sx)
    L.append("")
    L.append(f"Every window: {sum(errors(w) for w in ws)} errors in {n0(sum(w['requests'] for w in ws))} reviews; "
             f"achieved rates within {max(abs(w['achieved_rate'] - w['rate']) / w['rate'] for w in ws) * 100:.2f} % "
             f"of the asked; at most {max(w['connections']['max'] for w in ws)} connections open. "
             f"vegeta (the client, on the same 2 cores): {min(w['vegeta_cpu_pct'] for w in ws):.0f}–"
             f"{max(w['vegeta_cpu_pct'] for w in ws):.0f} % of a core. Other load on the machine (busy time minus "
             f"webhook and vegeta): {others[0]:.2f}–{others[-1]:.2f} cores (median {statistics.median(others):.2f}); "
             f"a window above {DISTURBED_CORES} cores was measured again once and the less disturbed kept"
             + (f", {len(still)} still above" if still else "") + ". "
             f"Waited {res.get('waited_for_builds_total_s', 0)} s in all for other engineers' builds to end. "
             f"sexton's own time in the handler (its `review_duration_seconds`, body parsed → answer built), mean: {hw}.")

    if res.get("soak"):
        L.append("")
        L.append(f"**{s['soak_secs'] // 60 if s['soak_secs'] >= 60 else s['soak_secs']}"
                 f"{'-minute' if s['soak_secs'] >= 60 else '-second'} run at {s['soak_rate']} requests/s** "
                 f"(injected review, one server after the other)")
        L.append("")
        L.append("| | " + " | ".join(SERVER_TITLE[n] for n in res["soak"]) + " |")
        L.append("|---|" + "---:|" * len(res["soak"]))
        rows = [
            ("reviews (errors)", lambda w: f"{n0(w['requests'])} ({errors(w)})"),
            ("latency p50 / p99 / max (µs)", lambda w: f"{n0(w['latency_us']['50th'])} / {n0(w['latency_us']['99th'])} / {n0(w['latency_us']['max'])}"),
            ("p99 of the worst 10 s slice (µs)", lambda w: n0(max(x["p99"] for x in w["per_10s"]))),
            ("webhook CPU (% of one core)", lambda w: f"{w['webhook_cpu_pct']:.1f}"),
            ("RSS at the start / end (kB)", lambda w: f"{n0(w['memory']['start_kb'])} / {n0(w['memory']['end_kb'])}"),
            ("RSS min / max (kB)", lambda w: f"{n0(w['memory']['min_kb'])} / {n0(w['memory']['max_kb'])}"),
            ("RSS mean, first / last minute (kB)", lambda w: f"{n0(w['memory']['first_minute_mean_kb'])} / {n0(w['memory']['last_minute_mean_kb'])}"),
            ("RSS slope after the first minute (kB/min)", lambda w: signed(w["memory"]["slope_after_first_minute_kb_per_min"])),
            ("other load (cores); load average before", lambda w: f"{w['other_load_cores']:.2f}; {w['loadavg_before']}"),
        ]
        for title, get in rows:
            L.append(f"| {title} | " + " | ".join(get(w) for w in res["soak"].values()) + " |")

    met, text = target(res)
    L.append("")
    L.append(f"**Target: p99 ≤ 2 ms at {TARGET_RATE} requests/s** (sexton, TLS, keep-alive): "
             f"{'met' if met else 'missed' if met is not None else 'not measured'} — {text}.")
    return "\n".join(L)


def update(results, path):
    with open(results) as f:
        res = json.load(f)
    section.write(path, "webhook", markdown(res))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--server", action="append", required=True, help="NAME,PID,URL[,METRICS URL]")
    r.add_argument("--ca", required=True)
    r.add_argument("--work", required=True)
    r.add_argument("--vegeta", required=True)
    r.add_argument("--vegeta-version", required=True)
    r.add_argument("--go-floor", default="")
    r.add_argument("--commit", required=True)
    r.add_argument("--binary-bytes", type=int, required=True)
    r.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",") if x], default=[100, 500, 1000])
    r.add_argument("--secs", type=int, default=30)
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--soak-rate", type=int, default=500)
    r.add_argument("--soak-secs", type=int, default=300)
    r.add_argument("--max-wait", type=int, default=600)
    r.add_argument("--max-wait-total", type=int, default=1800)
    r.add_argument("--nice", type=int, help="vegeta's niceness (the script starts the servers so)")
    r.add_argument("--out", required=True)
    md = sub.add_parser("markdown")
    md.add_argument("results")
    u = sub.add_parser("update")
    u.add_argument("results")
    u.add_argument("file")
    a = p.parse_args()
    if a.cmd == "run":
        run(a)
    elif a.cmd == "markdown":
        with open(a.results) as f:
            print(markdown(json.load(f)))
    else:
        update(a.results, a.file)


if __name__ == "__main__":
    main()
