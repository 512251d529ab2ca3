"""benchmarks/run_suite.py and minirl.plots: the path from training runs to the book's tables and curves."""
import json
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
import pytest

from minirl import plots

REPO = Path(__file__).resolve().parent.parent


def _fake_run(root: Path, label: str, dataset: str, seed: int, scores: list[float]) -> None:
    d = root / label / dataset / f"s{seed}"
    d.mkdir(parents=True)
    (d / "result.json").write_text(json.dumps({"algo": label.split("-")[0], "label": label, "dataset": dataset,
                                               "seed": seed, "score": scores[-1]}))
    rows = ["step,return_mean,return_std,score_mean,score_std"]
    rows += [f"{100 * (i + 1)},{s * 10},1.0,{s},0.5" for i, s in enumerate(scores)]
    (d / "eval.csv").write_text("\n".join(rows) + "\n")


def test_load_results_table_and_missing(tmp_path):
    _fake_run(tmp_path, "iql", "pendulum-medium", 0, [10.0, 30.0])
    _fake_run(tmp_path, "iql", "pendulum-medium", 1, [20.0, 50.0])
    _fake_run(tmp_path, "bc", "pendulum-medium", 0, [5.0, 25.0])
    runs = plots.load_results(tmp_path)
    assert len(runs) == 3
    iql = plots.select(runs, "iql", "pendulum-medium")
    np.testing.assert_array_equal(iql[0]["curve"]["step"], [100, 200])
    np.testing.assert_array_equal(iql[1]["curve"]["score"], [20.0, 50.0])
    s = plots.score_summary(runs)[("iql", "pendulum-medium")]
    assert s["n"] == 2 and s["mean"] == 40.0 and s["std"] == pytest.approx(10.0 * 2 ** 0.5)  # sample SD, ddof=1
    table = plots.score_table(runs, labels=["bc", "iql"], datasets=["pendulum-medium", "hopper-medium"])
    assert "| pendulum-medium | 25.0 (1) | 40.0 ± 14.1 (2) |" in table
    assert "| hopper-medium | not run | not run |" in table
    assert plots.missing_runs(runs, ["bc", "iql"], ["pendulum-medium"], [0, 1]) == ["bc/pendulum-medium/s1"]
    for empty in (tmp_path / "nowhere", tmp_path / "iql"):  # a missing folder, and one without finished runs
        with pytest.raises(FileNotFoundError, match="no finished runs in .* make them with benchmarks/run_suite.py"):
            plots.load_results(empty)


def test_plot_curves_mean_and_band(tmp_path):
    _fake_run(tmp_path, "iql", "pendulum-medium", 0, [10.0, 30.0])
    _fake_run(tmp_path, "iql", "pendulum-medium", 1, [20.0, 50.0])
    fig, ax = plt.subplots()
    line = plots.plot_curves(ax, plots.load_results(tmp_path), "iql", "pendulum-medium")
    np.testing.assert_array_equal(line.get_ydata(), [15.0, 40.0])
    assert ax.get_xlabel() == "gradient steps" and ax.get_ylabel() == "normalised score"
    assert plots.plot_curves(ax, [], "iql", "pendulum-medium") is None
    plt.close(fig)


def test_run_suite_writes_results_and_skips_finished_runs(tmp_path):
    cmd = [sys.executable, str(REPO / "benchmarks" / "run_suite.py"), "--algos", "bc", "--datasets",
           "pendulum-medium", "--seeds", "0", "--scale", "smoke", "--steps", "20", "--root", str(tmp_path),
           "--set", "hidden=[32,32]"]
    first = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert first.returncode == 0, first.stderr[-2000:]
    run = tmp_path / "smoke" / "bc-hidden=32,32" / "pendulum-medium" / "s0"
    result = json.loads((run / "result.json").read_text())
    assert result["steps"] == 20 and result["scale"] == "smoke" and result["overrides"] == {"hidden": [32, 32]}
    assert np.isfinite(result["score"]) and result["hardware"]["torch_threads"] == 1
    assert not (run / "checkpoint.pt").exists() and not (run / "agent.pt").exists()
    assert "bc-hidden=32,32" in (tmp_path / "smoke" / "summary.csv").read_text()
    second = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert second.returncode == 0 and "skip" in second.stdout


def test_run_suite_skips_a_run_another_live_process_is_making(tmp_path, capsys):
    import os
    sys.path.insert(0, str(REPO / "benchmarks"))
    import run_suite
    run = tmp_path / "smoke" / "bc" / "pendulum-medium" / "s0"
    run.mkdir(parents=True)
    (run / "running.pid").write_text(str(os.getpid()))  # a live process (this one) holds the run
    assert run_suite.run_one(tmp_path / "smoke", "bc", "pendulum-medium", 0, "smoke", {}, 5, "cpu") is None
    assert "being made by process" in capsys.readouterr().out
    (run / "running.pid").write_text("999999999")  # a dead process: the run is taken over and finished
    result = run_suite.run_one(tmp_path / "smoke", "bc", "pendulum-medium", 0, "smoke", {}, 5, "cpu")
    assert result["steps"] == 5 and not (run / "running.pid").exists()
