#!/usr/bin/env python3
"""BENCHMARKS.md's generated sections: a benchmark rewrites only the text between its
markers, `<!-- NAME:start -->` and `<!-- NAME:end -->`, and reads the file just before it
writes (other benchmarks and people edit other sections meanwhile). A file without the
markers is an error: the section was renamed or removed, and appending would hide that.

  section.py NAME FILE [DOC]   FILE's text into DOC's section NAME (DOC: BENCHMARKS.md)
"""
import sys


def put(doc, name, body):
    """`doc` with the section `name` holding `body` (surrounding blank lines dropped)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in doc or end not in doc:
        raise SystemExit(f"section.py: no {start} ... {end} markers")
    head, rest = doc.split(start, 1)
    _, tail = rest.split(end, 1)
    return head + start + "\n" + body.strip("\n") + "\n" + end + tail


def write(path, name, body):
    """The section `name` of the file `path` rewritten to hold `body`."""
    with open(path) as f:
        doc = f.read()
    doc = put(doc, name, body)
    with open(path, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    name, source = sys.argv[1], sys.argv[2]
    doc = sys.argv[3] if len(sys.argv) == 4 else "BENCHMARKS.md"
    with open(source) as f:
        write(doc, name, f.read())
