#!/usr/bin/env python3
"""Turns target/bench/results.json into the results section of BENCHMARKS.md (between the
markers) and a latency CDF plot.
Usage: report.py RESULTS BENCHMARKS.md PLOT.png [--md FILE] [--no-update]
  --md FILE     also write the sections alone into FILE (what bench/lib/check.py checks)
  --no-update   leave BENCHMARKS.md and the plot alone (bench/in-pod/run.sh --quick)"""
import json, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))  # (bench/lib)
import section  # noqa: E402  (bench/lib/section.py)
import stamp  # noqa: E402  (bench/lib/stamp.py)

args = sys.argv[1:]
update = "--no-update" not in args
args = [a for a in args if a != "--no-update"]
md_out = None
if "--md" in args:
    i = args.index("--md")
    md_out = args[i + 1]
    del args[i:i + 2]
res_path, md_path, png_path = args[:3]
r = json.load(open(res_path))
md = open(md_path).read()

def f(x, nd=0):
    if x is None or x != x:
        return "n/a"
    return f"{x:,.{nd}f}"

def ratio(s, k):
    if not k or k != k or s != s:
        return "n/a"
    return f"{s / k:.3f}" if s / k < 0.1 else f"{s / k:.2f}"

def full():
    lines = []
    m = r["machine"]
    lines.append(stamp.line(r["stamp"]))
    lines.append("")
    lines.append(f"Machine: {m['cpu']}, {m['cores']} cores, {m['mem']}, Linux {m['kernel']}. "
                 f"Graveyard on tmpfs ({m['tmpfs']}) unless stated; disk rows on {m['disk_fs']}.")
    if r.get("kubexit_stand_in"):
        lines.append(f"**The kubexit columns are a stand-in** ({r['kubexit_stand_in']}): "
                     "this run checks the harness, its figures compare nothing.")
    lines.append("")

    rx = r["reaction"]
    k, s = rx["kubexit"], rx["sexton"]
    mu = rx.get("sexton-musl")
    lines += ["### Reaction latency: main's child exits → sidecar's child receives SIGTERM (µs)", "",
              "| | kubexit | sexton (default `auto`) | sexton/kubexit | sexton `inotify` | sexton `poll` 100ms |" + (" sexton musl (image build) |" if mu else ""),
              "|---|---:|---:|---:|---:|---:|" + ("---:|" if mu else "")]
    for q in ["p50", "p90", "p99", "max"]:
        lines.append(f"| {q} | {f(k[q])} | {f(s[q])} | {ratio(s[q], k[q])} | {f(rx['sexton-inotify'][q])} | {f(rx['sexton-poll-100ms'][q])} |" + (f" {f(mu[q])} |" if mu else ""))
    lines.append(f"| repetitions | {k['n']} | {s['n']} | – | {rx['sexton-inotify']['n']} | {rx['sexton-poll-100ms']['n']} |" + (f" {mu['n']} |" if mu else ""))
    lines.append("")

    d = r["reaction_disk"]
    lines += [f"Graveyard on disk ({m['disk_fs']}; sexton fsyncs each tombstone, kubexit does not):", "",
              "| | kubexit | sexton | sexton/kubexit |", "|---|---:|---:|---:|"]
    for q in ["p50", "p90", "p99", "max"]:
        lines.append(f"| {q} | {f(d['kubexit'][q])} | {f(d['sexton'][q])} | {ratio(d['sexton'][q], d['kubexit'][q])} |")
    lines.append(f"| repetitions | {d['kubexit']['n']} | {d['sexton']['n']} | – |")
    lines.append("")

    sc = r["scale"]
    lines += ["### Scale: time until the *last* sidecar is signalled (µs)", "",
              "| pod | kubexit p50 | kubexit p99 | sexton p50 | sexton p99 | sexton/kubexit (p99) | repetitions |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    lines.append(f"| main + 1 sidecar | {f(k['p50'])} | {f(k['p99'])} | {f(s['p50'])} | {f(s['p99'])} | {ratio(s['p99'], k['p99'])} | {k['n']} |")
    for n in (10, 50):
        a, b = sc.get(f"kubexit-{n}-last"), sc.get(f"sexton-{n}-last")
        if a and b:
            lines.append(f"| main + {n} sidecars | {f(a['p50'])} | {f(a['p99'])} | {f(b['p50'])} | {f(b['p99'])} | {ratio(b['p99'], a['p99'])} | {a['n']} |")
    a, b = sc["kubexit-unrelated1000"], sc["sexton-unrelated1000"]
    lines.append(f"| main + 1 sidecar, 1000 unrelated tombstones | {f(a['p50'])} | {f(a['p99'])} | {f(b['p50'])} | {f(b['p99'])} | {ratio(b['p99'], a['p99'])} | {a['n']} |")
    lines.append("")

    idle = r["idle"]
    extra = [c for c in ["sexton-musl", "sexton-slim"] if c in idle]
    names = {"sexton-musl": "sexton musl (`auto`)", "sexton-slim": "sexton slim, no API client (`auto`)"}
    cols = ["kubexit", "sexton", "sexton-inotify", "sexton-poll", "sexton-poll-100ms"] + extra
    lines += [f"### Wrapper overhead: a sidecar supervising an idle child, its main alive ({idle['kubexit']['window_s']} s window)", "",
              "| | kubexit | sexton (`auto`) | sexton/kubexit | sexton `inotify` | sexton `poll` 1s | sexton `poll` 100ms |" + "".join(f" {names[c]} |" for c in extra),
              "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(extra)]
    for key, label, nd in [("rss_peak_kb", "peak RSS (kB)", 0), ("rss_steady_kb", "steady RSS (kB)", 0), ("pss_kb", "PSS (kB)", 0), ("private_kb", "private memory (kB)", 0), ("cpu_ms", "CPU time in the window (ms)", 2), ("threads", "threads", 0)]:
        kv, sv = idle["kubexit"][key], idle["sexton"][key]
        rest = " | ".join(f(idle[c][key], nd) for c in cols[2:])
        lines.append(f"| {label} | {f(kv, nd)} | {f(sv, nd)} | {ratio(sv, kv) if kv else 'n/a'} | {rest} |")
    lines.append("")

    st = r["start"]
    dr = st["direct"]["p50"]
    sm = st.get("sexton-musl")
    lines += ["### Start overhead: spawn → the child's first instruction (µs)", "",
              "| | direct (no wrapper) | kubexit | sexton | sexton/kubexit |" + (" sexton musl |" if sm else ""), "|---|---:|---:|---:|---:|" + ("---:|" if sm else "")]
    for q in ["p50", "p99"]:
        lines.append(f"| {q} | {f(st['direct'][q])} | {f(st['kubexit'][q])} | {f(st['sexton'][q])} | {ratio(st['sexton'][q], st['kubexit'][q])} |" + (f" {f(sm[q])} |" if sm else ""))
    lines.append(f"| overhead over direct (p50) | – | {f(st['kubexit']['p50'] - dr)} | {f(st['sexton']['p50'] - dr)} | {ratio(st['sexton']['p50'] - dr, st['kubexit']['p50'] - dr)} |" + (f" {f(sm['p50'] - dr)} |" if sm else ""))
    lines.append("")

    sz = r["size"]
    zx = [c for c in ["sexton-musl", "sexton-slim"] if c in sz]
    zn = {"sexton-musl": "sexton musl (image build)", "sexton-slim": "sexton slim (static glibc, no API client)"}
    lines += ["### Size (bytes)", "", "| | kubexit | sexton (static glibc, local build) | sexton/kubexit |" + "".join(f" {zn[c]} | ratio |" for c in zx), "|---|---:|---:|---:|" + "---:|---:|" * len(zx)]
    for key, label in [("binary_bytes", "static binary"), ("layer_tar_bytes", "image layer (tar of the binary)"), ("layer_tar_gz_bytes", "image layer, gzip -9")]:
        lines.append(f"| {label} | {f(sz['kubexit'][key])} | {f(sz['sexton'][key])} | {ratio(sz['sexton'][key], sz['kubexit'][key])} |" + "".join(f" {f(sz[c][key])} | {ratio(sz[c][key], sz['kubexit'][key])} |" for c in zx))

    return lines


def plot():
    rx = r["reaction"]
    k = rx["kubexit"]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for label, key, style in [("kubexit", "kubexit", "-"), ("sexton (auto)", "sexton", "-"), ("sexton (inotify)", "sexton-inotify", "--"), ("sexton musl (auto)", "sexton-musl", ":")]:
        if key not in rx:
            continue
        v = rx[key]["samples_us"]
        ax.step(v, [(i + 1) / len(v) for i in range(len(v))], style, where="post", label=f"{label}, p99 {rx[key]['p99']:,.0f} µs")
    ax.set_xscale("log")
    ax.set_xlabel("reaction latency: main exits → sidecar gets SIGTERM (µs, log scale)")
    ax.set_ylabel("fraction of runs")
    ax.set_title(f"Sidecar reaction latency, {k['n']} runs per tool, PID namespaces, tmpfs graveyard")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(png_path)

def cpu_lines():
    c = r["cpu"]
    m = c.get("machine", r.get("machine", {}))
    rows = c["churn"]
    labels = [l for l in ["kubexit", "sexton", "sexton-inotify", "sexton-old"] if l in c["labels"]]
    head = {"kubexit": "kubexit", "sexton": "sexton `auto` (default)", "sexton-inotify": "sexton `inotify`",
            "sexton-old": "sexton (before)"}
    def cell(tool, mode, rate, key, nd):
        x = [w for w in rows if w["tool"] == tool and w["mode"] == mode and w["rate"] == rate]
        if not x:
            return "n/a"
        v = f(x[0][key], nd) + (" †" if x[0].get("disturbed") else "")
        return v if x[0]["sidecar_alive"] else v + " (sidecar exited)"
    def get(tool, mode, rate, key):
        x = [w for w in rows if w["tool"] == tool and w["mode"] == mode and w["rate"] == rate]
        return x[0][key] if x else float("nan")
    out = [stamp.line(c.get("stamp", r["stamp"])), ""]
    uncommitted = m.get("sexton_uncommitted", "").strip()
    out.append(f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, Linux {m.get('kernel', '?')}; "
               f"sexton built from `{m.get('sexton_commit', '?')}`" + (f" with uncommitted changes in {', '.join('`' + u + '`' for u in uncommitted.split())}" if uncommitted else "") + ". "
               f"Graveyard on tmpfs ({m.get('tmpfs', '/dev/shm')}). Load average {c['load_before']} before the section, {c['load_after']} after "
               f"(other jobs share this machine: their load during the windows is given below). The section took {c.get('section_s', float('nan')):.0f} s.")
    out.append("")
    modes = [("create", "create"), ("cycle", "create + remove")]
    rates = sorted({w["rate"] for w in rows})
    ratio_cols = "sexton" in labels and "kubexit" in labels
    def table(title, key, nd, ratio_ok=True):
        hdr = "| unrelated files/s | achieved files/s |" + "".join(f" {head[l]} |" for l in labels[:2])
        hdr += " sexton/kubexit |" if ratio_cols and ratio_ok else ""
        hdr += "".join(f" {head[l]} |" for l in labels[2:])
        n = len(labels) + (1 if ratio_cols and ratio_ok else 0)
        t = [title, "", hdr, "|---|---:|" + "---:|" * n]
        for mode, mname in modes:
            for rate in rates:
                ach = [get(l, mode, rate, "achieved_per_s") for l in labels]
                ach = [a for a in ach if a == a]
                a = f"{f(min(ach))}–{f(max(ach))}" if ach and round(min(ach)) != round(max(ach)) else (f(ach[0]) if ach else "n/a")
                line = f"| {rate:,} ({mname}) | {a} |" + "".join(f" {cell(l, mode, rate, key, nd)} |" for l in labels[:2])
                if ratio_cols and ratio_ok:
                    line += f" {ratio(get('sexton', mode, rate, key), get('kubexit', mode, rate, key))} |"
                line += "".join(f" {cell(l, mode, rate, key, nd)} |" for l in labels[2:])
                t.append(line)
        return t + [""]
    secs = c["churn_secs"]
    out += ["### CPU under graveyard churn: a sidecar (its main alive) while a program writes unrelated files into the graveyard", "",
            f"Each rate for {secs:g} s, one tool at a time. A file is one `open(O_CREAT)`, `write` (a tombstone's 96 bytes), "
            "`close` (and `unlink` in the create + remove rows), paced one file per deadline. "
            "CPU is the wrapper's, all threads, over the window.", ""]
    out += table("**Wrapper CPU, % of one core**", "cpu_pct", 2)
    out += table("**Wrapper CPU per 1 000 unrelated files (CPU-µs)**", "cpu_us_per_1000", 0)
    out += table("**Wrapper wake-ups: context switches per second, all threads**", "ctxsw_per_s", 0, ratio_ok=False)
    other = [w["other_load_cores"] for w in rows]
    gen = [w["generator_cpu_pct"] for w in rows]
    late = sum(w["late_files"] for w in rows)
    nfiles = sum(w["files"] for w in rows)
    ndist = sum(1 for w in rows if w.get("disturbed"))
    out.append(f"Other load on the machine during the windows (machine busy time minus wrapper and generator): "
               f"{min(other):.2f}–{max(other):.2f} cores (median {sorted(other)[len(other) // 2]:.2f}) of {m.get('cores', '?')}; "
               f"a window with more than 0.25 cores of other load was measured a second time and the less disturbed kept"
               + (f"; † marks the {ndist} still above 0.25 cores" if ndist else "") + ". "
               f"Generator: {min(gen):.0f}–{max(gen):.0f}% of a core; {late:,.0f} of {nfiles:,.0f} files written more than 1 ms after their deadline.")
    out.append("")
    idle = c["idle"]
    il = [l for l in labels if l in idle]
    if il:
        w = idle[il[0]]["window_s"]
        out += [f"### CPU while idle: the same sidecar, nothing happening in its graveyard ({w} s window)", ""]
        hdr = "| |" + "".join(f" {head[l]} |" for l in il[:2]) + (" sexton/kubexit |" if ratio_cols else "") + "".join(f" {head[l]} |" for l in il[2:])
        out += [hdr, "|---|" + "---:|" * (len(il) + (1 if ratio_cols else 0))]
        for key, label, nd, scale in [("cpu_ms", "CPU per minute (ms)", 2, True), ("ctxsw", "wake-ups (context switches) per minute", 0, True)]:
            vals = {l: idle[l].get(key, float("nan")) * 60 / idle[l]["window_s"] for l in il}
            line = f"| {label} |" + "".join(f" {f(vals[l], nd)} |" for l in il[:2])
            if ratio_cols:
                line += f" {ratio(vals['sexton'], vals['kubexit']) if vals['kubexit'] else 'n/a'} |"
            line += "".join(f" {f(vals[l], nd)} |" for l in il[2:])
            out.append(line)
        if "machine_busy_cores" in idle:
            out += ["", f"Machine busy during the idle window (everything, other jobs included): {idle['machine_busy_cores']:.2f} cores."]
    return out

sections = []
if "reaction" in r:
    sections.append(("results", full()))
if "cpu" in r:
    sections.append(("cpu", cpu_lines()))
if md_out:
    with open(md_out, "w") as out:
        out.write("\n\n".join("\n".join(lines) for _, lines in sections) + "\n")
    print(f"wrote {md_out}")
if update:
    for name, lines in sections:
        md = section.put(md, name, "\n".join(lines))
    open(md_path, "w").write(md)
    if "reaction" in r:
        plot()
        print(f"updated {md_path} and {png_path}")
    else:
        print(f"updated {md_path}")
