#!/usr/bin/env bash
# TD3+BC (minirl/td3bc.py) on the four Hopper tiers at the budget of record (the `cpu` scale: 50,000 gradient steps,
# evaluated every 5,000 on 10 episodes), five seeds as one batch per tier, into results/record beside the other
# methods (book/comparison.md). Its paper's MuJoCo defaults (alpha 2.5, d = 2, sigma 0.2, c = 0.5, states normalised,
# rewards as they are), fixed before the runs; the statistic of record is the mean of the last 5 evaluations.
# One lane per core; a command skips finished runs and resumes interrupted ones:
#
#     bash experiments/td3bc.sh 0     # hopper-medium-replay and hopper-medium-expert, core 0
#     bash experiments/td3bc.sh 1     # hopper-medium and hopper-expert, core 1
# The maze's TD3+BC runs are in experiments/maze_grid.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SUITE="python experiments/run_suite.py --scale cpu --precision auto --threads 1 --tag record --algos td3+bc --seeds 0 1 2 3 4 --batch-seeds"
case "${1:-}" in
  0) lane=("$SUITE --datasets hopper-medium-replay hopper-medium-expert") ;;
  1) lane=("$SUITE --datasets hopper-medium hopper-expert") ;;
  *) echo "usage: bash experiments/td3bc.sh 0|1 (the lane, run pinned to that core)" >&2; exit 2 ;;
esac
# shellcheck source=experiments/lanes.sh
. experiments/lanes.sh
run_lane "$1" "${lane[@]}"
