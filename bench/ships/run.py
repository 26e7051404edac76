#!/usr/bin/env python3
"""What ships: the sizes of the binaries and images that scripts/images.sh built (run it
first), stamped (bench/lib/stamp.py), into target/bench/ships.json and target/bench/ships.md,
and into BENCHMARKS.md between <!-- ships:start --> and <!-- ships:end --> (the docs take
their sizes from there: crates/kubectl-sexton/tests/docs.rs).

  bench/ships/run.py               measure target/images and rewrite the section
  bench/ships/run.py --no-update   BENCHMARKS.md left alone
  bench/ships/run.py --images DIR  the images of another work tree (DIR: its target/images); the
                               stamp names that tree's commit

Compressed: what a node pulls for one platform (the gzip layer, the config and the
manifest); uncompressed: the layer as the node stores it (the tar).
"""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))  # (bench/lib)
import section  # noqa: E402  (bench/lib/section.py)
import stamp  # noqa: E402  (bench/lib/stamp.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGES = os.path.join(ROOT, "target", "images")  # (--images DIR replaces it)
ARCHES = ["amd64", "arm64"]
BINARIES = [
    ("sexton", "`sexton` (with the API client)"),
    ("sexton-slim", "`sexton` slim (`--no-default-features`)"),
    ("kubectl-sexton", "`kubectl-sexton`"),
]
# (layout, tag, row title)
LAYOUTS = [
    ("sexton", "{v}", "`sexton:{v}`"),
    ("sexton", "{v}-slim", "`sexton:{v}-slim`"),
    ("sexton-quick-exit", "{v}", "`sexton-quick-exit:{v}`"),
    ("kubectl-sexton", "{v}", "`kubectl-sexton:{v}`"),
]


def die(msg):
    sys.exit(f"bench/ships/run.py: {msg} (run scripts/images.sh first)")


def blob(layout, digest):
    return os.path.join(IMAGES, layout, "blobs", *digest.split(":"))


def read_json(layout, digest):
    with open(blob(layout, digest)) as f:
        return json.load(f)


def image_sizes(layout, tag):
    """{arch: (compressed bytes, uncompressed bytes)} of the image layout/tag."""
    try:
        index = json.load(open(os.path.join(IMAGES, layout, "index.json")))
    except OSError as e:
        die(f"{layout}: {e}")
    ref = next((m for m in index["manifests"]
                if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag), None)
    if ref is None:
        die(f"{layout} has no tag {tag}")
    out = {}
    for m in read_json(layout, ref["digest"])["manifests"]:
        arch = m["platform"]["architecture"]
        manifest = read_json(layout, m["digest"])
        compressed = m["size"] + manifest["config"]["size"] + sum(x["size"] for x in manifest["layers"])
        uncompressed = 0
        for x in manifest["layers"]:
            with gzip.open(blob(layout, x["digest"])) as g:
                while chunk := g.read(1 << 20):
                    uncompressed += len(chunk)
        out[arch] = (compressed, uncompressed)
    return out


def version():
    for line in open(os.path.join(ROOT, "Cargo.toml")):
        if line.startswith("version = "):
            return line.split('"')[1]
    die("no version in Cargo.toml")


def measure():
    v = version()
    binaries = {}
    for name, _ in BINARIES:
        for arch in ARCHES:
            path = os.path.join(IMAGES, "bin", f"linux-{arch}", name)
            if not os.path.exists(path):
                die(f"no {path}")
            binaries.setdefault(name, {})[arch] = os.path.getsize(path)
    images = {}
    for layout, tag, _ in LAYOUTS:
        images[f"{layout}:{tag.format(v=v)}"] = image_sizes(layout, tag.format(v=v))
    return {"version": v, "binaries": binaries, "images": images}


def markdown(r):
    v = r["version"]
    lines = [stamp.line(r["stamp"]), "",
             "| binary | linux/amd64 (bytes) | linux/arm64 (bytes) |", "|---|---:|---:|"]
    for name, title in BINARIES:
        lines.append(f"| {title} | " + " | ".join(f"{r['binaries'][name][a]:,}" for a in ARCHES) + " |")
    lines += ["", "| image | linux/amd64 compressed / uncompressed | linux/arm64 compressed / uncompressed |",
              "|---|---:|---:|"]
    for layout, tag, title in LAYOUTS:
        sizes = r["images"][f"{layout}:{tag.format(v=v)}"]
        lines.append(f"| {title.format(v=v)} | " + " | ".join(
            f"{sizes[a][0] / 1e6:.2f} / {sizes[a][1] / 1e6:.2f} MB" for a in ARCHES) + " |")
    return "\n".join(lines) + "\n"


def main():
    global IMAGES
    args, update, tree = sys.argv[1:], True, ROOT
    while args:
        if args[0] == "--no-update":
            update, args = False, args[1:]
        elif args[0] == "--images" and len(args) > 1:
            IMAGES = os.path.abspath(args[1])
            tree, args = os.path.dirname(os.path.dirname(IMAGES)), args[2:]
        else:
            sys.exit(__doc__)
    out = os.path.join(ROOT, "target", "bench")
    os.makedirs(out, exist_ok=True)
    began = stamp.begin(tree)
    r = measure()
    r["stamp"] = stamp.end(began)
    with open(os.path.join(out, "ships.json"), "w") as f:
        json.dump(r, f, indent=2)
    md = markdown(r)
    with open(os.path.join(out, "ships.md"), "w") as f:
        f.write(md)
    print(md, end="")
    if update:
        section.write(os.path.join(ROOT, "BENCHMARKS.md"), "ships", md)
        print("bench/ships/run.py: BENCHMARKS.md updated (What ships)", file=sys.stderr)


if __name__ == "__main__":
    main()
