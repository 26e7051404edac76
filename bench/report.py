#!/usr/bin/env python3
"""Turns target/bench/results.json into the results section of BENCHMARKS.md (between the
markers) and a latency CDF plot. Usage: report.py RESULTS BENCHMARKS.md PLOT.png"""
import json, sys

res_path, md_path, png_path = sys.argv[1:4]
r = json.load(open(res_path))

def f(x, nd=0):
    if x is None or x != x:
        return "n/a"
    return f"{x:,.{nd}f}"

def ratio(s, k):
    if not k or k != k or s != s:
        return "n/a"
    return f"{s / k:.3f}" if s / k < 0.1 else f"{s / k:.2f}"

lines = []
m = r["machine"]
lines.append(f"Machine: {m['cpu']}, {m['cores']} cores, {m['mem']}, Linux {m['kernel']}. "
             f"Graveyard on tmpfs ({m['tmpfs']}) unless stated; disk rows on {m['disk_fs']}.")
lines.append("")

rx = r["reaction"]
k, s = rx["kubexit"], rx["sexton"]
mu = rx.get("sexton-musl")
lines += ["### Reaction latency: main's child exits → sidecar's child receives SIGTERM (µs)", "",
          "| | kubexit | sexton (default `auto`) | sexton/kubexit | sexton `inotify` | sexton `poll` 100ms |" + (" sexton musl (image build) |" if mu else ""),
          "|---|---:|---:|---:|---:|---:|" + ("---:|" if mu else "")]
for q in ["p50", "p90", "p99", "max"]:
    lines.append(f"| {q} | {f(k[q])} | {f(s[q])} | {ratio(s[q], k[q])} | {f(rx['sexton-inotify'][q])} | {f(rx['sexton-poll-100ms'][q])} |" + (f" {f(mu[q])} |" if mu else ""))
lines.append(f"| repetitions | {k['n']} | {s['n']} | | {rx['sexton-inotify']['n']} | {rx['sexton-poll-100ms']['n']} |" + (f" {mu['n']} |" if mu else ""))
lines.append("")

d = r["reaction_disk"]
lines += [f"Graveyard on disk ({m['disk_fs']}; sexton fsyncs each tombstone, kubexit does not):", "",
          "| | kubexit | sexton | sexton/kubexit |", "|---|---:|---:|---:|"]
for q in ["p50", "p90", "p99", "max"]:
    lines.append(f"| {q} | {f(d['kubexit'][q])} | {f(d['sexton'][q])} | {ratio(d['sexton'][q], d['kubexit'][q])} |")
lines.append(f"| repetitions | {d['kubexit']['n']} | {d['sexton']['n']} | |")
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
lines.append(f"| overhead over direct (p50) | | {f(st['kubexit']['p50'] - dr)} | {f(st['sexton']['p50'] - dr)} | {ratio(st['sexton']['p50'] - dr, st['kubexit']['p50'] - dr)} |" + (f" {f(sm['p50'] - dr)} |" if sm else ""))
lines.append("")

sz = r["size"]
zx = [c for c in ["sexton-musl", "sexton-slim"] if c in sz]
zn = {"sexton-musl": "sexton musl (image build)", "sexton-slim": "sexton slim (static glibc, no API client)"}
lines += ["### Size (bytes)", "", "| | kubexit | sexton (static glibc, local build) | sexton/kubexit |" + "".join(f" {zn[c]} | ratio |" for c in zx), "|---|---:|---:|---:|" + "---:|---:|" * len(zx)]
for key, label in [("binary_bytes", "static binary"), ("layer_tar_bytes", "image layer (tar of the binary)"), ("layer_tar_gz_bytes", "image layer, gzip -9")]:
    lines.append(f"| {label} | {f(sz['kubexit'][key])} | {f(sz['sexton'][key])} | {ratio(sz['sexton'][key], sz['kubexit'][key])} |" + "".join(f" {f(sz[c][key])} | {ratio(sz[c][key], sz['kubexit'][key])} |" for c in zx))

md = open(md_path).read()
start, end = "<!-- results:start -->", "<!-- results:end -->"
a, b = md.index(start) + len(start), md.index(end)
open(md_path, "w").write(md[:a] + "\n" + "\n".join(lines) + "\n" + md[b:])

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
print(f"updated {md_path} and {png_path}")
