"""experiments/stitching_table.py: the stitching grid's table of means and differences with intervals."""
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "experiments"))
import stitching_table  # noqa: E402


def fake_run(root, method, dataset, seed, values, key="score_mean", finished=True, precision="float32"):
    run = root / method / dataset / f"s{seed}"
    run.mkdir(parents=True)
    rows = "".join(f"{5000 * (i + 1)},{v}\n" for i, v in enumerate(values))
    (run / "eval.csv").write_text(f"step,{key}\n{rows}")
    if finished:
        (run / "result.json").write_text(json.dumps({"seed": seed} | ({"precision": precision} if precision else {})))


def test_the_table_has_final_and_last_five_and_the_differences_with_their_verdicts(tmp_path):
    for seed in range(3):
        fake_run(tmp_path, "bc", "hopper-full-replay", seed, [50, 50, 50, 50, 50, 60 + seed])
        fake_run(tmp_path, "10%bc", "hopper-full-replay", seed, [100] * 5 + [100 + seed])
        fake_run(tmp_path, "iql", "hopper-full-replay", seed, [90] * 5 + [110 + seed])
        fake_run(tmp_path, "iql", "pointmaze-medium-stitch-singletask-task1", seed, [0.0, 0.0, 0.0, 0.0, 1.0],
                 key="success_rate")
    fake_run(tmp_path, "cql", "hopper-full-replay", 0, [1.0] * 6, finished=False)  # still training: left out
    table, running = stitching_table.collect(tmp_path)
    assert running == 1 and set(table) == {"hopper-full-replay", "pointmaze-medium-stitch-singletask-task1"}
    assert table["hopper-full-replay"]["iql"][1][:2] == pytest.approx((111.0, (90 * 4 + 111) / 5))
    assert table["pointmaze-medium-stitch-singletask-task1"]["iql"][0] == (100.0, 20.0, "float32")  # success in %
    text = stitching_table.render(table, running)
    iql = next(line for line in text.splitlines() if line.startswith("| hopper-full-replay | IQL |"))
    assert "| 3 | float32 | 111.0 [110.0, 112.0] |" in iql
    assert "+50.0 [" in iql and "above" in iql          # minus BC (61 on average)
    assert "+10.0 [+8.7, +11.3] above" in iql              # minus 10%BC at the final evaluation
    assert "below" in iql.split("|")[-2]                  # over the last five evaluations IQL is below 10%BC
    assert "Runs not finished (training, or stopped with a checkpoint), left out: 1." in text


def test_one_seed_says_so_and_a_difference_needs_two(tmp_path):
    fake_run(tmp_path, "bc", "hopper-full-replay", 0, [40.0])
    fake_run(tmp_path, "bcq", "hopper-full-replay", 0, [80.0])
    fake_run(tmp_path, "iql-layer_norm=True", "hopper-full-replay", 0, [90.0])  # a variant's label gets its rows
    text = stitching_table.render(*stitching_table.collect(tmp_path))
    assert "80.0 (one seed)" in text and "fewer than 2 seeds" in text
    assert "| hopper-full-replay | IQL (LayerNorm) | 1 | float32 | 90.0 (one seed) |" in text


def test_a_row_says_which_precision_its_seeds_trained_in_and_counts_a_mix(tmp_path):
    maze = "pointmaze-medium-navigate-singletask-task1"
    fake_run(tmp_path, "iql", maze, 0, [1.0], key="success_rate", precision="bf16")
    fake_run(tmp_path, "iql", maze, 1, [1.0], key="success_rate", precision="bf16")
    fake_run(tmp_path, "iql", maze, 2, [1.0], key="success_rate", precision="float32")
    fake_run(tmp_path, "bc", maze, 0, [0.0], key="success_rate", precision=None)  # a result without a precision
    text = stitching_table.render(*stitching_table.collect(tmp_path))
    assert f"| {maze} | IQL | 3 | bf16 ×2, float32 ×1 | 100.0 [100.0, 100.0] |" in text
    assert f"| {maze} | BC | 1 | not recorded | 0.0 (one seed) |" in text


def test_evals_lists_every_evaluation_of_each_run_of_one_dataset_training_ones_marked(tmp_path):
    maze = "pointmaze-medium-stitch-singletask-task1"
    fake_run(tmp_path, "iql", maze, 0, [0.0, 0.2, 0.52], key="success_rate")
    fake_run(tmp_path, "iql", maze, 10, [0.0, 0.04, 0.5], key="success_rate")  # seed 10 after seed 0, not before
    fake_run(tmp_path, "bc", maze, 0, [0.0], key="success_rate", finished=False)
    fake_run(tmp_path, "iql-expectile=0.5-layer_norm=True", maze, 1, [0.1, 0.3, 0.0], key="success_rate")
    fake_run(tmp_path, "bc", "hopper-full-replay", 0, [40.0])  # another dataset: not listed
    lines = stitching_table.evaluations(tmp_path, maze).splitlines()
    assert lines[0] == "| step | BC, seeds 0* | IQL, seeds 0 / 10 | IQL (τ 0.5, LayerNorm), seeds 1 |"
    assert lines[2:] == ["| 5k | 0 | 0 / 0 | 10 |", "| 10k | - | 20 / 4 | 30 |", "| 15k | - | 52 / 50 | 0 |"]
    assert stitching_table.label_name("iql-beta=100.0-layer_norm=True") == "IQL (β 100, LayerNorm)"
    assert (stitching_table.label_name("iql-actor=deterministic-alpha=0.0015-extraction=ddpg_bc-layer_norm=True")
            == "IQL (α 0.0015, DDPG+BC, LayerNorm)")
    assert stitching_table.main(["--root", str(tmp_path), "--evals", maze]) == 0
    with pytest.raises(SystemExit):
        stitching_table.main(["--root", str(tmp_path), "--evals", "pointmaze-medium-navigate-singletask-task1"])
