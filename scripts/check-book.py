#!/usr/bin/env python3
"""Checks the built documentation site (scripts/book.sh), with no network.

  check-book.py links BOOK-DIR REPO-ROOT   every internal link of every page resolves: a
                                           relative href names a file of the book, its
                                           #anchor an id in that page; a link into this
                                           repository on GitHub (blob|tree|edit/main/PATH)
                                           names a file or directory that exists here.
                                           Other external links are not fetched.
  check-book.py png FILE                   FILE is a screenshot of a styled page: not one
                                           colour, and the sidebar's background differs
                                           from the content's (the theme's CSS applied).
"""
import html.parser
import os
import re
import struct
import sys
import urllib.parse
import zlib

REPO_URL = re.compile(r"^https://github\.com/sexton-dev/sexton/(blob|tree|edit)/main/([^#?]*)")


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("id", "name"):
            if a.get(k) and (k == "id" or tag == "a"):
                self.ids.add(a[k])
        for k in ("href", "src"):
            if a.get(k) is not None and tag in ("a", "link", "script", "img"):
                self.links.append(a[k])


def links(book, repo):
    pages, errors, checked = {}, [], 0
    for d, _, files in os.walk(book):
        for f in files:
            if f.endswith(".html"):
                p = Page()
                p.feed(open(os.path.join(d, f), encoding="utf-8").read())
                pages[os.path.normpath(os.path.join(d, f))] = p
    if not pages:
        sys.exit(f"check-book: no HTML pages in {book}")
    for path, page in sorted(pages.items()):
        if os.path.basename(path) == "404.html":   # (absolute links under the site's root)
            continue
        for href in page.links:
            where = f"{os.path.relpath(path, book)}: {href}"
            m = REPO_URL.match(href)
            if m:
                kind, rel = m.groups()
                if kind == "edit":                 # (the theme's "suggest an edit" link)
                    continue
                if not os.path.exists(os.path.join(repo, urllib.parse.unquote(rel))):
                    errors.append(f"{where}: no {rel} in the repository")
                checked += 1
                continue
            u = urllib.parse.urlsplit(href)
            if u.scheme or u.netloc:
                continue
            target = path
            if u.path:
                target = os.path.normpath(os.path.join(os.path.dirname(path), urllib.parse.unquote(u.path)))
                if u.path.endswith("/") or os.path.isdir(target):
                    target = os.path.join(target, "index.html")
                if not os.path.isfile(target):
                    errors.append(f"{where}: no such file in the book")
                    continue
            if u.fragment and target.endswith(".html"):
                ids = pages[target].ids if target in pages else set()
                if urllib.parse.unquote(u.fragment) not in ids:
                    errors.append(f"{where}: no anchor #{u.fragment} in {os.path.relpath(target, book)}")
            checked += 1
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(f"check-book: {len(errors)} broken link(s) of {checked} checked")
    print(f"check-book: {checked} internal links and anchors in {len(pages)} pages resolve")


def pixels(png):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(png, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"check-book: {png} is not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6):
                sys.exit(f"check-book: {png}: colour type {colour} depth {depth} not handled")
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def png(path):
    width, height, rows = pixels(path)
    colours = {p for row in rows[::4] for p in row[::4]}
    if len(colours) < 8:
        sys.exit(f"check-book: {path}: {len(colours)} colour(s): the page rendered (nearly) empty")
    sidebar, content = rows[height - 10][10], rows[height - 10][width - 10]
    if sidebar == content:
        sys.exit(f"check-book: {path}: sidebar and content share the background {sidebar}: the theme's CSS did not apply")
    print(f"check-book: {path}: {width}x{height}, {len(colours)} colours sampled, sidebar {sidebar} beside content {content}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "links":
        links(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "png":
        png(sys.argv[2])
    else:
        sys.exit(__doc__)
