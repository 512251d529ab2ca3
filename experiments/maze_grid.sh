#!/usr/bin/env bash
# Claim (g)'s runs (book/claims.md, "Stitching on a maze" and "The protocol", both written before these runs):
# every method on OGBench's pointmaze-medium stitch tasks 1, 2, 5 and the navigate control (task 1), at one budget,
# into results/maze-100k/. Two lanes, one per core; each command skips finished runs and runs another lane holds, and
# resumes interrupted ones from their checkpoints, so a lane can be stopped at any time and started again:
#
#     bash experiments/maze_grid.sh 0      # lane 0, pinned to core 0, one torch thread
#     bash experiments/maze_grid.sh 1      # lane 1, pinned to core 1
#     bash experiments/maze_grid.sh list   # print both lanes' commands
#
# The protocol, as these runs apply it:
# - budget: 100,000 gradient steps for every method, evaluated every 5,000 on 50 episodes (OGBench's count); the
#   statistic of record is the mean of the last 5 evaluations (80,000-100,000 steps); float32 everywhere (CQL's
#   Lagrange gap is biased by bfloat16 rounding, results/stitching-precision; one precision keeps the CPUs alike);
# - settings fixed without the judged tasks: IQL takes OGBench's maze agent (LayerNorm, DDPG+BC at OGBench's alpha,
#   0.003 there = 0.0015 here, its clipped actor; expectile 0.9, beta 10 from the IQL paper's AntMaze), CQL CORL's
#   AntMaze settings and BCQ its paper's defaults (runs.DOMAIN_CONFIG); the `cpu` scale's network sizes for all;
# - the imitation controls: path-BC (the pieces from the task's start cell to its goal: navigate only, none exist on
#   stitch), goal-BC (every piece that ends at the goal), BC and 10%BC, five seeds as one batch each;
# - seeds 0-2 of every method first (a provisional verdict), then seeds 3-4 (the verdict).
# - TD3+BC (minirl/td3bc.py, added 2026-12-01 23:20 after the grid had started; not one of claim (g)'s methods, reported
#   beside them) with its paper's MuJoCo defaults (alpha 2.5, states normalised, rewards as they are), seeds 0-2
#   after IQL's and seeds 3-4 last.
# Measured here before the grid (2026-12-01, AMD EPYC with AVX-512 BF16, float32, one thread, 200-1,000 steps with
# setup): CQL 14.5, BCQ 16.5, IQL 61 updates/s, no faster with seeds batched; so a CQL seed is about 1.7 h, a BCQ seed
# 1.5 h, an IQL seed 0.5 h, with their evaluations. Seeds 0-2: about 45 CPU hours; seeds 3-4: about 30 more.
set -euo pipefail
set -f
cd "$(dirname "$0")/.."

RUN="python experiments/run_suite.py --scale cpu --precision float32 --threads 1 --tag maze-100k --steps 100000 --eval-every 5000 --eval-episodes 50"
IQL="$RUN --algos iql --set layer_norm=true extraction=ddpg_bc actor=deterministic alpha=0.0015 actor_squash=clip"
NAVIGATE=pointmaze-medium-navigate-singletask-task1
DATASETS=(pointmaze-medium-stitch-singletask-task1 pointmaze-medium-stitch-singletask-task2
          pointmaze-medium-stitch-singletask-task5 "$NAVIGATE")

# 2026-12-01 23:40: goal-BC on stitch task 1 reached the goal in 92-100% of episodes at every evaluation to 25,000
# steps (five seeds), against the prediction written above; so goal-BC runs on every dataset first (stitch tasks 2 and
# 5 decide whether it is task 1's geometry), then BC and 10%BC. Nothing else changed.
IMITATION=(
  "$RUN --algos path-bc --datasets $NAVIGATE --seeds 0 1 2 3 4 --batch-seeds"
  "$RUN --algos goal-bc --datasets ${DATASETS[*]} --seeds 0 1 2 3 4 --batch-seeds"
  "$RUN --algos bc 10%bc --datasets ${DATASETS[*]} --seeds 0 1 2 3 4 --batch-seeds"
)
iql_seeds() { local s d; for s in "$@"; do for d in "${DATASETS[@]}"; do echo "$IQL --datasets $d --seeds $s"; done; done; }
deep_seeds() {
  local s d
  for s in "$@"; do for d in "${DATASETS[@]}"; do
    echo "$RUN --algos cql --datasets $d --seeds $s"
    echo "$RUN --algos bcq --datasets $d --seeds $s"
  done; done
}
td3bc_seeds() { local s; for s in "$@"; do echo "$RUN --algos td3+bc --datasets ${DATASETS[*]} --seeds $s"; done; }
mapfile -t IQL_FIRST < <(iql_seeds 0 1 2)
mapfile -t TD3BC_FIRST < <(td3bc_seeds 0 1 2)
mapfile -t TD3BC_REST < <(td3bc_seeds 3 4)
mapfile -t DEEP_FIRST < <(deep_seeds 0 1 2)
mapfile -t IQL_REST < <(iql_seeds 3 4)
mapfile -t DEEP_REST < <(deep_seeds 3 4)
mapfile -t DEEP_FIRST_REVERSED < <(printf '%s\n' "${DEEP_FIRST[@]}" | tac)

# lane 0 starts with the controls and IQL, then takes CQL and BCQ from the end of lane 1's list; lane 1 starts with
# CQL and BCQ; both then go on to seeds 3-4. A run one lane holds the other skips (run_suite's lock).
lane0=("${IMITATION[@]}" "${IQL_FIRST[@]}" "${TD3BC_FIRST[@]}" "${DEEP_FIRST_REVERSED[@]}" "${IQL_REST[@]}"
       "${DEEP_REST[@]}" "${TD3BC_REST[@]}")
lane1=("${DEEP_FIRST[@]}" "${IMITATION[@]}" "${IQL_FIRST[@]}" "${TD3BC_FIRST[@]}" "${DEEP_REST[@]}" "${IQL_REST[@]}"
       "${TD3BC_REST[@]}")

case "${1:-}" in
  0) lane=("${lane0[@]}") ;;
  1) lane=("${lane1[@]}") ;;
  list) printf 'lane 0: %s\n' "${lane0[@]}"; printf 'lane 1: %s\n' "${lane1[@]}"; exit 0 ;;
  *) echo "usage: bash experiments/maze_grid.sh 0|1|list (the lane, run pinned to that core)" >&2; exit 2 ;;
esac
# shellcheck source=experiments/lanes.sh
. experiments/lanes.sh
run_lane "$1" "${lane[@]}"
