#!/usr/bin/env python3
"""The measuring half of bench/image-volume/run.sh: N wrapped Job pods at once on the real node,
the supervisor copied (`copy`), from an image volume (`image-volume`) or not at all (`native`).

  measure.py --namespace NS --manifests DIR --forms F1,F2,... --pods N --rounds R
             --sock CONTAINERD_SOCK --ctr CTR --out FILE.json --table FILE.md
      DIR/F.json is the Job of form F (its name is replaced per pod). Each round creates the
      N Jobs of each form in turn (copy, image-volume, native, copy, ...), all at once.

Per pod:
  start     creation (this machine's clock just before `kubectl create` of the batch) ->
            main's first line, its own clock reading (gettimeofday, µs), read from its log;
  finish    main's exit (its clock reading in its termination message) -> the first line of
            `kubectl get pods -w` that shows the pod Succeeded (this machine's clock).
Per batch, once every main has printed its first line (all N pods up at once):
  memory per wrapped container = (the supervisors' PSS other than their binary's pages
            + the resident pages of each distinct binary file, counted once) / supervisors.
  Each supervisor is its container's PID 1 (the task's PID in containerd); its PSS comes from
  /proc/PID/smaps, the binary's mappings told apart by the inode /proc/PID/maps gives them
  (the file beneath overlayfs: exe_file); a binary file's resident pages from mincore(2) on
  /proc/PID/exe, once per inode. With the copy, each pod has its own file (its emptyDir's),
  all of it in the page cache since `sexton install` wrote it; with the image volume every pod
  maps the one file of the image's layer (overlayfs), whose pages are counted once for the
  node. native has no supervisor: 0.
"""
import argparse, ctypes, json, mmap, os, statistics, subprocess, sys, threading, time

MAIN = "main"


def die(msg):
    sys.exit("measure.py: error: " + msg)


def kubectl(*args, ns=None, input=None, timeout=60):
    cmd = ["kubectl"] + (["-n", ns] if ns else []) + list(args)
    r = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def stamp_ns(text):
    """`SECONDS.MICROSECONDS` (busybox ts '%.s', perhaps followed by the echoed line) -> ns."""
    first = text.strip().split()[0] if text.strip() else ""
    sec, _, frac = first.partition(".")
    if not sec.isdigit() or not frac.isdigit():
        die("not a time stamp: %r" % text)
    return int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])


libc = ctypes.CDLL(None, use_errno=True)


def resident_bytes(path):
    """The bytes of the file at PATH that are in the page cache (mincore(2) of a mapping)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return 0
        # (private and writable only so that ctypes can take its address: nothing is written)
        m = mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        buf = (ctypes.c_char * size).from_buffer(m)
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * pages)()
        rc = libc.mincore(ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_size_t(size), vec)
        err = ctypes.get_errno()
        del buf
        m.close()
        if rc != 0:
            die("mincore(%s): %s" % (path, os.strerror(err)))
        return min(sum(1 for b in vec if b & 1) * mmap.PAGESIZE, size)


def exe_file(pid):
    """The executable's file: the inode its mappings name. Through overlayfs (the image
    volume) each pod's mount is a device of its own, but the inode is that of the image
    layer's one file beneath (overlayfs's xino), whose pages every mount maps: the device
    would count one file per pod. (Checked: two pods' supervisors mapped 2.3 MB of it each
    with a PSS of 0.7 MB, a quarter, not a half.) The copies are files of one ext4, each its
    own inode."""
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == "/sexton/sexton":
                return parts[4]
    die("pid %d maps no /sexton/sexton" % pid)


def pss_split(pid, key):
    """(PSS of the mappings of inode KEY, PSS of everything else), bytes, from /proc/PID/smaps."""
    binary = other = 0
    current = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
                current = parts[4] == key
            elif parts[0] == "Pss:":
                kb = int(parts[1]) * 1024
                if current:
                    binary += kb
                else:
                    other += kb
    return binary, other


def task_pids(ctr, sock):
    """containerd's container ID -> its task's PID (the container's PID 1)."""
    out = subprocess.run([ctr, "--address", sock, "-n", "k8s.io", "tasks", "ls"],
                         capture_output=True, text=True, check=True).stdout.splitlines()[1:]
    return {l.split()[0]: int(l.split()[1]) for l in out if len(l.split()) >= 2}


def memory(pods, ctr, sock):
    """(bytes per wrapped container, supervisors, distinct binary files, detail)."""
    pids = task_pids(ctr, sock)
    supervisors, files, other = 0, {}, 0
    for pod in pods:
        for c in pod["status"].get("containerStatuses", []) + pod["status"].get("initContainerStatuses", []):
            cid = c.get("containerID", "").split("://")[-1]
            pid = pids.get(cid)
            if not pid or "running" not in c.get("state", {}):
                continue
            try:
                argv0 = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")[0]
            except OSError:
                continue
            if argv0 != b"/sexton/sexton":
                continue
            supervisors += 1
            key = exe_file(pid)
            _, o = pss_split(pid, key)
            other += o
            if key not in files:
                files[key] = resident_bytes("/proc/%d/exe" % pid)
    if supervisors == 0:
        return 0, 0, 0, {"pss_other": 0, "binary_resident": 0}
    total = other + sum(files.values())
    return total / supervisors, supervisors, len(files), {"pss_other": other, "binary_resident": sum(files.values())}


class Watch:
    """`kubectl get pods -w`: the time each pod is first seen Succeeded or Failed."""

    def __init__(self, ns):
        self.done = {}
        self.proc = subprocess.Popen(
            ["kubectl", "-n", ns, "get", "pods", "-w", "--no-headers",
             "-o", "custom-columns=N:.metadata.name,P:.status.phase"],
            stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            t = time.time_ns()
            parts = line.split()
            if len(parts) == 2 and parts[1] in ("Succeeded", "Failed"):
                self.done.setdefault(parts[0], (t, parts[1]))

    def stop(self):
        self.proc.terminate()


def batch(ns, form, manifest, n, rnd, hold, ctr, sock, timeout):
    jobs = []
    for i in range(n):
        j = json.loads(json.dumps(manifest))
        j["metadata"]["name"] = "iv-%s-%d-%d" % (form, rnd, i)
        j["metadata"].pop("namespace", None)   # (kubectl's dry run names its context's)
        j["metadata"].setdefault("labels", {})["bench"] = "iv-%s-%d" % (form, rnd)
        tmpl = j["spec"]["template"]
        for c in tmpl["spec"]["containers"] + tmpl["spec"].get("initContainers", []):
            if c["name"] == MAIN:
                c["command"] = [x.replace("HOLD", str(hold)) for x in c["command"]]
        jobs.append(j)
    watch = Watch(ns)
    created = time.time_ns()
    kubectl("create", "-f", "-", ns=ns, input=json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs}))
    sel = "job-name in (%s)" % ",".join(j["metadata"]["name"] for j in jobs)
    deadline = time.time() + timeout
    starts = {}
    while len(starts) < n:
        if time.time() > deadline:
            die("%s round %d: %d of %d mains started in %ds" % (form, rnd, len(starts), n, timeout))
        pods = json.loads(kubectl("get", "pods", "-l", sel, "-o", "json", ns=ns))["items"]
        for p in pods:
            name = p["metadata"]["name"]
            ready = any(c["name"] == MAIN and "running" in c.get("state", {})
                        for c in p["status"].get("containerStatuses", []) + p["status"].get("initContainerStatuses", []))
            if name in starts or not ready:
                continue
            r = subprocess.run(["kubectl", "-n", ns, "logs", name, "-c", MAIN], capture_output=True, text=True)
            # (main's own first line: the supervisor's log lines come before it)
            own = [l for l in r.stdout.splitlines() if l.split() and l.split()[0].replace(".", "", 1).isdigit()]
            if r.returncode == 0 and own:
                starts[name] = stamp_ns(own[0]) - created
        time.sleep(0.5)
    pods = json.loads(kubectl("get", "pods", "-l", sel, "-o", "json", ns=ns))["items"]
    per, supervisors, files, detail = memory(pods, ctr, sock)
    while len([p for p in starts if p in watch.done]) < n:
        if time.time() > deadline + hold:
            die("%s round %d: not every pod ended" % (form, rnd))
        time.sleep(0.5)
    watch.stop()
    pods = json.loads(kubectl("get", "pods", "-l", sel, "-o", "json", ns=ns))["items"]
    finishes = []
    for p in pods:
        end, phase = watch.done[p["metadata"]["name"]]
        if phase != "Succeeded":
            die("%s: pod %s %s" % (form, p["metadata"]["name"], phase))
        for c in p["status"].get("containerStatuses", []):
            if c["name"] == MAIN:
                finishes.append(end - stamp_ns(c["state"]["terminated"]["message"]))
    kubectl("delete", "jobs", "-l", "bench=iv-%s-%d" % (form, rnd), "--wait=true", ns=ns, timeout=120)
    return {"form": form, "round": rnd, "pods": n, "start_ns": sorted(starts.values()),
            "finish_ns": sorted(finishes), "memory_per_container": per, "supervisors": supervisors,
            "binary_files": files, "memory_detail": detail}


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--namespace", required=True)
    a.add_argument("--manifests", required=True)
    a.add_argument("--forms", default="copy,image-volume,native")
    a.add_argument("--pods", type=int, default=20)
    a.add_argument("--rounds", type=int, default=2)
    a.add_argument("--hold", type=int, default=20)
    a.add_argument("--timeout", type=int, default=180)
    a.add_argument("--sock", required=True)
    a.add_argument("--ctr", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--table", required=True)
    args = a.parse_args()
    forms = args.forms.split(",")
    manifests = {f: json.load(open(os.path.join(args.manifests, f + ".json"))) for f in forms}
    load0 = os.getloadavg()
    runs = []
    for rnd in range(args.rounds):
        for f in forms:
            r = batch(args.namespace, f, manifests[f], args.pods, rnd, args.hold, args.ctr, args.sock, args.timeout)
            print("measure.py: %s round %d: start median %.2f s, finish median %.2f s, %.0f kB per wrapped container"
                  % (f, rnd, statistics.median(r["start_ns"]) / 1e9, statistics.median(r["finish_ns"]) / 1e9,
                     r["memory_per_container"] / 1024), file=sys.stderr)
            runs.append(r)
    json.dump({"pods": args.pods, "rounds": args.rounds, "hold_s": args.hold, "forms": forms, "runs": runs,
               "machine": {"cores": os.cpu_count(), "loadavg_before": load0, "loadavg_after": os.getloadavg()}},
              open(args.out, "w"), indent=1)
    open(args.table, "w").write(table(runs, forms))


def table(runs, forms):
    def of(f, key):
        return [x for r in runs if r["form"] == f for x in r[key]]

    def mem(f):
        return statistics.median([r["memory_per_container"] for r in runs if r["form"] == f]) / 1024

    med = {f: (statistics.median(of(f, "start_ns")) / 1e9, statistics.median(of(f, "finish_ns")) / 1e9) for f in forms}
    base = med.get("native")
    labels = {"copy": "wrap, binary copied (`--binary-source copy`)",
              "image-volume": "wrap, binary from an image volume (`--binary-source image-volume`)",
              "native": "native sidecar (`--strategy native`)"}
    out = ["| form | memory per wrapped container (kB) | binary files | pod start, median (s) | p90 | main exit → Succeeded, median (s) | p90 | start vs native | finish vs native |",
           "|---|---|---|---|---|---|---|---|---|"]
    for f in forms:
        s, e = sorted(of(f, "start_ns")), sorted(of(f, "finish_ns"))
        files = max(r["binary_files"] for r in runs if r["form"] == f)
        d = lambda x, y: "%+.2f s" % (x - y) if base else "-"
        out.append("| %s | %.0f | %d | %.2f | %.2f | %.2f | %.2f | %s | %s |" % (
            labels.get(f, f), mem(f), files, med[f][0], s[int(0.9 * (len(s) - 1))] / 1e9, med[f][1],
            e[int(0.9 * (len(e) - 1))] / 1e9, d(med[f][0], base[0]) if base else "-", d(med[f][1], base[1]) if base else "-"))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
