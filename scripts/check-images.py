#!/usr/bin/env python3
"""Checks that the images scripts/images.sh built are the ones the Dockerfile describes.

  check-images.py --dockerfile Dockerfile --images target/images --version V --revision R
                  NAME:TAG=STAGE ...

For each NAME:TAG (an OCI image layout target/images/NAME holding the tag) and the
Dockerfile's final stage STAGE (FROM a chain of stages that starts at scratch):
  - the tag is a multi-platform OCI index of exactly linux/amd64 and linux/arm64;
  - each platform's config says that platform and has the stage's ENTRYPOINT, CMD, USER,
    EXPOSE and LABELs (ARGs substituted: VERSION, REVISION as given; the Dockerfile's
    default VERSION must be the workspace's, so that a plain `docker build` labels it right);
  - its layers hold exactly the files the stage COPYs, each the binary of that platform in
    target/images/bin/linux-ARCH/ (named like the COPY's source: /sexton-slim -> sexton-slim),
    byte for byte, executable.
Prints the sizes per platform (compressed: what a node pulls; uncompressed: what it stores)
and exits 1 naming every difference.
"""
import argparse, gzip, hashlib, io, json, os, re, shlex, sys, tarfile

PLATFORMS = ("amd64", "arm64")


def logical_lines(text):
    """The Dockerfile's instructions: comments dropped, continuations joined."""
    out, cur = [], ""
    for line in text.splitlines():
        if not cur and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip():
            out.append(cur.strip())
        cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def substitute(s, args):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), ""), s)


def parse_dockerfile(text, build_args):
    """{stage: config}: a config is what its final image would have (the parent stage's,
    then its own instructions); COPY sources are kept as the build stage's paths."""
    global_args, stages, cur = {}, {}, None
    for line in logical_lines(text):
        instr, _, rest = line.partition(" ")
        instr, rest = instr.upper(), rest.strip()
        if instr == "ARG":
            name, eq, default = rest.partition("=")
            if cur is None:
                global_args[name] = build_args.get(name, default if eq else "")
            else:
                cur["args"][name] = build_args.get(name, global_args.get(name, default if eq else ""))
        elif instr == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.IGNORECASE)
            base, name = m.group(1), m.group(2)
            parent = stages.get(base)
            cur = {"base": base if parent is None else parent["base"], "args": {},
                   "entrypoint": None, "cmd": None, "user": "", "labels": {}, "ports": set(),
                   "copies": {}}
            if parent is not None:
                for k in ("entrypoint", "cmd", "user"):
                    cur[k] = parent[k]
                cur["labels"] = dict(parent["labels"]); cur["ports"] = set(parent["ports"])
                cur["copies"] = dict(parent["copies"])
            if name:
                stages[name] = cur
        elif cur is None:
            continue
        elif instr == "LABEL":
            for kv in shlex.split(rest):
                k, _, v = kv.partition("=")
                cur["labels"][k] = substitute(v, cur["args"])
        elif instr == "USER":
            cur["user"] = substitute(rest, cur["args"])
        elif instr in ("ENTRYPOINT", "CMD"):
            cur[instr.lower()] = json.loads(rest)
            if instr == "ENTRYPOINT":
                cur["cmd"] = None     # as Docker does: a new ENTRYPOINT resets CMD
        elif instr == "EXPOSE":
            cur["ports"] |= {p if "/" in p else p + "/tcp" for p in rest.split()}
        elif instr == "COPY":
            words = [w for w in shlex.split(rest) if not w.startswith("--")]
            *srcs, dest = words
            for s in srcs:
                cur["copies"][dest.lstrip("/")] = os.path.basename(s)
    return global_args, stages


class Layout:
    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, "index.json")) as f:
            self.index = json.load(f)

    def blob(self, digest):
        algo, hexd = digest.split(":", 1)
        with open(os.path.join(self.path, "blobs", algo, hexd), "rb") as f:
            data = f.read()
        if hashlib.new(algo, data).hexdigest() != hexd:
            raise ValueError(f"{self.path}: blob {digest} does not match its digest")
        return data

    def json(self, digest):
        return json.loads(self.blob(digest))

    def ref(self, tag):
        for d in self.index.get("manifests", []):
            if d.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
                return d
        return None


def layer_files(data, media_type):
    """({path: (mode, sha256)} of a layer's regular files, other entries as (type, None);
    the layer's uncompressed size)."""
    if media_type.endswith("+gzip") or media_type.endswith(".gzip"):
        data = gzip.decompress(data)
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        for m in t.getmembers():
            name = m.name.lstrip("./")
            if m.isfile():
                files[name] = (m.mode & 0o777, hashlib.sha256(t.extractfile(m).read()).hexdigest())
            elif not (m.isdir() and name == ""):
                files[name] = (m.type, None)
    return files, len(data)


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_image(images, ref, stage, want, errors, sizes):
    name, tag = ref.rsplit(":", 1)
    layout = Layout(os.path.join(images, name))
    top = layout.ref(tag)
    if top is None:
        errors.append(f"{ref}: no tag {tag} in {layout.path}/index.json"); return
    if top["mediaType"] != "application/vnd.oci.image.index.v1+json":
        errors.append(f"{ref}: a {top['mediaType']}, not a multi-platform OCI index"); return
    index = layout.json(top["digest"])
    got_platforms = sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in index["manifests"])
    if got_platforms != sorted(f"linux/{p}" for p in PLATFORMS):
        errors.append(f"{ref}: platforms {got_platforms}, want linux/amd64 and linux/arm64")
    for m in index["manifests"]:
        arch = m["platform"]["architecture"]
        where = f"{ref} (linux/{arch})"
        manifest = layout.json(m["digest"])
        config = layout.json(manifest["config"]["digest"])
        c = config.get("config", {})
        if (config.get("os"), config.get("architecture")) != ("linux", arch):
            errors.append(f"{where}: the config says {config.get('os')}/{config.get('architecture')}")
        got = {"entrypoint": c.get("Entrypoint"), "cmd": c.get("Cmd"), "user": c.get("User", ""),
               "labels": c.get("Labels") or {}, "ports": set(c.get("ExposedPorts") or {})}
        for k, v in got.items():
            if k == "labels":
                for l in sorted(set(v) | set(want[k])):
                    if v.get(l) != want[k].get(l):
                        errors.append(f"{where}: label {l} is {v.get(l)!r}, the Dockerfile's stage {stage} says {want[k].get(l)!r}")
            elif v != want[k]:
                errors.append(f"{where}: {k} is {v!r}, the Dockerfile's stage {stage} says {want[k]!r}")
        files, compressed, uncompressed = {}, manifest["config"]["size"] + m["size"], 0
        for l in manifest["layers"]:
            data = layout.blob(l["digest"])
            compressed += l["size"]
            lf, size = layer_files(data, l["mediaType"])
            uncompressed += size
            files.update(lf)
        want_files = {}
        for dest, src in want["copies"].items():
            path = os.path.join(images, "bin", f"linux-{arch}", src)
            want_files[dest] = (0o755, sha256_file(path)) if os.path.exists(path) else ("missing", path)
        if files != want_files:
            errors.append(f"{where}: files {fmt(files)}, want {fmt(want_files)} (COPY of stage {stage}, binaries of bin/linux-{arch})")
        sizes.append((ref, arch, compressed, uncompressed, m["digest"]))
    return top["digest"]


def fmt(files):
    return ", ".join(f"/{k} ({v[0] if isinstance(v[0], str) else oct(v[0])}, {str(v[1])[:12]})" for k, v in sorted(files.items()))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dockerfile", required=True); p.add_argument("--images", required=True)
    p.add_argument("--version", required=True); p.add_argument("--revision", required=True)
    p.add_argument("pairs", nargs="+", help="NAME:TAG=STAGE")
    a = p.parse_args()
    with open(a.dockerfile) as f:
        text = f.read()
    defaults, _ = parse_dockerfile(text, {})
    _, stages = parse_dockerfile(text, {"VERSION": a.version, "REVISION": a.revision})
    errors, sizes = [], []
    if defaults.get("VERSION") != a.version:
        errors.append(f"{a.dockerfile}: ARG VERSION={defaults.get('VERSION')}, the workspace's version is {a.version}")
    for pair in a.pairs:
        ref, stage = pair.split("=", 1)
        want = stages.get(stage)
        if want is None:
            errors.append(f"{a.dockerfile}: no stage {stage} (for {ref})"); continue
        if want["base"] != "scratch":
            errors.append(f"{a.dockerfile}: stage {stage} is not FROM scratch"); continue
        try:
            digest = check_image(a.images, ref, stage, want, errors, sizes)
        except (OSError, ValueError, KeyError) as e:
            errors.append(f"{ref}: {e}"); continue
        if digest:
            print(f"{ref} {digest} = Dockerfile stage {stage}")
    for ref, arch, comp, unc, digest in sizes:
        print(f"  {ref:32} linux/{arch:6} {comp / 1e6:6.2f} MB compressed {unc / 1e6:6.2f} MB uncompressed  {digest[:19]}")
    for e in errors:
        print(f"check-images: {e}", file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
