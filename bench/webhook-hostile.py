#!/usr/bin/env python3
"""The webhook under hostile clients, on loopback (issue 29; BENCHMARKS.md "Admission
webhook under hostile clients"): `kubectl-sexton webhook` with certificate files, a legitimate
client on 127.0.0.1 sending AdmissionReviews one after another (a new TLS connection each, as
after an idle close), first alone (quiet) and then beside hostile clients on other loopback
addresses (127.0.1.N), in processes of their own: slow bodies (headers and one byte), idle
TLS, oversize bodies (8 MiB declared; one a second per client), each client reconnecting
as soon as the webhook closes it (a second after a refused connection), each address with
more clients than the per-client limit. The legitimate p50/p99 in both phases and the webhook's peak RSS
(VmHWM and sampled VmRSS). Then the memory per review at the limits: reviews of a Pod with
64 containers (32 mains, 32 sidecars, wrap), and of 3 MiB with 75 000 JSON values, 4 sent at once.

  bench/webhook-hostile.py BIN [--secs N] [--hostile-addresses N]   (run by bench/webhook-hostile.sh)
"""
import json, multiprocessing, os, socket, ssl, subprocess, sys, tempfile, threading, time

BIN = sys.argv[1]
ARGS = dict(zip(sys.argv[2::2], sys.argv[3::2]))
SECS = float(ARGS.get("--secs", "20"))
HOSTILE_ADDRS = int(ARGS.get("--hostile-addresses", "4"))
PER_CLIENT = 64

def rss(pid, field="VmRSS"):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    return 0

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

def connect(src):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30, source_address=(src, 0))
    return ctx().wrap_socket(s, server_hostname="127.0.0.1")

def post(body, src="127.0.0.1"):
    t0 = time.perf_counter()
    s = connect(src)
    s.sendall(b"POST /mutate/annotated HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    assert got.startswith(b"HTTP/1.1 200"), got[:200]
    return time.perf_counter() - t0

def legit(secs):
    body, lat, end = review(job_pod()), [], time.time() + secs
    while time.time() < end:
        lat.append(post(body))
        time.sleep(0.01)
    lat.sort()
    return len(lat), lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000

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
    counts = [0, 0]
    kinds = ["slow", "idle", "oversize"]
    for i in range(n):
        threading.Thread(target=hostile, args=(kinds[i % 3], src, counts), daemon=True).start()
    stop.wait()
    done.put(tuple(counts))

def main():
    global PORT, CA
    d = tempfile.mkdtemp(prefix="sexton-bench-hostile-")
    CA = f"{d}/tls.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=bench",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", f"{d}/tls.key", "-out", CA],
                   check=True, capture_output=True)
    s = socket.socket(); s.bind(("127.0.0.1", 0)); PORT = s.getsockname()[1]; s.close()
    kc = f"{d}/kubeconfig"
    open(kc, "w").write("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
    w = subprocess.Popen([BIN, "webhook", "--listen", f"127.0.0.1:{PORT}", "--metrics-addr", "127.0.0.1:0",
                          "--health-addr", "127.0.0.1:0", "--tls-cert-file", CA, "--tls-key-file", f"{d}/tls.key",
                          "--kubernetes-version", "1.34", "--kubeconfig", kc, "--log-level", "error"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", PORT), timeout=1).close(); break
            except OSError:
                time.sleep(0.1)
        legit(2)
        n, p50, p99 = legit(SECS)
        print(f"quiet: {n} reviews, p50 {p50:.2f} ms, p99 {p99:.2f} ms, RSS {rss(w.pid)} MiB")
        peak = [0]
        def sample():
            while not STOP.is_set():
                peak[0] = max(peak[0], rss(w.pid)); time.sleep(0.1)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        procs, stop = [], multiprocessing.Event()
        for a in range(HOSTILE_ADDRS):
            q = multiprocessing.Queue()
            p = multiprocessing.Process(target=hostile_address, args=(f"127.0.1.{a + 1}", PER_CLIENT + 16, PORT, CA, stop, q), daemon=True)
            p.start()
            procs.append((p, q))
        time.sleep(3)
        n, p50h, p99h = legit(SECS)
        STOP.set()
        stop.set()
        ended = refused = 0
        for p, q in procs:
            e, r = q.get(timeout=30)
            ended, refused = ended + e, refused + r
            p.terminate()
        print(f"hostile ({HOSTILE_ADDRS} addresses x {PER_CLIENT + 16} clients: slow bodies, idle TLS, 8 MiB bodies): "
              f"{n} reviews, p50 {p50h:.2f} ms, p99 {p99h:.2f} ms ({p99h / p99:.2f}x quiet), peak RSS {peak[0]} MiB; "
              f"hostile connections closed by the webhook {ended}, refused {refused}")
        time.sleep(11)
        base = rss(w.pid)
        for name, pod in [("64 containers, wrap", crowded_pod()), ("3 MiB, 75 000 values", big_pod())]:
            body = review(pod)
            before = rss(w.pid, "VmHWM")
            ts = [threading.Thread(target=post, args=(body,)) for _ in range(4)]
            t0 = time.perf_counter()
            for t in ts: t.start()
            for t in ts: t.join()
            took = (time.perf_counter() - t0) * 1000
            print(f"at the limits: {name}: body {len(body)} bytes, 4 at once in {took:.0f} ms; "
                  f"RSS {base} MiB before, peak (VmHWM) {max(before, rss(w.pid, 'VmHWM'))} MiB")
        print(f"webhook peak RSS over the whole run (VmHWM): {rss(w.pid, 'VmHWM')} MiB (chart limit 256 MiB)")
    finally:
        w.terminate(); w.wait()

main()
