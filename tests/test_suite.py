"""experiments/run_suite.py and minirl.plots: the path from training runs to the book's tables and curves."""
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
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
        with pytest.raises(FileNotFoundError, match="no finished runs in .* make them with .*run_suite.py"):
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
    cmd = [sys.executable, str(REPO / "experiments" / "run_suite.py"), "--algos", "bc", "--datasets",
           "pendulum-medium", "--seeds", "0", "--scale", "smoke", "--steps", "20", "--root", str(tmp_path),
           "--set", "hidden=[32,32]"]
    first = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert first.returncode == 0, first.stderr[-2000:]
    from minirl.devices import native_bf16
    amp = native_bf16("cpu")  # the default precision, auto, is bf16 where the CPU computes it natively
    tag = "smoke-bf16" if amp else "smoke-float32"  # the default tag names the precision the runs computed in
    run = tmp_path / tag / "bc-hidden=32,32" / "pendulum-medium" / "s0"
    result = json.loads((run / "result.json").read_text())
    assert result["steps"] == 20 and result["scale"] == "smoke" and result["overrides"] == {"hidden": [32, 32]}
    assert np.isfinite(result["score"]) and result["hardware"]["torch_threads"] == 1
    hw = result["hardware"]  # the simulator's versions (they decide a roll-out's episodes) and, on Linux, the CPU
    assert hw["gymnasium"] == importlib.metadata.version("gymnasium") and hw["mujoco"] == importlib.metadata.version(
        "mujoco")
    if Path("/proc/cpuinfo").exists():
        cpuinfo = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
        family = next(line.split(":")[1].strip() for line in cpuinfo.splitlines() if line.startswith("cpu family"))
        assert hw["cpu_id"].startswith(f"family {family} model ")
        assert set(hw["cpu_bf16"]) <= {"avx512_bf16", "amx_bf16"}
        assert ("avx512_bf16" in hw["cpu_bf16"]) == (" avx512_bf16" in cpuinfo)
    assert result["precision"] == ("bf16" if amp else "float32") and result["amp"] is amp  # what it computed in
    assert result["adam"] == "fused"  # nets.adam's implementation (torch >= 2.4)
    from minirl.datasets import load_dataset
    from minirl.runs import get_scale
    data = load_dataset("pendulum-medium", get_scale("smoke").dataset_size, progress=False)
    assert result["data"] == {"episodes": data.return_stats()["episodes"], "sha256": data.fingerprint()}
    assert len(result["segments_s"]) == 1 and result["wall_time_s"] == result["segments_s"][0] > 0  # one part
    assert not (run / "checkpoint.pt").exists()  # only for resuming
    from minirl.runs import load_agent  # the final agent is kept (git-ignored) and can be rolled out again
    assert type(load_agent(run).agent).__name__ == "BC"
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index",
                              "results/" + str(run.relative_to(tmp_path) / "agent.pt")], cwd=REPO)
    assert ignored.returncode == 0, "results/**/agent.pt must stay out of git"
    assert "bc-hidden=32,32" in (tmp_path / tag / "summary.csv").read_text()
    second = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert second.returncode == 0 and "skip" in second.stdout


def test_run_suite_skips_a_run_another_live_process_is_making(tmp_path, capsys):
    import os
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


# --- executors (issue 17): runs as submitit jobs, the lock across machines --------------------------------------

TINY = ["--algos", "bc", "--datasets", "pendulum-medium", "--scale", "smoke", "--steps", "20",
        "--set", "hidden=[16,16]", "--precision", "float32"]
TINY_RUN = Path("bc-hidden=16,16") / "pendulum-medium"


def _run_suite():
    import run_suite
    return run_suite


def _fake_slurm(bin_dir: Path) -> Path:
    """sbatch, srun and squeue stand-ins: sbatch keeps the script it was given and answers with job 4242, then
    4243...; squeue prints bin_dir/squeue.out (a queued job's state, or nothing once it has left the queue)."""
    bin_dir.mkdir()
    (bin_dir / "last_job").write_text("4241")
    sbatch = (f'cp "$1" {bin_dir}/last.sbatch\nn=$(( $(cat {bin_dir}/last_job) + 1 ))\necho $n > {bin_dir}/last_job\n'
              'echo "Submitted batch job $n"')
    scripts = {"sbatch": sbatch,
               "srun": "exit 0", "squeue": f"cat {bin_dir}/squeue.out 2>/dev/null; exit 0"}
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_local_executor_makes_the_inline_runs_reports_failures_and_skips_finished_runs(tmp_path, capsys):
    pytest.importorskip("submitit")
    run_suite = _run_suite()
    assert run_suite.main([*TINY, "--seeds", "0", "--root", str(tmp_path / "inline")]) == 0
    local = tmp_path / "local"
    broken = local / "smoke-float32" / TINY_RUN / "s1"
    broken.mkdir(parents=True)
    (broken / "checkpoint.pt").write_text("not a checkpoint")  # seed 1 resumes from it, and fails
    capsys.readouterr()
    command = [*TINY, "--seeds", "0", "1", "--root", str(local), "--executor", "local", "--max-parallel", "1"]
    assert run_suite.main(command) == 1
    out, err = capsys.readouterr()
    failed = next(line for line in out.splitlines() if line.startswith("FAILED"))
    assert failed.startswith("FAILED bc-hidden=16,16/pendulum-medium/s1: minirl.config.UserError: ")
    assert "checkpoint.pt is damaged or not a minirl checkpoint" in failed
    log = Path(failed.rsplit("(log: ", 1)[1].rstrip(")"))
    assert log.parent == local / "smoke-float32" / ".submitit" and "UserError" in log.read_text()
    assert "1 of 2 run(s) failed: bc-hidden=16,16/pendulum-medium/s1" in err
    made = {d: tmp_path / d / "smoke-float32" / TINY_RUN / "s0" for d in ("inline", "local")}
    def kept(run):  # a run folder's .lock is the OS lock's file (minirl.train.hold_run_folder), released, not a marker
        return sorted(p.name for p in run.iterdir() if p.name != ".lock")
    assert kept(made["local"]) == kept(made["inline"]) \
        == ["agent.pt", "config.json", "eval.csv", "log.jsonl", "result.json"]  # no lock or checkpoint left
    inline, job = (json.loads((made[d] / "result.json").read_text()) for d in ("inline", "local"))
    assert inline.keys() == job.keys()
    for key in ("score", "return", "steps", "precision", "overrides", "label", "seed"):
        assert job[key] == inline[key], key  # the same seed gives the same numbers on CPU, wherever it runs
    assert (made["local"] / "eval.csv").read_text() == (made["inline"] / "eval.csv").read_text()
    assert '"bc-hidden=16,16",bc,pendulum-medium,0,smoke,20,' in (local / "smoke-float32" / "summary.csv").read_text()
    (broken / "checkpoint.pt").unlink()  # repaired: the same command makes seed 1 and leaves seed 0 alone
    assert run_suite.main(command) == 0
    out = capsys.readouterr().out
    assert f"skip {made['local']} (done)" in out and "done bc-hidden=16,16/pendulum-medium/s1: score " in out
    assert json.loads((broken / "result.json").read_text())["seed"] == 1


def test_slurm_executor_submits_the_grid_as_one_job_array(tmp_path, monkeypatch, capsys):
    pytest.importorskip("submitit")
    run_suite = _run_suite()
    root = tmp_path / "results"
    command = ["--algos", "bc", "iql", "--datasets", "pendulum-medium", "--seeds", "0", "1", "--scale", "smoke",
               "--root", str(root), "--device", "cuda", "--precision", "float32", "--executor", "slurm", "--no-wait"]
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit):
        run_suite.main(command)
    assert "--executor slurm needs sbatch and srun on PATH" in capsys.readouterr().err
    fake = _fake_slurm(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}/usr/bin{os.pathsep}/bin")
    flags = ["--slurm-partition", "gpu", "--max-parallel", "2", "--timeout-min", "90"]
    assert run_suite.main([*command, *flags]) == 0  # cuda is the nodes' business: this machine has no GPU
    assert "submitted 4 run(s) as SLURM job 4242, at most 2 at a time" in capsys.readouterr().out
    sbatch = (fake / "last.sbatch").read_text()
    for line in ["--array=0-3%2", "--partition=gpu", "--gpus-per-task=1", "--time=90", "--cpus-per-task=1",
                 f"--output={root / 'smoke-float32' / '.submitit'}/%A_%a_0_log.out", "--signal=USR2@90"]:
        assert f"#SBATCH {line}\n" in sbatch
    runs = [root / "smoke-float32" / algo / "pendulum-medium" / f"s{seed}" for algo in ("bc", "iql") for seed in (0, 1)]
    for i, run in enumerate(runs):  # each run's placeholder names its array task
        lock = json.loads((run / "running.pid").read_text())
        assert lock["job"] == f"4242_{i}" and lock["queued"] and lock["slurm"]
    (fake / "squeue.out").write_text("PENDING\n")
    assert run_suite.main(command) == 0  # while the array waits, the same command submits nothing
    out = capsys.readouterr().out
    assert "submitted" not in out and all(f"skip {run} (queued as SLURM job 4242_{i})" in out
                                          for i, run in enumerate(runs))
    (fake / "squeue.out").write_text("")  # the jobs left the queue without making the runs (cancelled)
    assert run_suite.main(command) == 0
    assert "submitted 4 run(s) as SLURM job 4243" in capsys.readouterr().out
    assert [json.loads((run / "running.pid").read_text())["job"] for run in runs] == [f"4243_{i}" for i in range(4)]


def test_a_lock_from_another_machine_holds_the_run_until_it_is_stale(tmp_path, capsys):
    run_suite = _run_suite()
    root = tmp_path / "smoke"
    run = root / "bc" / "pendulum-medium" / "s0"
    run.mkdir(parents=True)
    lock = run / "running.pid"
    lock.write_text(json.dumps({"host": "gpu-node-7", "pid": 123, "job": "99_1", "slurm": False}))
    assert run_suite.run_one(root, "bc", "pendulum-medium", 0, "smoke", {}, 5, "cpu") is None
    assert "being made by process 123 on gpu-node-7, job 99_1" in capsys.readouterr().out
    assert run_suite.lock_holder(run, job="99_1") is None  # the same job, requeued: its own earlier lock
    lock.write_text("{half a reco")  # being written, or damaged: held while it is fresh
    assert "lock is being written or unreadable" in run_suite.lock_holder(run)
    lock.write_text(json.dumps({"host": run_suite.HOST, "pid": 999999999}))  # this host, a process that is gone
    assert run_suite.lock_holder(run) is None
    lock.write_text(json.dumps({"host": "gpu-node-7", "pid": 123, "job": None}))
    old = time.time() - run_suite.STALE_S - 60  # no heartbeat for longer than STALE_S: its machine died
    os.utime(lock, (old, old))
    assert run_suite.lock_holder(run) is None
    result = run_suite.run_one(root, "bc", "pendulum-medium", 0, "smoke", {}, 5, "cpu")
    assert result["steps"] == 5 and not lock.exists()


def test_a_preempted_job_saves_at_the_end_of_its_step_and_is_requeued(tmp_path, monkeypatch):
    submitit = pytest.importorskip("submitit")
    run_suite = _run_suite()
    from minirl import bc
    from minirl.train import read_checkpoint
    usr = getattr(signal, "SIG" + submitit.JobEnvironment.USR_SIG)
    calls = []
    update = bc.BC.update

    def update_then_preempted(self, batch):  # submitit's time-limit signal arrives during the 7th update
        calls.append(1)
        if len(calls) == 7:
            signal.raise_signal(usr)
        return update(self, batch)

    requeued = []

    def submitits_handler(signum, frame):  # what submitit does: checkpoint() is the next job, then exit
        requeued.append(signum)
        raise SystemExit(-1)

    monkeypatch.setattr(bc.BC, "update", update_then_preempted)
    previous = signal.signal(usr, submitits_handler)
    job = run_suite.SuiteJob(tmp_path / "smoke", "bc", "pendulum-medium", 0, "smoke", {"hidden": [16, 16]}, 20,
                             "cpu", "float32", 1, None, "test")
    try:
        with pytest.raises(SystemExit):
            job()
    finally:
        signal.signal(usr, previous)
    run = tmp_path / "smoke" / TINY_RUN / "s0"
    assert requeued == [usr] and read_checkpoint(run / "checkpoint.pt")["step"] == 7
    assert not (run / "running.pid").exists() and not (run / "result.json").exists()
    outcome = job.checkpoint().result()  # the requeued job resumes at step 7
    assert outcome["result"]["steps"] == 20 and len(calls) == 20 and not (run / "checkpoint.pt").exists()
    uninterrupted = run_suite.run_one(tmp_path / "again", "bc", "pendulum-medium", 0, "smoke", {"hidden": [16, 16]},
                                      20, "cpu", threads=1)
    assert outcome["result"]["score"] == uninterrupted["score"]


def test_executor_flags_are_checked_before_anything_is_submitted(tmp_path, monkeypatch, capsys):
    run_suite = _run_suite()
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    base = ["--algos", "bc", "--datasets", "pendulum-random", "--seeds", "0", "--scale", "smoke",
            "--root", str(tmp_path / "results"), "--precision", "float32"]  # (a later --precision wins)
    cases = [(["--executor", "local", "--max-parallel", "0"], "--max-parallel must be an integer >= 1, got 0"),
             (["--executor", "slurm", "--timeout-min", "0"], "--timeout-min must be an integer >= 1, got 0"),
             (["--max-parallel", "2"], "--max-parallel needs --executor local or slurm"),
             (["--executor", "local", "--slurm-partition", "gpu"], "--slurm-partition needs --executor slurm"),
             (["--executor", "local", "--no-wait"], "--no-wait needs --executor slurm"),
             (["--executor", "slurm", "--slurm-gpus-per-task", "-1"], "--slurm-gpus-per-task must be an integer >= 0"),
             (["--executor", "slurm", "--device", "cuda", "--slurm-gpus-per-task", "0"],
              "--slurm-gpus-per-task 0 with --device cuda: the runs would see no GPU"),
             (["--executor", "slurm", "--precision", "auto"],
              "--precision auto is decided by the machine that runs: with --executor slurm choose --precision float32"),
             (["--executor", "slurm", "--device", "gpu"], "--device 'gpu' is not a device")]
    for bad, message in cases:
        with pytest.raises(SystemExit) as stop:
            run_suite.main([*base, *bad])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and message in err, err
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if it were not installed
    for executor in ("local", "slurm"):
        with pytest.raises(SystemExit) as stop:
            run_suite.main([*base, "--executor", executor])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1, err
        assert f'--executor {executor} needs submitit: pip install -e ".[cluster]"' in err
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()


def test_checkpoint_every_is_a_quarter_of_the_run_at_most_25000_steps(tmp_path, monkeypatch):
    import run_suite
    assert [run_suite.checkpoint_every(n) for n in (3, 20, 50_000, 100_000, 1_000_000)] == [1, 5, 12_500, 25_000, 25_000]
    seen = {}

    def fake_run(algo, dataset, **kw):  # what the suite asks runs.run for
        seen.update(kw)
        raise RuntimeError("stop here")
    monkeypatch.setattr(run_suite.runs, "run", fake_run)
    with pytest.raises(RuntimeError, match="stop here"):
        run_suite._train_and_record(tmp_path, "iql", "hopper-medium", 0, "smoke", {}, 1_000_000, "cpu")
    assert seen["steps"] == 1_000_000 and seen["checkpoint_every"] == 25_000


def test_capture_reaches_the_run_and_needs_a_gpu(tmp_path, monkeypatch, capsys):
    import run_suite
    seen = {}

    def fake_run(algo, dataset, **kw):
        seen.update(kw)
        raise RuntimeError("stop here")
    monkeypatch.setattr(run_suite.runs, "run", fake_run)
    with pytest.raises(RuntimeError, match="stop here"):
        run_suite.run_one(tmp_path, "iql", "hopper-medium", 0, "smoke", {}, 10, "cuda", capture=True)
    assert seen["capture"] is True
    with pytest.raises(SystemExit):
        run_suite.main(["--algos", "bc", "--datasets", "hopper-medium", "--capture", "--root", str(tmp_path)])
    assert "--capture replays each training step as a CUDA graph: it needs --device cuda" in capsys.readouterr().err


def test_a_resumed_batch_is_trained_once_even_though_finishing_deletes_its_checkpoints(tmp_path, monkeypatch):
    """run_batch trains the seeds that resume, then those that start; a finished run deletes its checkpoint, so the
    split must be made before training (on 2026-11-27 the resumed seeds were trained again from step 0)."""
    run_suite = _run_suite()
    calls = []

    def fake_train(outs, algo, dataset, seeds, *args, **kwargs):
        calls.append(list(seeds))
        for out in outs:
            (out / "checkpoint.pt").unlink(missing_ok=True)
            (out / "result.json").write_text("{}")
        return [{"seed": s} for s in seeds]

    monkeypatch.setattr(run_suite, "_train_and_record", fake_train)
    for seed in (0, 1):  # interrupted runs: a checkpoint each; seed 2 not started
        out = run_suite.run_dir(tmp_path, "iql", "hopper-medium-replay", seed, {})
        out.mkdir(parents=True)
        (out / "checkpoint.pt").write_bytes(b"x")
    results = run_suite.run_batch(tmp_path, "iql", "hopper-medium-replay", [0, 1, 2], "smoke", {}, None, "cpu",
                                  "float32", 1, None, None)
    assert calls == [[0, 1], [2]] and len(results) == 3
