#!/usr/bin/env python3
"""README.md's quick start, walked as a new user would: its shell blocks, in the order the
README has them, run as one script against the real node of scripts/e2e-cluster.sh, ending
with Jobs that complete. Editing the README changes what runs here: a step removed or moved
before what it needs fails the walk (the images must be pushed, to a path of this walk's
own, before a pod can pull them; the plugin installed before `kubectl sexton`; the namespace
made before it is labelled; the Job injected before it is waited for). Two steps have no
effect this node can show, so removing them goes unnoticed: the chart's install (a
server-side dry run here, see SUBSTITUTIONS) and the namespace's label (no webhook runs).

Only what must differ on this machine is substituted, each substitution listed in
SUBSTITUTIONS with the reason; each must match the README exactly as often as it says, so
a README edit that moves one of them away from its reason fails here rather than be run
unsubstituted. Around the walk the environment is set as a user's would be, without touching
the README's commands:
  - KUBECONFIG is the node's cluster (scripts/e2e-cluster.sh), kubectl and helm on the PATH;
  - the node pulls the README's images from the registry they were pushed to (the loopback
    test registry of scripts/registry.sh; containerd reaches 127.0.0.1 over plain HTTP);
  - busybox:1.36, which the examples run and the node cannot pull (nothing outside this
    machine is reached), is the node's busybox:e2e (Debian's busybox-static) under that
    name.

  e2e/quickstart.py            the walk (brings the node up if needed, like e2e/run.sh)
  e2e/quickstart.py --print    print the script it would run, substitutions made

Needs what e2e/run.sh needs (root, the images of scripts/images.sh); run under the e2e lock
(scripts/test.sh's e2e stage runs it after e2e/run.sh).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (README text, what the test runs instead, how many times the README has it, why)
SUBSTITUTIONS = [
    (
        "git clone https://github.com/sexton-dev/sexton && cd sexton",
        'cd "$QUICKSTART_ROOT"',
        1,
        "no network here: the checkout under test is the clone",
    ),
    (
        "export REGISTRY=registry.example.com/team",
        'export REGISTRY="$QUICKSTART_REGISTRY"',
        1,
        "the registry the user pushes to: the anonymous loopback registry of scripts/registry.sh, "
        "under a path of this walk's own (a step that should have pushed finds nothing there)",
    ),
    (
        "/usr/local/bin/",
        '"$QUICKSTART_BIN/"',
        1,
        "the plugin is installed into a directory of the test's, first on the PATH, not the machine's",
    ),
    (
        'scripts/publish.sh "$REGISTRY" --no-build --no-push',
        'scripts/publish.sh "$REGISTRY" --no-build --no-push -- --dry-run=server',
        1,
        "the node has no Service network (no kube-proxy, no cluster DNS): the chart's pods could "
        "not reach the API server, so the release is checked and admitted by the API server "
        "(every object) but not installed; the Job after it is injected by the plugin",
    ),
]


def quick_start(readme):
    """The shell blocks of the README's '## Quick start' section, in document order."""
    m = re.search(r"^## Quick start\n(.*?)(?=^## )", readme, re.S | re.M)
    if not m:
        sys.exit("quickstart: README.md has no '## Quick start' section")
    blocks = re.findall(r"^```sh\n(.*?)^```", m.group(1), re.S | re.M)
    if not blocks:
        sys.exit("quickstart: README.md's quick start has no ```sh block")
    return blocks


def substituted(blocks):
    script = "\n".join(blocks)
    for text, instead, times, why in SUBSTITUTIONS:
        found = script.count(text)
        if found != times:
            sys.exit(
                f"quickstart: README.md's quick start has {text!r} {found} times, not {times}: "
                f"review the substitution in e2e/quickstart.py ({why})"
            )
        script = script.replace(text, instead)
    return script


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def node_ctr(env):
    # (the node's own ctr, built with its containerd: scripts/e2e-cluster.sh ctr)
    return [f"{ROOT}/scripts/e2e-cluster.sh", "ctr", "-n", "k8s.io", "images"]


def node_images(env):
    """The node's names for the images the walk runs but cannot pull from the Internet.

    The images an earlier walk pulled from the registry (127.0.0.1:PORT/quickstart-PID/...)
    are left on the node: removing them cannot give back what the pulls took. They are the
    shipped images, the same image IDs as the node's sexton:e2e and kin, and with containerd
    2.4.2 the CRI plugin no longer finds sexton:e2e once a walk pulled them (the kubelet sees
    ErrImageNeverPull while `ctr images ls` lists it; removing a pulled name does the same,
    and neither a new import nor a new tag brings it back). So the walk runs last on a node
    (scripts/stages/80-e2e.sh), and `scripts/e2e-cluster.sh down` removes it all."""
    ctr = node_ctr(env)
    run(ctr + ["tag", "--force", "docker.io/library/busybox:e2e", "docker.io/library/busybox:1.36"],
        stdout=subprocess.DEVNULL)


def main():
    readme = open(os.path.join(ROOT, "README.md")).read()
    script = substituted(quick_start(readme))
    if sys.argv[1:] == ["--print"]:
        print(script)
        return
    env = dict(os.environ)
    env.setdefault("SEXTON_E2E_STATE", "/tmp/sexton-e2e")
    found = shutil.which("kubectl-sexton", path=env["PATH"])
    if found:
        sys.exit(f"quickstart: {found} is on the PATH: it would hide a missing install step of the README")
    # (`up` imports the images again: not when e2e/run.sh has just brought the node up)
    node_up = subprocess.run([f"{ROOT}/scripts/e2e-cluster.sh", "status"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    up = run([f"{ROOT}/scripts/e2e-cluster.sh", "env" if node_up else "up"], capture_output=True, env=env).stdout
    kubeconfig = re.search(r"KUBECONFIG=(\S+)", up).group(1).strip("'\"")
    port = env.get("SEXTON_REGISTRY_PORT", "15000")
    run([f"{ROOT}/scripts/registry.sh", "up"], stdout=subprocess.DEVNULL, env=env)
    try:
        node_images(env)
        kubectl_dir = run([f"{ROOT}/scripts/testenv.sh", "kubectl-dir"], capture_output=True, env=env).stdout.strip()
        with tempfile.TemporaryDirectory(prefix="sexton-quickstart-") as tmp:
            bin_dir = os.path.join(tmp, "bin")
            os.mkdir(bin_dir)
            env.update(
                KUBECONFIG=kubeconfig,
                QUICKSTART_ROOT=ROOT,
                QUICKSTART_REGISTRY=f"127.0.0.1:{port}/quickstart-{os.getpid()}",
                QUICKSTART_BIN=bin_dir,
                PATH=f"{bin_dir}:{env['PATH']}:{kubectl_dir}",
            )
            # (before: what an interrupted walk left; the README creates the namespace)
            remove_walk_objects(env)
            remove_unowned_install(env)
            try:
                walk(script, env, tmp)
            finally:
                remove_walk_objects(env)
    finally:
        remove_node_names(env)


def remove_node_names(env):
    """The name busybox:1.36 given to the node's busybox:e2e, removed: left on the node,
    containerd names the image by its first name, and e2e/run.sh's scenarios 3 and 11, run
    again on this node, would read main's image as busybox:1.36."""
    subprocess.run(node_ctr(env) + ["rm", "docker.io/library/busybox:1.36"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def remove_walk_objects(env):
    """The README's Job of (a) and namespace of (b), gone (deletion awaited, bounded)."""
    for what in (["job", "report", "-n", "default"], ["namespace", "batch"]):
        subprocess.run(["kubectl", "delete", *what, "--ignore-not-found", "--timeout=120s"],
                       env=env, stdout=subprocess.DEVNULL, check=False)


def remove_unowned_install(env):
    """The README's cluster is one sexton was never installed on: every object of the chart
    that something else created on this control plane (e2e/run.sh and the cargo tests apply
    the CRD and the requester policy of deploy/, which is the chart rendered) is deleted
    first, or the chart's install refuses to adopt it ("exists and cannot be imported into
    the current release"). Deletion awaited, bounded; e2e/run.sh applies them again."""
    manifests = sorted(os.path.join(ROOT, "deploy", f) for f in os.listdir(os.path.join(ROOT, "deploy"))
                       if f.endswith(".yaml") and f != "kustomization.yaml")
    args = [a for m in manifests for a in ("-f", m)]
    subprocess.run(["kubectl", "delete", *args, "--ignore-not-found", "--timeout=120s"],
                   env=env, stdout=subprocess.DEVNULL, check=True)


def walk(script, env, tmp):
    path = os.path.join(tmp, "quickstart.sh")
    with open(path, "w") as f:
        # -x: the log shows each README command as it runs, substitutions made
        f.write("set -euxo pipefail\n" + script)
    print(f"quickstart: README.md's quick start, {script.count(chr(10))} lines", flush=True)
    done = subprocess.run(["bash", path], env=env, cwd=tmp, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"quickstart: FAIL: the quick start stopped (exit {done.returncode}) at the command above")
    # The walk's last Job: complete, as the README promises
    job = json.loads(run(["kubectl", "get", "-n", "batch", "job/report", "-o", "json"],
                         capture_output=True, env=env).stdout)
    conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
    if conditions.get("Complete") != "True":
        sys.exit(f"quickstart: FAIL: job batch/report is not Complete: {conditions}")
    print("quickstart: ok: the README's quick start ran in order and its Job completed")


if __name__ == "__main__":
    main()
