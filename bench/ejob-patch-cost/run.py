#!/usr/bin/env python3
"""The API server's CPU per `pods/ephemeralcontainers` PATCH, by the patch's type (issue 33:
what bounds an EphemeralJob over 10 000 pods). Against the test API server of
scripts/testenv.sh (SEXTON_TESTENV_STATE, SEXTON_API_PORT), as its admin:

  bench/ejob-patch-cost/run.py N ROUNDS CONCURRENCY [TYPES]

N fresh pods per type (deleted and created again), then ROUNDS rounds; each round patches
N/ROUNDS pods of each type, CONCURRENCY at a time over keep-alive connections, the types in
a rotating order, and reads the API server's and etcd's utime + stime around each batch.
TYPES (comma-separated, default smp,json,merge): `smp` the strategic merge patch the
controller sends, `json` an RFC 6902 patch, `merge` an RFC 7386 merge patch, `jsontest`
RFC 6902 with a `test` of the resourceVersion; `-pb` after a type asks for the answer in
protobuf. Every type carries the pod's resourceVersion (the controller's no-lost-update
precondition); at the end each is sent once more with a stale one, and must get 409.
Figures are CPU time, not wall time: compare types within one run (interleaved)."""
import http.client, json, ssl, sys, os, threading, time, queue
ST = os.environ.get("SEXTON_TESTENV_STATE", "/tmp/sexton-testenv")
HOST, PORT = "127.0.0.1", int(os.environ.get("SEXTON_API_PORT", "16443"))
ctx = ssl.create_default_context(cafile=f"{ST}/pki/ca.crt")
ctx.load_cert_chain(f"{ST}/pki/admin.crt", f"{ST}/pki/admin.key")
NS = "patchx"
N, ROUNDS, CONC = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
TYPES = sys.argv[4].split(",") if len(sys.argv) > 4 else ["smp", "json", "merge"]
local = threading.local()
def conn():
    if not hasattr(local, "c"):
        local.c = http.client.HTTPSConnection(HOST, PORT, context=ctx, timeout=60)
    return local.c
def req(method, path, body=None, ctype="application/json", accept="application/json"):
    h = {"Content-Type": ctype, "Accept": accept}
    for attempt in range(3):
        c = conn()
        try:
            c.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=h)
            r = c.getresponse(); b = r.read()
            return r.status, b
        except (OSError, http.client.HTTPException):
            c.close(); del local.c
    raise SystemExit("connection failed 3 times")
def pids():
    api = int(open(f"{ST}/kube-apiserver.pid").read().split()[0])
    etcd = int(open(f"{ST}/etcd.pid").read().split()[0])
    return {"apiserver": api, "etcd": etcd}
def ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS,
        "labels": {"app": "scale", "batch.kubernetes.io/job-name": "report"}},
        "spec": {"nodeName": "nowhere-0", "restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
          "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "exec /work/report --all"],
             "env": [{"name": "REPORT_DAY", "value": "2026-11-24"}], "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
            {"name": "proxy", "image": "envoyproxy/envoy:v1.30.1", "args": ["-c", "/etc/envoy/envoy.yaml"],
             "ports": [{"containerPort": 15001, "name": "proxy"}],
             "env": [{"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"}],
             "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}}}]}}
EC = {"name": "sexton-ej-abcdef-probe", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
      "terminationMessagePolicy": "File", "targetContainerName": "main", "command": ["sh", "-c", "pgrep -x report >/dev/null"],
      "env": [{"name": "SEXTON_EPHEMERALJOB_UID", "value": "0b6c3c5e-8f7a-4d0e-9a51-2b1c9e3f4d10"},
              {"name": "SEXTON_EPHEMERALJOB", "value": "scale-10000"}]}
def body(kind, rv, existing):
    kind = kind.replace("-pb", "")
    if kind == "smp":
        return ({"metadata": {"resourceVersion": rv}, "spec": {"ephemeralContainers": [EC]}}, "application/strategic-merge-patch+json")
    if kind == "json":
        ops = [{"op": "replace", "path": "/metadata/resourceVersion", "value": rv}]
        if existing is None:
            ops.append({"op": "add", "path": "/spec/ephemeralContainers", "value": [EC]})
        else:
            ops.append({"op": "add", "path": "/spec/ephemeralContainers/-", "value": EC})
        return (ops, "application/json-patch+json")
    if kind == "jsontest":
        ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
               {"op": "add", "path": "/spec/ephemeralContainers", "value": [EC]}]
        return (ops, "application/json-patch+json")
    if kind == "merge":
        return ({"metadata": {"resourceVersion": rv}, "spec": {"ephemeralContainers": (existing or []) + [EC]}}, "application/merge-patch+json")
    raise SystemExit(kind)
def main():
    s, _ = req("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    names = {t: [f"{t}-{i:05d}" for i in range(N)] for t in TYPES}
    allnames = [n for t in TYPES for n in names[t]]
    # fresh pods
    work = queue.Queue()
    for n in allnames: work.put(n)
    rvs = {}
    def creator():
        while True:
            try: n = work.get_nowait()
            except queue.Empty: return
            req("DELETE", f"/api/v1/namespaces/{NS}/pods/{n}?gracePeriodSeconds=0")
            for _ in range(50):
                s, b = req("POST", f"/api/v1/namespaces/{NS}/pods", pod(n))
                if s == 201: rvs[n] = json.loads(b)["metadata"]["resourceVersion"]; break
                time.sleep(0.1)
            else: raise SystemExit(f"create {n}: {s} {b[:200]}")
    t = time.time()
    ths = [threading.Thread(target=creator) for _ in range(CONC)]
    [x.start() for x in ths]; [x.join() for x in ths]
    print(f"created {len(allnames)} pods in {time.time()-t:.1f}s", file=sys.stderr)
    # one check of the precondition per type: a stale rv must be refused with 409
    P = pids(); per = N // ROUNDS
    res = {t: {"api": 0, "etcd": 0, "wall": 0.0, "n": 0, "bytes": 0, "status": {}} for t in TYPES}
    for r in range(ROUNDS):
        order = TYPES[r % len(TYPES):] + TYPES[:r % len(TYPES)]
        for t in order:
            batch = names[t][r*per:(r+1)*per]
            q = queue.Queue(); [q.put(n) for n in batch]
            def worker():
                while True:
                    try: n = q.get_nowait()
                    except queue.Empty: return
                    b, ct = body(t, rvs[n], None)
                    acc = "application/vnd.kubernetes.protobuf" if t.endswith("-pb") else "application/json"
                    s, out = req("PATCH", f"/api/v1/namespaces/{NS}/pods/{n}/ephemeralcontainers?fieldManager=sexton-ejob", b, ct, acc)
                    res[t]["status"][s] = res[t]["status"].get(s, 0) + 1
                    res[t]["bytes"] += len(json.dumps(b))
                    if s != 200: print(t, n, s, out[:300], file=sys.stderr)
            time.sleep(1)
            a0, e0, w0 = ticks(P["apiserver"]), ticks(P["etcd"]), time.time()
            ths = [threading.Thread(target=worker) for _ in range(CONC)]
            [x.start() for x in ths]; [x.join() for x in ths]
            res[t]["wall"] += time.time() - w0
            res[t]["api"] += ticks(P["apiserver"]) - a0; res[t]["etcd"] += ticks(P["etcd"]) - e0; res[t]["n"] += len(batch)
    hz = os.sysconf("SC_CLK_TCK")
    for t in TYPES:
        x = res[t]
        print(f"{t:9s} n={x['n']} api {1e3*x['api']/hz/x['n']:.2f} ms CPU/patch, etcd {1e3*x['etcd']/hz/x['n']:.2f} ms, "
              f"wall {x['wall']:.1f}s ({x['n']/x['wall']:.0f}/s), body {x['bytes']//x['n']} B, {x['status']}")
    # stale precondition
    for t in TYPES:
        n = names[t][0]
        b, ct = body(t, rvs[n], [EC])
        s, out = req("PATCH", f"/api/v1/namespaces/{NS}/pods/{n}/ephemeralcontainers", b, ct)
        print(f"{t}: stale resourceVersion -> HTTP {s} {out[:80]!r}")
main()
