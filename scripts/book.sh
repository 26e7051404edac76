#!/usr/bin/env bash
# The documentation site: builds docs/ with mdBook into target/book, checks every internal
# link and anchor (scripts/check-book.py, no network), and opens one page in headless
# Chromium, whose screenshot must show the theme (a broken build or theme fails here).
#
#   scripts/book.sh           build and check (the lint stage of scripts/test.sh)
#   scripts/book.sh build     only build (then open target/book/index.html)
#
# mdbook comes from scripts/tools.sh (built once from crates.io, cached); chromium from the
# Debian package (scripts/test.sh installs it). Seconds, not minutes (CONTRIBUTING.md, where
# a cold run's time goes); chromium's first start after its install is the slow part.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck disable=SC2034  # (read by lib.sh's log and die)
LIB_NAME=book

BOOK=target/book
MDBOOK=${MDBOOK:-$(scripts/tools.sh mdbook)}
rm -rf "$BOOK"
"$MDBOOK" build docs >/dev/null 2>"$BOOK.log" || { cat "$BOOK.log" >&2; die "mdbook build docs failed"; }
# mdBook reports a missing include or a bad SUMMARY entry as a warning, and builds anyway
if grep -E 'WARN|ERROR' "$BOOK.log" >&2; then die "mdbook warned (above)"; fi
[ "${1:-}" != build ] || exit 0

python3 scripts/check-book.py links "$BOOK" .

command -v chromium >/dev/null || die "chromium is needed for the screenshot (apt-get install chromium)"
shot=$(mktemp -d "${TMPDIR:-/tmp}/sexton-book.XXXXXX")
trap 'rm -rf "$shot"' EXIT
# (--no-sandbox: CI runs as root; --user-data-dir: a profile of its own, removed after)
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$shot/profile" --window-size=1280,640 --screenshot="$shot/page.png" \
  "file://$PWD/$BOOK/strategies.html" >"$shot/log" 2>&1 \
  || { cat "$shot/log" >&2; die "chromium could not render $BOOK/strategies.html"; }
python3 scripts/check-book.py png "$shot/page.png"
