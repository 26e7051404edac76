#!/usr/bin/env python3
"""Checks the Markdown a benchmark produced, never its figures (figures are not stable on
shared machines): it carries a stamp (bench/lib/stamp.py), it has at least the tables it should,
and every table is whole: a header, at least one row, the header's number of cells in every
row, and no cell of a row empty. scripts/test.sh runs it after each quick benchmark.

  check.py FILE.md --tables N [--stamps M]
  check.py --self-test        it flags each kind of defect (scripts/test.sh, lint stage)

A cell that holds nothing, `nan` or `None` is empty (a value the harness failed to get);
a harness that has nothing to say in a cell writes "–".
"""
import argparse
import re
import sys

EMPTY = {"", "nan", "None", "NaN"}
STAMP = re.compile(r"^Measured at `[0-9a-f]{7,}(\+changes)?` on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: "
                   r".+, \d+ cores, .+\*\*(quiet|loaded) machine\*\*")


def cells(row):
    row = row.strip()
    return [c.strip() for c in row[1:-1].split("|")] if row.endswith("|") else None


def tables(lines):
    """Each table as (first line number, header cells, rows of cells)."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i + 1]):
            start, header, rows = i + 1, cells(lines[i]), []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            out.append((start, header, rows))
        else:
            i += 1
    return out


def check(text, want_tables, want_stamps):
    problems = []
    lines = text.splitlines()
    stamps = sum(1 for line in lines if STAMP.match(line))
    if stamps < want_stamps:
        problems.append(f"{stamps} stamp line(s), {want_stamps} wanted (bench/lib/stamp.py line)")
    found = tables(lines)
    if len(found) < want_tables:
        problems.append(f"{len(found)} table(s), {want_tables} wanted")
    for start, header, rows in found:
        if not rows:
            problems.append(f"line {start}: a table without rows")
        for n, row in enumerate(rows, start + 2):
            if row is None or len(row) != len(header):
                problems.append(f"line {n}: {0 if row is None else len(row)} cells, the header has {len(header)}")
                continue
            for col, cell in enumerate(row):
                if cell in EMPTY:
                    problems.append(f"line {n}: the cell under {header[col] or 'column ' + str(col + 1)!r} is empty ({cell!r})")
    return problems


def self_test():
    """The checker finds what it is for: a whole, stamped file passes; an empty cell, a
    missing table, a short row and a missing stamp each fail (scripts/test.sh's lint stage)."""
    stamp = ("Measured at `5a38a77` on 2026-11-27 05:00:46 UTC: AMD EPYC, 2 cores, Linux 6.18; "
             "**loaded machine** (1-minute load average 23.77 before, 23.77 after).")
    table = "| | a | b |\n|---|---:|---:|\n| x | 1 | 2 |\n| y | 3 | – |"
    good = f"{stamp}\n\n{table}\n"
    cases = [
        ("whole", good, 1, []),
        ("empty cell", good.replace("| 3 |", "|  |"), 1, ["empty"]),
        ("nan cell", good.replace("| 3 |", "| nan |"), 1, ["empty"]),
        ("missing table", good, 2, ["1 table(s), 2 wanted"]),
        ("short row", good.replace("| x | 1 | 2 |", "| x | 1 |"), 1, ["cells, the header has 3"]),
        ("missing stamp", table + "\n", 1, ["stamp"]),
        ("rows missing", f"{stamp}\n\n| | a |\n|---|---:|\n", 1, ["without rows"]),
    ]
    for name, text, tables, want in cases:
        got = check(text, tables, 1)
        ok = (not got) if not want else all(any(w in g for g in got) for w in want)
        if not ok:
            sys.exit(f"check.py --self-test: {name}: found {got}, wanted {want or 'nothing'}")
    print(f"check.py --self-test: {len(cases)} cases")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--tables", type=int, required=True, help="at least this many tables")
    p.add_argument("--stamps", type=int, default=1, help="at least this many stamp lines")
    a = p.parse_args()
    try:
        text = open(a.file).read()
    except OSError as e:
        sys.exit(f"check.py: {a.file}: {e}")
    problems = check(text, a.tables, a.stamps)
    for problem in problems:
        print(f"check.py: {a.file}: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check.py: {a.file}: stamped, {len(tables(text.splitlines()))} tables, every cell filled")


if __name__ == "__main__":
    main()
