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
    assert result["precision"] == "float32" and result["amp"] is False  # what the run computed in, resolved
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


def test_run_suite_checks_the_whole_grid_before_the_first_run(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import run_suite
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    base = ["--datasets", "pendulum-random", "--seeds", "0", "--scale", "smoke", "--root", str(tmp_path / "results")]
    for bad, message in [(["--algos", "bc", "iql", "--set", "expectile=0.9"], "BCConfig has no field 'expectile'"),
                         (["--algos", "bc", "--set", "lr=fast"], "BCConfig.lr expected a finite number"),
                         (["--algos", "bc", "--precision", "float32", "--amp"], "contradicts"),
                         (["--algos", "bc", "--threads", "0"], "--threads must be an integer >= 1"),
                         (["--algos", "bc", "--seeds", "-1"], "--seeds must be an integer >= 0")]:
        with pytest.raises(SystemExit) as stop:
            run_suite.main([*base, *bad])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()
