#!/usr/bin/env python3
"""The stamp of a benchmark run: which commit was measured, when, on what machine, and
whether the machine was quiet or loaded. Every harness (bench/*/run.sh) writes it into its
results file and into the Markdown it produces, in one format, so that a section of
BENCHMARKS.md says where its figures come from and bench/lib/check.py can tell a stamped
section from an unstamped one.

  stamp.py begin > STAMP.json          before the measurements
  stamp.py end STAMP.json RESULTS.json [SECTION]
                                       after them: the stamp, completed, becomes the
                                       "stamp" key of the results file (a JSON object), or
                                       of its object SECTION (a section measured alone)
  stamp.py line RESULTS.json|STAMP.json  the stamp as one Markdown line

Quiet or loaded: SEXTON_BENCH_MACHINE=quiet|loaded says it; otherwise the machine counts
as loaded when its 1-minute load average before the run was 0.25 per core or more (other
jobs were running: a quiet machine's is near 0). The load averages before and after are in
the line either way, so that a reader can judge.

`begin` first lets the load of the harness's own preparation settle: the builds and setup
just before it raise the 1-minute average for a minute or more, and on an idle machine
marked the run loaded (1.21 after bench/in-pod/run.sh's builds). It waits, at most
SEXTON_BENCH_SETTLE seconds (default 120; 0 for none: scripts/test.sh's quick forms run
beside other stages, where nothing settles), until the average is below the threshold. A
machine that other jobs keep busy stays above it, and the run is stamped loaded.
"""
import datetime
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINE_PREFIX = "Measured at "


def git(*args, root=ROOT):
    try:
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def loadavg():
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]


def threshold():
    return 0.25 * (os.cpu_count() or 1)


def settle():
    """Waits until the 1-minute load average is below the threshold, at most
    SEXTON_BENCH_SETTLE seconds (see above)."""
    try:
        limit = float(os.environ.get("SEXTON_BENCH_SETTLE", "120"))
    except ValueError:
        sys.exit("stamp.py: SEXTON_BENCH_SETTLE must be a number of seconds")
    deadline = time.monotonic() + limit
    if loadavg()[0] >= threshold() and limit > 0:
        print(f"stamp.py: waiting up to {limit:.0f} s for the load average ({loadavg()[0]:.2f}) "
              f"to fall below {threshold():.2f}", file=sys.stderr)
    while loadavg()[0] >= threshold() and time.monotonic() < deadline:
        time.sleep(2)


def begin(root=ROOT):
    """The stamp's first half; `root`: the work tree the measured binaries were built in."""
    commit = git("rev-parse", "--short", "HEAD", root=root) or "unknown"
    # what the measured binaries are built from: the code, not the documents (nor the
    # figure bench/in-pod/run.sh draws, a result)
    dirty = subprocess.run(["git", "-C", root, "diff", "--quiet", "HEAD", "--", "crates", "bench",
                            "Cargo.lock", ":(exclude)bench/in-pod/latency-cdf.png"]).returncode != 0 \
        if commit != "unknown" else False
    settle()
    return {
        "commit": commit + ("+changes" if dirty else ""),
        "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "kernel": os.uname().release,
        "loadavg_before": loadavg(),
    }


def end(stamp):
    stamp = dict(stamp)
    stamp["finished"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    stamp["loadavg_after"] = loadavg()
    said = os.environ.get("SEXTON_BENCH_MACHINE", "")
    if said not in ("", "quiet", "loaded"):
        sys.exit(f"stamp.py: SEXTON_BENCH_MACHINE must be quiet or loaded, not {said!r}")
    stamp["machine_state"] = said or (
        "loaded" if stamp["loadavg_before"][0] >= threshold() else "quiet")
    return stamp


def line(stamp):
    date = stamp["started"].replace("T", " ").replace("Z", " UTC")
    before, after = stamp["loadavg_before"][0], stamp.get("loadavg_after", [float("nan")])[0]
    return (f"{LINE_PREFIX}`{stamp['commit']}` on {date}: {stamp['cpu']}, {stamp['cores']} cores, "
            f"Linux {stamp['kernel']}; **{stamp.get('machine_state', 'loaded')} machine** "
            f"(1-minute load average {before:.2f} before, {after:.2f} after).")


def of(path):
    """The stamp of a results file, or a stamp file itself."""
    data = json.load(open(path))
    return data.get("stamp", data)


def main(argv):
    if argv[:1] == ["begin"] and len(argv) == 1:
        print(json.dumps(begin()))
    elif argv[:1] == ["end"] and len(argv) in (3, 4):
        results = json.load(open(argv[2]))
        (results[argv[3]] if len(argv) == 4 else results)["stamp"] = end(json.load(open(argv[1])))
        with open(argv[2], "w") as out:
            json.dump(results, out, indent=2)
    elif argv[:1] == ["line"] and len(argv) == 2:
        print(line(of(argv[1])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
