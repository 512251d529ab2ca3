#!/usr/bin/env bash
# Headless screenshots of the built book, to check by eye that pages (and their math) render offline.
#   jupyter-book build . && bash scripts/screenshot.sh        -> _build/screenshots/{intro,offline_rl}.png
# Needs Chromium (Debian: apt-get install -y chromium).  Page list: pass pages as arguments, e.g.
#   bash scripts/screenshot.sh book/offline_rl notebooks/01_offline_rl
set -euo pipefail
cd "$(dirname "$0")/.."
html="$PWD/_build/html"
out="$PWD/_build/screenshots"
[ -d "$html" ] || { echo "no $html: build the book first (jupyter-book build .)" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "Chromium not found: apt-get install -y chromium" >&2; exit 1; }
mkdir -p "$out"
pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=(book/intro book/offline_rl)
for page in "${pages[@]}"; do
  profile=$(mktemp -d)
  png="$out/$(basename "$page").png"
  # --virtual-time-budget lets MathJax finish typesetting before the capture
  "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$profile" --virtual-time-budget=5000 --window-size=1280,2000 \
    --screenshot="$png" "file://$html/$page.html" >/dev/null 2>&1
  rm -rf "$profile"
  echo "$png"
done
