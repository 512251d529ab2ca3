"""benchmarks/gpu.py is run on a lent GPU a few minutes at a time: its CPU dry run must do every step end to end, and
its --evaluate must score what the run saved."""
import csv
import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import gpu  # noqa: E402


def test_the_dry_run_checks_times_trains_and_saves_the_actors_which_evaluate_scores(tmp_path):
    out = tmp_path / "gpu"
    # the budget is a cap, not a target: generous, so a busy machine's slow rows are not cut ("budget spent")
    rc = gpu.main(["--dry-run", "--budget", "600", "--seconds", "0.05", "--seeds", "2", "--train-seeds", "2",
                   "--snapshot-every", "5", "--max-train-steps", "10", "--out", str(out)])
    assert rc == 0
    results = json.loads((out / "gpu_results.json").read_text())
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
    assert saved["snapshots"][0]["action_scale"].shape == (3,)  # the actor's buffers travel with its weights
    # the actors of different seeds differ (each seed its own initial weights)
    first = torch.load(out / "curve_s0.pt", weights_only=False)["snapshots"][10]
    assert any(not torch.equal(first[k], saved["snapshots"][10][k]) for k in first)

    pytest.importorskip("mujoco", reason="--evaluate plays Hopper episodes: it needs MuJoCo (the GPU machine lacks it)")
    table = tmp_path / "curve.csv"
    assert gpu.main(["--evaluate", str(out), "--episodes", "1", "--csv", str(table)]) == 0
    rows = list(csv.DictReader(table.open()))
    assert sorted((int(r["seed"]), int(r["step"])) for r in rows) == [(s, t) for s in (0, 1) for t in (0, 5, 10)]


def test_evaluate_says_when_a_folder_holds_no_run(tmp_path, capsys):
    assert gpu.main(["--evaluate", str(tmp_path)]) == 2
    assert "no curve_s*.pt" in capsys.readouterr().err
