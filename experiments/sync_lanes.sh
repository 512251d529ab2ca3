#!/usr/bin/env bash
# Copy the finished runs of a results folder from a lanes worktree (where the grid trains on code frozen at its
# start, apart from the checkout being edited) into this checkout, without checkpoints or locks, then re-make the
# folder's table:   bash experiments/sync_lanes.sh /work/lanes maze-100k
set -euo pipefail
cd "$(dirname "$0")/.."
src="$1/results/$2"
[ -d "$src" ] || { echo "sync_lanes: no folder $src" >&2; exit 2; }
find "$src" -name result.json | while read -r f; do
  run=$(dirname "$f"); rel=${run#"$1"/}
  mkdir -p "$rel"
  for x in result.json eval.csv log.jsonl config.json; do [ -f "$run/$x" ] && cp "$run/$x" "$rel/$x"; done
  [ -f "$run/agent.pt" ] && cp "$run/agent.pt" "$rel/agent.pt"   # ignored by git; kept for the rollouts
done
[ -f "$src/summary.csv" ] && cp "$src/summary.csv" "results/$2/summary.csv"
python experiments/stitching_table.py --root "results/$2" --write >/dev/null
echo "results/$2: $(find "results/$2" -name result.json | wc -l) finished runs"
