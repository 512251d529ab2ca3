"""One run per folder: an OS lock held for the run's life (released however the process ends), temporary files of
killed writes cleaned, and a run trained from Python that load_agent reloads."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch


SMALL = ["--scale", "smoke", "--set", "hidden=[16,16]"]


@pytest.fixture
def data(tmp_path, monkeypatch):
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv("MINIRL_DATA", str(d))
    return d


def train_args(out, *extra, steps=10):
    return ["train", "--algo", "bc", "--dataset", "pendulum-random", *SMALL, "--steps", steps, "--out", out,
            "--no-eval", *extra]


def _holder(out):
    """A process that holds ``out`` as a run does, until it is killed; returns once it holds it."""
    code = f"""
import time
from minirl.train import hold_run_folder
with hold_run_folder({str(out)!r}):
    print("HELD", flush=True)
    time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "HELD", proc.communicate()
    return proc


def test_a_second_run_into_a_folder_in_use_stops_before_any_work_and_a_killed_run_releases_it(cli, data, tmp_path):
    """Issue 73.2: two runs started into one folder both passed the check before either wrote config.json."""
    out = tmp_path / "run"
    holder = _holder(out)
    try:
        code, _, err = cli(*train_args(out))
        assert code == 2 and err.count("\n") == 1, err
        assert f"{out} is in use by another run (pid {holder.pid})" in err
        assert list(data.iterdir()) == []  # no dataset made: the lock is taken before any work
        assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing written into the other run's folder
        code, _, err = cli(*train_args(out, "--overwrite"))  # --overwrite does not take a folder in use either
        assert code == 2 and "is in use by another run" in err
    finally:
        holder.send_signal(signal.SIGKILL)  # a crash: no handler runs, the OS releases the lock
        holder.wait()
    code, _, err = cli(*train_args(out))
    assert code == 0, err
    assert (out / "agent.pt").exists() and (out / "config.json").exists()


def test_the_lock_is_held_for_the_whole_run_and_released_at_its_end(tmp_path):
    import fcntl

    from minirl.train import hold_run_folder
    out = tmp_path / "run"
    with hold_run_folder(out):
        with hold_run_folder(out):  # re-entrant in one process (runs.run, then train inside it)
            pass
        with open(out / ".lock") as f, pytest.raises(BlockingIOError):
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # still held after the inner block
    with open(out / ".lock") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # released


def test_a_running_run_refuses_a_second_one_into_its_folder(cli, data, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "minirl", *map(str, train_args(out, "--checkpoint-every", 5,
                                                                                  steps=1_000_000))],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoint.pt").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.1)
        before = (out / "config.json").read_text()
        code, _, err = cli(*train_args(out, "--overwrite"))
        assert code == 2 and f"is in use by another run (pid {proc.pid})" in err, err
        assert (out / "config.json").read_text() == before
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_temporary_files_of_killed_writes_are_removed_on_resume_and_overwrite(cli, data, tmp_path):
    """Issue 73.7: a checkpoint write killed half-way left `.checkpoint.<pid>.tmp.pt` (3.8 MB) forever."""
    out = tmp_path / "run"
    assert cli(*train_args(out, "--checkpoint-every", 5))[0] == 0
    left = [out / ".checkpoint.999999.tmp.pt", out / ".agent.4242.tmp.pt", out / ".log.17.tmp.jsonl"]
    for p in left:
        p.write_bytes(b"half a file")
    (out / "notes.tmp.txt").write_text("the user's")  # not a temporary file of ours: kept
    code, _, err = cli(*train_args(out, "--resume", steps=20))
    assert code == 0, err
    assert not any(p.exists() for p in left) and (out / "notes.tmp.txt").exists()
    for p in left:
        p.write_bytes(b"half a file")
    code, _, err = cli(*train_args(out, "--overwrite", steps=10))
    assert code == 0, err
    assert not any(p.exists() for p in left)


def test_train_from_python_writes_what_load_agent_needs(tmp_path, data):
    """Issue 73.6: `train(out=...)` wrote no config.json, so load_agent could not rebuild the agent."""
    from minirl.bc import BC, BCConfig
    from minirl.datasets import load_dataset
    from minirl.runs import load_agent
    from minirl.train import train
    ds = load_dataset("pendulum-random", 400, progress=False)
    torch.manual_seed(0)
    agent = BC(ds.obs_dim, ds.act_dim, ds.action_low, ds.action_high, BCConfig(hidden=(16, 16)))
    out = tmp_path / "py-run"
    train(agent, ds, 20, batch_size=32, out=out, eval_env="Pendulum-v1", eval_every=20, eval_episodes=1,
          task="pendulum", progress=False)
    settings = json.loads((out / "config.json").read_text())
    assert settings["agent"] == "minirl.bc.BC" and settings["env_id"] == "Pendulum-v1"
    assert settings["config"]["hidden"] == [16, 16]
    loaded = load_agent(out)
    obs = ds.observations[:5].copy()
    assert np.array_equal(loaded.act(obs), agent.act(obs))
    assert loaded.step == 20 and loaded.evaluate(1)["returns"].shape == (1,)


def test_train_from_python_again_into_the_folder_rewrites_config_json_and_a_resume_keeps_it(tmp_path, data):
    from minirl.bc import BC, BCConfig
    from minirl.datasets import load_dataset
    from minirl.runs import load_agent
    from minirl.train import train
    ds = load_dataset("pendulum-random", 400, progress=False)
    out = tmp_path / "py-run"
    for hidden in ((16, 16), (8,)):
        agent = BC(ds.obs_dim, ds.act_dim, ds.action_low, ds.action_high, BCConfig(hidden=hidden))
        train(agent, ds, 10, batch_size=32, out=out, checkpoint_every=10, progress=False)
        assert json.loads((out / "config.json").read_text())["config"]["hidden"] == list(hidden)
    train(agent, ds, 20, batch_size=32, out=out, resume=True, progress=False)
    assert json.loads((out / "config.json").read_text())["steps"] == 10  # the run's start wrote it
    assert load_agent(out).step == 20
