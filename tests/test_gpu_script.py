"""benchmarks/gpu.py is run on a lent GPU a few minutes at a time: its CPU dry run must do every step end to end, and
its --evaluate must score what the run saved."""
import csv
import json

import pytest
import torch

import gpu
from minirl import runs


def test_the_dry_run_checks_times_trains_and_saves_the_actors_which_evaluate_scores(tmp_path):
    out = tmp_path / "gpu"
    # the budget is a cap, not a target: generous, so a busy machine's slow rows are not cut ("budget spent")
    rc = gpu.main(["--dry-run", "--budget", "600", "--seconds", "0.05", "--seeds", "2", "--train-seeds", "2",
                   "--snapshot-every", "5", "--max-train-steps", "10", "--out", str(out)])
    assert rc == 0
    results = json.loads((out / "gpu_results.json").read_text())
    # step 0: the full scale's default on a CUDA device (seeds batched, steps captured where the update allows it),
    # and on this CPU plan_run keeps the eager path
    default = {r["algo"]: r for r in results["default_path"]}
    assert sorted(default) == sorted(runs.ALGORITHMS)
    assert all(r["cuda_batched"] and r["planned_capture"] is False for r in default.values())
    assert default["iql"]["cuda_capture"] and default["iql"]["cuda_step"] == "one CUDA graph"
    assert default["td3+bc"]["cuda_step"] == "eager: policy_freq=2 is a Python branch on the step count"
    assert results["checks"]["batched == plain (IQL, K=3)"] < 1e-4
    assert all(results["checks"][f"batched == plain ({a}, K=3)"] < 1e-4 for a in ("BC", "BCQ", "CQL"))
    eager = [r for r in results["rows"] if r["mode"] == "eager"]
    assert {r["algo"] for r in eager} == {"bc", "bcq", "cql", "iql", *(f"{a} batched" for a in ("bc", "bcq", "cql", "iql"))}
    assert all(r["updates_per_s"] > 0 for r in eager)
    captured = [r for r in results["rows"] if r["mode"] == "captured"]
    assert captured and all("GPU" in r["error"] for r in captured)  # a CPU says why, it does not pretend
    assert results["train"]["steps"] == 10 and results["train"]["snapshot_steps"] == [0, 5, 10]
    saved = torch.load(out / "curve_s1.pt", weights_only=False)
    assert sorted(saved["snapshots"]) == [0, 5, 10] and saved["seed"] == 1
    assert saved["snapshots"][0]["actor"]["action_scale"].shape == (3,)  # the actor's buffers travel with its weights
    # the actors of different seeds differ (each seed its own initial weights)
    first = torch.load(out / "curve_s0.pt", weights_only=False)["snapshots"][10]["actor"]
    assert any(not torch.equal(first[k], saved["snapshots"][10]["actor"][k]) for k in first)

    pytest.importorskip("mujoco", reason="--evaluate plays Hopper episodes: it needs MuJoCo (the GPU machine lacks it)")
    table = tmp_path / "curve.csv"
    assert gpu.main(["--evaluate", str(out), "--episodes", "1", "--csv", str(table)]) == 0
    rows = list(csv.DictReader(table.open()))
    assert sorted((int(r["seed"]), int(r["step"])) for r in rows) == [(s, t) for s in (0, 1) for t in (0, 5, 10)]


def test_evaluate_says_when_a_folder_holds_no_run(tmp_path, capsys):
    assert gpu.main(["--evaluate", str(tmp_path)]) == 2
    assert "no curve_s*.pt" in capsys.readouterr().err


def test_a_maze_run_at_the_cpu_scales_settings_lands_as_runs_the_stitching_table_reads(tmp_path):
    """--run maze --maze-settings cpu: the `cpu` scale's maze IQL (2 x 256, LayerNorm, batch 256, the cosine over the
    run's steps, --set on top); --evaluate --results-root writes each seed where run_suite would put it."""
    out, root = tmp_path / "gpu", tmp_path / "results"
    maze = "pointmaze-medium-stitch-singletask-task1"
    assert gpu.main(["--dry-run", "--skip-table", "--run", "maze", "--maze-settings", "cpu", "--maze-transitions",
                     "5000", "--set", "expectile=0.7", "--train-seeds", "2", "--snapshot-every", "5",
                     "--max-train-steps", "10", "--budget", "600", "--out", str(out)]) == 0
    train = json.loads((out / "gpu_results.json").read_text())["train"]
    assert train["steps"] == 10 and train["batch_size"] == 256
    assert train["settings"] == {"layer_norm": True, "expectile": 0.7}
    saved = torch.load(out / "curve_s0.pt", weights_only=False)
    config = saved["config"]
    assert (tuple(config["hidden"]), config["layer_norm"], config["max_steps"]) == ((256, 256), True, 10)
    assert (config["expectile"], config["beta"], config["reward_scale"]) == (0.7, 10.0, None)  # --set, the maze's
    assert saved["transitions"] == 5000 and saved["seeds_in_one_update"] == 2

    assert gpu.main(["--evaluate", str(out), "--episodes", "2", "--results-root", str(root)]) == 0
    run = root / "iql-expectile=0.7-layer_norm=True" / maze / "s1"
    rows = list(csv.DictReader((run / "eval.csv").open()))
    assert [int(r["step"]) for r in rows] == [5, 10]  # the untrained actor is not a run's evaluation
    assert all(0.0 <= float(r["success_rate"]) <= 1.0 for r in rows)
    result = json.loads((run / "result.json").read_text())
    assert result["precision"] == "float32" and result["eval_episodes"] == 2 and result["steps"] == 10
    import stitching_table
    table, running = stitching_table.collect(root)
    assert running == 0 and len(table[maze]["iql-expectile=0.7-layer_norm=True"]) == 2


def test_wrong_settings_are_named(capsys):
    with pytest.raises(SystemExit):
        gpu.main(["--set", "expectle=0.5"])
    assert "expectle" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpu.main(["--results-root", "somewhere"])
    assert "--results-root goes with --evaluate" in capsys.readouterr().err


@pytest.mark.parametrize("algo", ["10%bc", "goal-bc", "td3+bc", "cql", "bcq"])
def test_the_maze_grid_s_other_methods_run_stacked_and_their_acting_parts_score(tmp_path, algo):
    """--algo: BC's, CQL's and BCQ's seeds stacked on a maze at the `cpu` scale's settings; each snapshot keeps what
    the method acts with (BCQ: its VAE, perturbation actor and critic), which --evaluate loads and plays."""
    out, root = tmp_path / "gpu", tmp_path / "results"
    maze = "pointmaze-medium-stitch-singletask-task1"
    transitions = "40000" if algo == "goal-bc" else "5000"  # enough trajectories that some reach the goal
    assert gpu.main(["--dry-run", "--skip-table", "--run", "maze", "--maze-settings", "cpu", "--algo", algo,
                     "--maze-transitions", transitions, "--train-seeds", "2", "--snapshot-every", "5",
                     "--max-train-steps", "10", "--budget", "600", "--out", str(out)]) == 0
    train = json.loads((out / "gpu_results.json").read_text())["train"]
    assert train["algo"] == algo and train["steps"] == 10 and train["settings"] == {}
    saved = torch.load(out / "curve_s1.pt", weights_only=False)
    assert saved["algo"] == algo and sorted(saved["snapshots"]) == [0, 5, 10]
    assert tuple(saved["snapshots"][10]) == gpu.ACTING_PARTS[algo]
    config = saved["config"]
    if algo == "cql":  # the `cpu` scale's sizes and the maze's settings (CORL's AntMaze)
        assert (config["n_actions"], config["lagrange"], config["reward_multiplier"]) == (4, True, 10.0)
    if algo == "10%bc":
        assert config["top_fraction"] == 0.1
    if algo == "goal-bc":  # trained on the pieces that reach the goal only
        assert config["goal_pieces"] == "reach"
    assert gpu.main(["--evaluate", str(out), "--episodes", "1", "--results-root", str(root)]) == 0
    result = json.loads((root / algo / maze / "s0" / "result.json").read_text())
    assert result["algo"] == algo and result["steps"] == 10 and 0.0 <= result["success_rate"] <= 1.0


def test_ogbench_s_settings_are_iql_s_alone(tmp_path):
    with pytest.raises(ValueError, match="--maze-settings cpu"):
        gpu.run_data("maze", "pointmaze-medium-stitch-singletask-task1", 5000, "ogbench", algo="cql")
