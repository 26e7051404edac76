#!/usr/bin/env python3
"""The webhook under hostile clients, on loopback (issue 29; BENCHMARKS.md "Admission
webhook under hostile clients"): `kubectl-sexton webhook` with certificate files and two
legitimate clients on 127.0.0.1, each in a process of its own, sending AdmissionReviews one
after another: one keeps its connection alive (HTTP/1.1 keep-alive, as the API server does),
the other opens a new TLS connection for each review (as after an idle close). First alone
(quiet), then beside hostile clients on other loopback addresses (127.0.1.N), in processes
of their own: slow bodies (headers and one byte), idle TLS, oversize bodies (8 MiB declared;
one a second per client), each client reconnecting as soon as the webhook closes it (a second
after a refused connection), each address with more clients than the per-client limit.

Reported per phase and client: p50/p99, and for the per-connection client where the time
went (TCP connect, TLS handshake, request to response) in its slowest reviews; for the
webhook: peak RSS (VmHWM and sampled VmRSS), its CPU time, the longest accept queue seen on
its port (/proc/net/tcp), and the kernel's listen-queue counters (nstat; they count the
whole network namespace). Then the memory per review at the limits: reviews of a Pod with
64 containers (32 mains, 32 sidecars, wrap), and of 3 MiB with 75 000 JSON values, 4 at once.

Several binaries are run in turn, round after round (A B A B ...), so that a machine's load
weighs on each alike; the summary gives each binary's medians over its rounds.

  bench/webhook-hostile/hostile.py BIN [BIN ...] [--secs N] [--hostile-addresses N] [--rounds N]
                           [--no-limits] [--pin] [--timeline FILE] [--out FILE.md] [--max-rss-mib N]
                           (run by bench/webhook-hostile/run.sh)

--pin puts the hostile clients (and this harness's sampling) on the first half of the CPUs,
the webhook and the two legitimate clients on the others (sched_setaffinity), in both
phases: the attackers' own CPU is then not the webhook's, as in a cluster, where they run
on other machines, and what is left in the ratio is the work they make the webhook do.
Without it (the default), everything shares every CPU: on 2 cores the hostile clients'
Python processes take CPU from the webhook and from the legitimate clients themselves.

--out writes the run's tables as stamped Markdown (bench/lib/stamp.py; bench/lib/check.py checks
them in CI). --max-rss-mib fails the run (exit 1) when the webhook's peak RSS (VmHWM) went
above N MiB: the chart's memory limit, the one figure of this run that is a bound and not a
timing (scripts/test.sh's quick form asserts it; the latencies it only reports).
"""
import argparse, json, multiprocessing, os, socket, ssl, statistics, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))  # (bench/lib)
import stamp  # noqa: E402  (bench/lib/stamp.py)

CPUS = frozenset(os.sched_getaffinity(0))  # every CPU this run may use, before any --pin

P = argparse.ArgumentParser()
P.add_argument("bins", nargs="+")
P.add_argument("--secs", type=float, default=20)
P.add_argument("--hostile-addresses", type=int, default=4)
P.add_argument("--rounds", type=int, default=1)
P.add_argument("--no-limits", action="store_true", help="skip the reviews at the limits")
P.add_argument("--timeline", help="write every legitimate review's timings (JSON lines) here")
P.add_argument("--out", help="write the tables, stamped, as Markdown here")
P.add_argument("--max-rss-mib", type=int, help="fail when the webhook's peak RSS exceeds this")
P.add_argument("--pin", action="store_true",
               help="hostile clients on the first half of the CPUs, the webhook and legitimate clients on the rest")
P.add_argument("--key", default="ecdsa",
               help="serving key(s), comma-separated, each run in turn: ecdsa (P-256, what the chart's "
                    "self-managed and cert-manager modes issue) or rsa (2048 bits, a certificate of your own)")
OPT = P.parse_args()
PER_CLIENT = 64
PORT, CA = None, None


def rss(pid, field="VmRSS"):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    return 0


def cpu_secs(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def runqueue_wait(pid):
    """Seconds the process's threads have spent runnable but waiting for a CPU (schedstat)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[1])
        except (OSError, IndexError):
            pass
    return total / 1e9


def machine_busy():
    """(busy, total) clock ticks of all CPUs since boot (/proc/stat)."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f) - f[3] - f[4], sum(f)


def accept_queue(port):
    """The listening socket's accept queue now (rx_queue of a LISTEN row of /proc/net/tcp)."""
    for line in open("/proc/net/tcp"):
        f = line.split()
        if f[3] == "0A" and int(f[1].split(":")[1], 16) == port:
            return int(f[4].split(":")[1], 16)
    return 0


NSTAT = ["TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtTCPReqQFullDrop", "TcpExtSyncookiesSent", "TcpExtTCPSynRetrans"]


def nstat():
    out = subprocess.run(["nstat", "-az"], capture_output=True, text=True).stdout
    got = {l.split()[0]: int(l.split()[1]) for l in out.splitlines() if l.split() and l.split()[0] in NSTAT}
    return {k: got.get(k, 0) for k in NSTAT}


def review(pod):
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default", "operation": "CREATE", "userInfo": {"username": "bench"},
        "object": pod, "dryRun": False}}).encode()


def job_pod():
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "job-", "annotations": {"sexton.dev/inject": "native"}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "app:1", "command": ["run"]},
                {"name": "proxy", "image": "proxy:1", "command": ["proxy"],
                 "env": [{"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"}]}]}}


def crowded_pod(n=32):
    c = lambda role, i: {"name": f"{role}-{i}", "image": "app:1", "command": ["run"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crowded", "annotations": {
        "sexton.dev/inject": "wrap", "sexton.dev/sidecars": ",".join(f"sidecar-{i}" for i in range(n))}},
        "spec": {"restartPolicy": "Never", "containers": [c("main", i) for i in range(n)] + [c("sidecar", i) for i in range(n)]}}


def big_pod():
    # about 3 MiB in all, 75 000 values: long strings in a list of env vars
    env = [{"name": f"V{i}", "value": "x" * 170} for i in range(15000)]
    p = job_pod(); p["spec"]["containers"][0]["env"] = env
    return p


def ctx():
    c = ssl.create_default_context(cafile=CA)
    c.check_hostname = False
    return c


def connect(src, timeline=None):
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30, source_address=(src, 0))
    t1 = time.perf_counter()
    s = ctx().wrap_socket(s, server_hostname="127.0.0.1")
    if timeline is not None:
        timeline += [t1 - t0, time.perf_counter() - t1]
    return s


def request(body, close):
    return (b"POST /mutate/annotated HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + (b"Connection: close\r\n" if close else b"") + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def response(s, buf=b""):
    """One HTTP/1.1 response read from s (Content-Length framed): (status line, leftover)."""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            raise ConnectionError("closed before a response head")
        buf += b
    head, rest = buf.split(b"\r\n\r\n", 1)
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:"))
    while len(rest) < length:
        b = s.recv(65536)
        if not b:
            raise ConnectionError("closed inside a response body")
        rest += b
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return head, rest[length:]


def post(body, src="127.0.0.1"):
    """One review over a new connection: (connect, TLS handshake, request to response, total) in seconds."""
    t0, phases = time.perf_counter(), []
    s = connect(src, phases)
    t2 = time.perf_counter()
    s.sendall(request(body, close=True))
    response(s)
    s.close()
    t3 = time.perf_counter()
    return phases + [t3 - t2, t3 - t0]


def cpus(side):
    """--pin's CPUs for side "hostile" (the first half) or "webhook" (the rest); None unpinned."""
    if not OPT.pin:
        return None
    mine = sorted(CPUS)
    half = len(mine) // 2
    return set(mine[:half]) if side == "hostile" else set(mine[half:])


def pin(side):
    """Puts the calling process (its threads to come as well) on side's CPUs under --pin."""
    mine = cpus(side)
    if mine is not None:
        os.sched_setaffinity(0, mine)


def legit(kind, secs, port, ca, out):
    """Reviews one after another for secs; kind "new" opens a connection for each, "kept"
    keeps one alive (reconnecting only when the webhook closes it). Puts the samples
    [start, connect, tls, response, total] (seconds; connect and tls 0 on a kept connection)."""
    global PORT, CA
    pin("webhook")
    PORT, CA = port, ca
    body, samples, end, s = review(job_pod()), [], time.time() + secs, None
    waited, t0 = runqueue_wait(os.getpid()), time.time()
    while time.time() < end:
        start = time.time()
        if kind == "new":
            samples.append([start] + post(body))
        else:
            t0, phases = time.perf_counter(), [0.0, 0.0]
            if s is None:
                phases = []
                s = connect("127.0.0.1", phases)
            t1 = time.perf_counter()
            try:
                s.sendall(request(body, close=False))
                _, left = response(s)
                assert not left
            except (OSError, ConnectionError):
                s.close(); s = None
                continue  # closed by the webhook between two reviews (idle): not a latency
            t2 = time.perf_counter()
            samples.append([start] + phases + [t2 - t1, t2 - t0])
        time.sleep(0.01)
    out.put((samples, (runqueue_wait(os.getpid()) - waited) / (time.time() - t0)))


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else float("nan")


def legit_phase(secs):
    """Both legitimate clients at once, each in a process of its own: {kind: samples}."""
    runs = {}
    for kind in ("kept", "new"):
        q = multiprocessing.Queue()
        p = multiprocessing.Process(target=legit, args=(kind, secs, PORT, CA, q), daemon=True)
        p.start()
        runs[kind] = (p, q)
    got = {kind: q.get(timeout=secs + 120) for kind, (p, q) in runs.items()}
    for p, _ in runs.values():
        p.join()
    return {k: v[0] for k, v in got.items()}, {k: v[1] for k, v in got.items()}


STOP = threading.Event()


def hostile(kind, src, counts):
    while not STOP.is_set():
        try:
            s = connect(src)
            if kind == "slow":
                s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n{")
                s.recv(1)
            elif kind == "idle":
                s.recv(1)
            else:
                s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n" + b"[0," * 20000)
                s.recv(100)
                time.sleep(1)
            s.close()
            counts[0] += 1
        except (OSError, ssl.SSLError):
            counts[1] += 1
            time.sleep(1)


def hostile_address(src, n, port, ca, stop, done):
    """n clients from address src, until stop is set; (ended, refused) to done."""
    global PORT, CA
    PORT, CA = port, ca
    pin("hostile")
    counts = [0, 0]
    kinds = ["slow", "idle", "oversize"]
    for i in range(n):
        threading.Thread(target=hostile, args=(kinds[i % 3], src, counts), daemon=True).start()
    stop.wait()
    done.put(tuple(counts))


class Watch:
    """Samples the webhook's RSS and its port's accept queue every 100 ms while running."""

    def __init__(self, pid, others=()):
        self.pid, self.rss, self.queue, self.stop = pid, 0, 0, threading.Event()
        self.others, self.others_cpu, self.busy = others, sum(cpu_secs(p) for p in others), machine_busy()
        self.cpu, self.net, self.t = cpu_secs(pid), nstat(), time.perf_counter()
        self.wait = runqueue_wait(pid)
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while not self.stop.is_set():
            self.rss = max(self.rss, rss(self.pid))
            self.queue = max(self.queue, accept_queue(PORT))
            time.sleep(0.1)

    def end(self):
        self.stop.set()
        net = nstat()
        took = time.perf_counter() - self.t
        busy = machine_busy()
        return {"machine_busy": (busy[0] - self.busy[0]) / max(1, busy[1] - self.busy[1]),
                "hostile_cpu": (sum(cpu_secs(p) for p in self.others) - self.others_cpu) / took,
                "peak_rss_mib": self.rss, "accept_queue_max": self.queue,
                "webhook_cpu": (cpu_secs(self.pid) - self.cpu) / took,
                "webhook_runqueue": (runqueue_wait(self.pid) - self.wait) / took,
                "nstat": {k.replace("TcpExt", ""): net[k] - self.net[k] for k in NSTAT}}


def summary(samples):
    tot = [s[4] for s in samples]
    out = {"n": len(tot), "p50": quantile(tot, 0.5) * 1000, "p99": quantile(tot, 0.99) * 1000}
    slow = sorted(samples, key=lambda s: -s[4])[:max(1, len(samples) // 100)]
    out["slowest"] = [[round(x * 1000, 1) for x in s[1:]] for s in slow]
    out["connect_over_900ms"] = sum(1 for s in samples if s[1] > 0.9)
    return out


# openssl's arguments for each serving key (--key)
KEYS = {"ecdsa": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"], "rsa": ["-newkey", "rsa:2048"]}


def label(r):
    """A contender's name in the tables: the binary, and the key when more than one is run."""
    b = os.path.basename(r["bin"])
    return f"{b} ({r['key']})" if len(OPT.key.split(",")) > 1 else b


def start_webhook(binary, d, key):
    global PORT
    s = socket.socket(); s.bind(("127.0.0.1", 0)); PORT = s.getsockname()[1]; s.close()
    w = subprocess.Popen([binary, "webhook", "--listen", f"127.0.0.1:{PORT}", "--metrics-addr", "127.0.0.1:0",
                          "--health-addr", "127.0.0.1:0", "--tls-cert-file", CA, "--tls-key-file", f"{d}/{key}.key",
                          "--kubernetes-version", "1.34", "--kubeconfig", f"{d}/kubeconfig", "--log-level", "error"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=lambda: pin("webhook"))
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=1).close(); break
        except OSError:
            time.sleep(0.1)
    return w


def one_run(binary, d, key, timeline):
    """Quiet then hostile phase (then the limits) against a fresh webhook: a dict of results."""
    global STOP, CA
    STOP = threading.Event()
    CA = f"{d}/{key}.crt"
    w = start_webhook(binary, d, key)
    res = {"bin": binary, "key": key}
    try:
        legit_phase(2)
        watch = Watch(w.pid)
        got, waits = legit_phase(OPT.secs)
        res["quiet"] = {k: summary(v) | {"runqueue": waits[k]} for k, v in got.items()} | watch.end()
        timeline("quiet", got)
        procs, stop = [], multiprocessing.Event()
        for a in range(OPT.hostile_addresses):
            q = multiprocessing.Queue()
            p = multiprocessing.Process(target=hostile_address, args=(f"127.0.1.{a + 1}", PER_CLIENT + 16, PORT, CA, stop, q), daemon=True)
            p.start()
            procs.append((p, q))
        time.sleep(3)
        watch = Watch(w.pid, [p.pid for p, _ in procs])
        got, waits = legit_phase(OPT.secs)
        res["hostile"] = {k: summary(v) | {"runqueue": waits[k]} for k, v in got.items()} | watch.end()
        timeline("hostile", got)
        stop.set()
        ended = refused = 0
        for p, q in procs:
            e, r = q.get(timeout=30)
            ended, refused = ended + e, refused + r
            p.terminate()
        res["hostile"] |= {"hostile_closed": ended, "hostile_refused": refused}
        if not OPT.no_limits:
            time.sleep(11)
            res["limits"] = limits(w.pid)
        res["vmhwm_mib"] = rss(w.pid, "VmHWM")
    finally:
        w.terminate(); w.wait()
    return res


def limits(pid):
    out, base = [], rss(pid)
    for name, pod in [("64 containers, wrap", crowded_pod()), ("3 MiB, 75 000 values", big_pod())]:
        body = review(pod)
        before = rss(pid, "VmHWM")
        ts = [threading.Thread(target=post, args=(body,)) for _ in range(4)]
        t0 = time.perf_counter()
        for t in ts: t.start()
        for t in ts: t.join()
        out.append({"what": name, "body": len(body), "ms_for_4": round((time.perf_counter() - t0) * 1000),
                    "rss_before_mib": base, "vmhwm_mib": max(before, rss(pid, "VmHWM"))})
    return out


def report(r):
    print(f"== {r['bin']}, {r['key']} key")
    for phase in ("quiet", "hostile"):
        x = r[phase]
        q = r["quiet"]
        for kind in ("kept", "new"):
            ratio = x[kind]["p99"] / q[kind]["p99"]
            print(f"  {phase:7} {kind:4}: {x[kind]['n']:4} reviews, p50 {x[kind]['p50']:7.2f} ms, "
                  f"p99 {x[kind]['p99']:8.2f} ms ({ratio:.2f}x quiet); the client waited for a CPU "
                  f"{x[kind]['runqueue'] * 100:.0f}% of the time")
        for kind in ("kept", "new"):
            print(f"  {phase:7} {kind:4}: slowest 1% (connect, TLS, response, total ms): {x[kind]['slowest']}; "
                  f"connects over 900 ms: {x[kind]['connect_over_900ms']}")
        print(f"  {phase:7} machine: CPUs busy {x['machine_busy'] * 100:.0f}%, hostile clients' CPU {x['hostile_cpu']:.2f} cores")
        print(f"  {phase:7} webhook: peak RSS {x['peak_rss_mib']} MiB, CPU {x['webhook_cpu']:.2f} cores, "
              f"threads waiting for a CPU {x['webhook_runqueue']:.2f} on average, "
              f"accept queue max {x['accept_queue_max']}, nstat {x['nstat']}"
              + (f"; hostile connections closed by the webhook {x['hostile_closed']}, refused {x['hostile_refused']}"
                 if phase == "hostile" else ""))
    for l in r.get("limits", []):
        print(f"  at the limits: {l['what']}: body {l['body']} bytes, 4 at once in {l['ms_for_4']} ms; "
              f"RSS {l['rss_before_mib']} MiB before, peak (VmHWM) {l['vmhwm_mib']} MiB")
    print(f"  webhook peak RSS over the run (VmHWM): {r['vmhwm_mib']} MiB (chart limit 256 MiB)", flush=True)


def pinning():
    """One line saying where the processes ran."""
    if not OPT.pin:
        return f"Unpinned: the webhook and every client on the same {len(CPUS)} CPUs."
    return (f"Pinned (--pin): hostile clients on CPUs {sorted(cpus('hostile'))}, the webhook and the "
            f"legitimate clients on CPUs {sorted(cpus('webhook'))}.")


def markdown(results, st):
    """The run as Markdown: the stamp, the legitimate clients per phase, the limits."""
    L = [stamp.line(st), "", pinning(), "",
         "| binary | round | phase | client | reviews | p50 ms | p99 ms | p99 / quiet | webhook peak RSS MiB |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for phase in ("quiet", "hostile"):
            for kind in ("kept", "new"):
                x, q = r[phase][kind], r["quiet"][kind]
                L.append(f"| `{label(r)}` | {r['round']} | {phase} | {kind} | {x['n']} | "
                         f"{x['p50']:.2f} | {x['p99']:.2f} | {x['p99'] / q['p99']:.2f} | {r[phase]['peak_rss_mib']} |")
    limits = [(r, l) for r in results for l in r.get("limits", [])]
    if limits:
        L += ["", "| binary | round | review at the limits | body bytes | 4 at once, ms | peak RSS (VmHWM) MiB |",
              "|---|---|---|---|---|---|"]
        L += [f"| `{label(r)}` | {r['round']} | {l['what']} | {l['body']} | {l['ms_for_4']} | "
              f"{l['vmhwm_mib']} |" for r, l in limits]
    return "\n".join(L) + "\n"


def main():
    keys = OPT.key.split(",")
    print(pinning(), flush=True)
    for k in keys:
        if k not in KEYS:
            sys.exit(f"webhook-hostile: --key {k}: expected ecdsa or rsa")
    if OPT.pin and len(CPUS) < 2:
        sys.exit(f"webhook-hostile: --pin needs 2 CPUs or more, this process may use {len(CPUS)}")
    st = stamp.begin()
    pin("hostile")  # (this process samples every 100 ms: on the attackers' side)
    d = tempfile.mkdtemp(prefix="sexton-bench-hostile-")
    for k in keys:
        subprocess.run(["openssl", "req", "-x509", *KEYS[k], "-nodes", "-days", "1", "-subj", "/CN=bench",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", f"{d}/{k}.key", "-out", f"{d}/{k}.crt"],
                       check=True, capture_output=True)
    open(f"{d}/kubeconfig", "w").write(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
    tl = open(OPT.timeline, "w") if OPT.timeline else None
    results = []
    contenders = [(b, k) for b in OPT.bins for k in keys]
    for rnd in range(OPT.rounds):
        for b, k in contenders:
            def timeline(phase, got):
                if tl:
                    for kind, samples in got.items():
                        for s in samples:
                            tl.write(json.dumps({"round": rnd, "bin": b, "key": k, "phase": phase, "client": kind,
                                                 "t": s}) + "\n")
            r = one_run(b, d, k, timeline)
            r["round"] = rnd
            report(r)
            results.append(r)
    if len(results) > 1:
        print("== medians over rounds (p99 ms quiet -> hostile, ratio)")
        for b, k in contenders:
            rs = [r for r in results if (r["bin"], r["key"]) == (b, k)]
            for kind in ("kept", "new"):
                qs = [r["quiet"][kind]["p99"] for r in rs]
                hs = [r["hostile"][kind]["p99"] for r in rs]
                ratios = [h / q for h, q in zip(hs, qs)]
                print(f"  {label(rs[0])} {kind}: p99 {statistics.median(qs):.1f} -> {statistics.median(hs):.1f} ms, "
                      f"ratio median {statistics.median(ratios):.2f} (each: {', '.join(f'{x:.2f}' for x in ratios)}); "
                      f"peak RSS {max(r['vmhwm_mib'] for r in rs)} MiB")
    print("json: " + json.dumps(results))
    if OPT.out:
        with open(OPT.out, "w") as f:
            f.write(markdown(results, stamp.end(st)))
    peak = max(r["vmhwm_mib"] for r in results)
    if OPT.max_rss_mib is not None and peak > OPT.max_rss_mib:
        sys.exit(f"webhook-hostile: the webhook's peak RSS was {peak} MiB, above --max-rss-mib {OPT.max_rss_mib}")


if __name__ == "__main__":
    main()
