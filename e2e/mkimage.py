#!/usr/bin/env python3
"""Builds a single-layer image as a Docker archive (what `ctr images import` reads) from
files on this machine, because no image can be pulled here. Test fixtures only: the test
registries' images (scripts/registry.sh) and e2e scenario 7's; the images that ship are
built by scripts/images.sh (buildah), and the e2e node's fixtures with buildah too.

  mkimage.py OUT.tar NAME:TAG [--entrypoint JSON] [--cmd JSON] [--user U] [--env K=V]...
             [--arch ARCH [--variant V]] SRC:DEST[:MODE] ...
             (copy file SRC to DEST in the image; DEST/ makes a dir; ARCH, default amd64, is
             what the config says: the images of a multi-platform index, scripts/registry.sh)
"""
import argparse, hashlib, io, json, os, tarfile, time

p = argparse.ArgumentParser()
p.add_argument("out"); p.add_argument("name")
p.add_argument("--entrypoint", default="null"); p.add_argument("--cmd", default="null")
p.add_argument("--user", default=""); p.add_argument("--env", action="append", default=[])
p.add_argument("--symlink", action="append", default=[], help="LINK=TARGET")
p.add_argument("--arch", default="amd64"); p.add_argument("--variant", default="")
p.add_argument("files", nargs="*")
a = p.parse_intermixed_args()

layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as t:
    dirs = set()
    def mkdirs(path):
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in dirs:
                dirs.add(d)
                ti = tarfile.TarInfo(d); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; ti.mtime = 0
                t.addfile(ti)
    for d in ("tmp", "etc", "proc", "sys", "dev"):
        mkdirs(d + "/x")
    for f in a.files:
        src, dest, *mode = f.split(":")
        mkdirs(dest)
        data = open(src, "rb").read()
        ti = tarfile.TarInfo(dest.lstrip("/")); ti.size = len(data); ti.mtime = 0
        ti.mode = int(mode[0], 8) if mode else 0o755
        t.addfile(ti, io.BytesIO(data))
    for s in a.symlink:
        link, target = s.split("=", 1)
        mkdirs(link)
        ti = tarfile.TarInfo(link.lstrip("/")); ti.type = tarfile.SYMTYPE; ti.linkname = target; ti.mtime = 0
        t.addfile(ti)
layer_bytes = layer.getvalue()
diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
config = {
    "architecture": a.arch, **({"variant": a.variant} if a.variant else {}),
    "os": "linux", "created": "1970-01-01T00:00:00Z",
    "config": {"Entrypoint": json.loads(a.entrypoint), "Cmd": json.loads(a.cmd),
               "Env": ["PATH=/usr/local/bin:/usr/bin:/bin:/sbin"] + a.env,
               **({"User": a.user} if a.user else {})},
    "rootfs": {"type": "layers", "diff_ids": [diff_id]},
}
config_bytes = json.dumps(config).encode()
config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
manifest = [{"Config": config_name, "RepoTags": [a.name], "Layers": ["layer.tar"]}]
with tarfile.open(a.out, "w") as out:
    for name, data in (("layer.tar", layer_bytes), (config_name, config_bytes),
                       ("manifest.json", json.dumps(manifest).encode())):
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mtime = int(time.time())
        out.addfile(ti, io.BytesIO(data))
