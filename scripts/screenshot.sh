#!/usr/bin/env bash
# Headless screenshots of the built book, to look at before committing book changes: do the pages (and their math)
# render offline, are the buttons there, does the layout hold?
#   jupyter-book build -W -n --keep-going . && bash scripts/screenshot.sh   -> _build/screenshots/{intro,cql}.png
# Needs Chromium (Debian: apt-get update && apt-get install -y chromium).  Pages: pass them as arguments, e.g.
#   bash scripts/screenshot.sh book/offline_rl notebooks/01_offline_rl
# Another build (e.g. one with a repository named, whose notebook pages carry the Colab/Binder buttons):
#   BOOK_HTML=/tmp/book/_build/html bash scripts/screenshot.sh notebooks/03_cql
# A whole long page at once (the window is the page; crop the PNG to look at it in parts):
#   WINDOW=1400,16000 bash scripts/screenshot.sh notebooks/04_iql
# The PNGs stay in _build/ (ignored by git): look at them, do not commit them.
set -euo pipefail
cd "$(dirname "$0")/.."
html=$(realpath "${BOOK_HTML:-_build/html}")
out="$PWD/_build/screenshots"
[ -d "$html" ] || { echo "no $html: build the book first (jupyter-book build -W -n --keep-going .)" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "Chromium not found: apt-get update && apt-get install -y chromium" >&2; exit 1; }
mkdir -p "$out"
pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=(book/intro book/cql)
for page in "${pages[@]}"; do
  [ -f "$html/$page.html" ] || { echo "no page $html/$page.html (expected e.g. book/intro)" >&2; exit 1; }
  profile=$(mktemp -d)
  png="$out/$(basename "$page").png"
  # --virtual-time-budget lets MathJax finish typesetting before the capture; no network is needed or used
  "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$profile" --virtual-time-budget=5000 --window-size=${WINDOW:-1400,2000} \
    --screenshot="$png" "file://$html/$page.html" >/dev/null 2>&1
  rm -rf "$profile"
  [ -s "$png" ] || { echo "Chromium wrote no screenshot for $page" >&2; exit 1; }
  echo "$png"
done
