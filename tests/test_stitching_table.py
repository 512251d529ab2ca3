"""experiments/stitching_table.py: the stitching grid's table of means and differences with intervals."""
import json

import pytest

import stitching_table


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
    assert "| last 5 evaluations, mean [95% CI] | minus BC | minus 10%BC | final evaluation (lab) |" in text
    iql = next(line for line in text.splitlines() if line.startswith("| hopper-full-replay | IQL |")).split(" | ")
    # the number of record: the mean of the last five evaluations, (90 * 4 + 110 + seed) / 5 = 94.2 on average
    assert iql[2:5] == ["3", "float32", "94.2 [94.0, 94.4]"]
    assert iql[5].endswith("above")                        # minus BC (last five: 52.2 on average)
    assert iql[6].startswith("-6.0 [") and iql[6].endswith("below (final: above; flips)")  # 100.2 on average
    assert iql[7] == "111.0 [110.0, 112.0]"                # the final evaluation, for the lab pages
    assert iql[8].startswith("+10.0 [+8.7, +11.3] above")  # minus 10%BC at the final evaluation
    assert "Runs not finished (training, or stopped with a checkpoint), left out: 1." in text


def test_a_table_built_from_final_evaluations_fails_this_check(tmp_path):
    """The record columns hold the mean of the last five evaluations, not the final one (the protocol): each run ends
    on an evaluation 50 below the four before it."""
    for seed in range(2):
        fake_run(tmp_path, "bc", "d", seed, [0, 10, 10, 10, 10, -40])
        fake_run(tmp_path, "10%bc", "d", seed, [0, 20, 20, 20, 20, -30])
    cells = stitching_table.render(*stitching_table.collect(tmp_path)).splitlines()[3].split(" | ")
    assert cells[4] == "10.0 [10.0, 10.0]" and cells[5] == "+10.0 (no spread) above"   # (4 * 20 - 30) / 5 = 10
    assert cells[7] == "-30.0 [-30.0, -30.0]"
    fake_run(tmp_path, "iql", "d", 0, [1.0] * 4)                # four evaluations: no statistic of record
    iql = stitching_table.render(*stitching_table.collect(tmp_path)).splitlines()[4].split(" | ")
    assert iql[4:6] == ["fewer than 5 evaluations", "no statistic of record (fewer than 5 evaluations)"]


def test_settings_tuned_on_the_judged_tasks_are_labelled(tmp_path):
    label = "iql-actor=deterministic-alpha=0.0005-extraction=ddpg_bc-layer_norm=True"
    maze = "pointmaze-medium-stitch-singletask-task1"
    fake_run(tmp_path, label, maze, 0, [1.0] * 5, key="success_rate")
    fake_run(tmp_path, "iql-actor=deterministic-alpha=0.0015-extraction=ddpg_bc-layer_norm=True", maze, 0,
             [1.0] * 5, key="success_rate")
    text = stitching_table.render(*stitching_table.collect(tmp_path))
    assert "| IQL (α 0.0005, DDPG+BC, LayerNorm), tuned on the judged tasks | 1 |" in text
    assert "| IQL (α 0.0015, DDPG+BC, LayerNorm) | 1 |" in text


def test_one_seed_says_so_and_a_difference_needs_two(tmp_path):
    fake_run(tmp_path, "bc", "hopper-full-replay", 0, [40.0] * 5)
    fake_run(tmp_path, "bcq", "hopper-full-replay", 0, [80.0] * 5)
    fake_run(tmp_path, "iql-layer_norm=True", "hopper-full-replay", 0, [90.0] * 5)  # a variant's label gets its rows
    text = stitching_table.render(*stitching_table.collect(tmp_path))
    assert "80.0 (one seed)" in text and "fewer than 2 seeds" in text
    assert "| hopper-full-replay | IQL (LayerNorm) | 1 | float32 | 90.0 (one seed) |" in text


def test_a_row_says_which_precision_its_seeds_trained_in_and_counts_a_mix(tmp_path):
    maze = "pointmaze-medium-navigate-singletask-task1"
    fake_run(tmp_path, "iql", maze, 0, [1.0] * 5, key="success_rate", precision="bf16")
    fake_run(tmp_path, "iql", maze, 1, [1.0] * 5, key="success_rate", precision="bf16")
    fake_run(tmp_path, "iql", maze, 2, [1.0] * 5, key="success_rate", precision="float32")
    fake_run(tmp_path, "bc", maze, 0, [0.0] * 5, key="success_rate", precision=None)  # a result without a precision
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
