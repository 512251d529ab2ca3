import io

import numpy as np
import pytest
import torch

from minirl.behavior import evaluate_policy, load_actor, rollout, train_sac
from minirl.sac import SACConfig


def small_sac():
    return SACConfig(hidden=(32, 32), batch_size=32, start_steps=50, update_after=50)


def test_sac_checkpoint_resume_continues_where_it_stopped(tmp_path):
    kw = dict(seed=0, config=small_sac(), snapshot_every=50, eval_every=100, eval_episodes=1, checkpoint_every=100,
              progress=False)
    first = train_sac("Pendulum-v1", 100, tmp_path, **kw)
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert ck["step"] == 100 and ck["buffer"]["n"] == 100
    saved_actor = {k: v.clone() for k, v in ck["agent"]["actor"].items()}
    history = train_sac("Pendulum-v1", 200, tmp_path, **kw)  # resumes from step 100, does not start over
    assert [h["step"] for h in first] == [100] and [h["step"] for h in history] == [100, 200]
    ck2 = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert ck2["step"] == 200 and ck2["buffer"]["n"] == 200
    assert not all(torch.equal(saved_actor[k], ck2["agent"]["actor"][k]) for k in saved_actor)  # it trained on
    snaps = sorted(p.name for p in (tmp_path / "snapshots").glob("*.pt"))
    assert snaps == [f"step_{s:07d}.pt" for s in (50, 100, 150, 200)]
    actor = load_actor(tmp_path / "snapshots" / "step_0000200.pt")
    assert len(evaluate_policy(actor, "Pendulum-v1", 2, seed=0)) == 2


def test_rollout_format_and_determinism(tmp_path):
    train_sac("Pendulum-v1", 50, tmp_path, config=small_sac(), snapshot_every=50, eval_every=50, eval_episodes=1,
              progress=False)
    actor = load_actor(tmp_path / "snapshots" / "step_0000050.pt")
    a = rollout("Pendulum-v1", 450, 3, actor, progress=False)
    b = rollout("Pendulum-v1", 450, 3, actor, progress=False)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert a["observations"].shape == (450, 3) and a["actions"].dtype == np.float32
    assert a["timeouts"].sum() == 3 and a["timeouts"][[199, 399, 449]].all()  # two limits, one cut
    c = rollout("Pendulum-v1", 450, 4, actor, progress=False)
    assert not np.array_equal(a["actions"], c["actions"])  # another seed, other data
    det = rollout("Pendulum-v1", 200, 3, actor, deterministic=True, progress=False)
    with torch.no_grad():
        expected = actor.action(torch.as_tensor(det["observations"][:5])).numpy()
    assert np.allclose(det["actions"][:5], expected, atol=1e-6)


def _small_run(path, steps, env_id="Pendulum-v1", **extra):
    kw = dict(seed=3, config=small_sac(), snapshot_every=50, eval_every=100, eval_episodes=1, checkpoint_every=150,
              progress=False) | extra
    return train_sac(env_id, steps, path, **kw)


def test_sac_resume_mid_episode_is_exact_and_replay_is_the_buffer(tmp_path):
    from minirl.behavior import replay_dataset
    _small_run(tmp_path / "whole", 300)
    _small_run(tmp_path / "split", 150)            # stops mid-episode (Pendulum's episodes last 200 steps)
    _small_run(tmp_path / "split", 300)
    a = torch.load(tmp_path / "whole" / "checkpoint.pt", weights_only=False)
    b = torch.load(tmp_path / "split" / "checkpoint.pt", weights_only=False)
    assert all(torch.equal(a["agent"]["actor"][k], b["agent"]["actor"][k]) for k in a["agent"]["actor"])
    ra, rb = replay_dataset(tmp_path / "whole", 300), replay_dataset(tmp_path / "split", 300)
    assert all(np.array_equal(ra[k], rb[k]) for k in ra)
    # the buffer in order: each transition starts where the last ended, except after an episode's end
    assert np.array_equal(ra["observations"][1:200], ra["next_observations"][:199])
    assert ra["timeouts"][199] and not ra["terminals"].any() and ra["timeouts"].sum() == 2  # limit at 200, cut at 300
    assert not np.array_equal(ra["observations"][200], ra["next_observations"][199])       # a new episode
    part = replay_dataset(tmp_path / "whole", 120)
    assert all(np.array_equal(part[k][:119], ra[k][:119]) for k in ra) and part["timeouts"][119]
    with pytest.raises(ValueError, match="holds 300 transitions before step 400"):
        replay_dataset(tmp_path / "whole", 400)


def test_sac_hopper_resume_restores_the_simulator(tmp_path):
    kw = dict(env_id="Hopper-v5", config=SACConfig(hidden=(16,), batch_size=16, start_steps=40, update_after=40),
              checkpoint_every=70)
    _small_run(tmp_path / "whole", 140, **kw)
    _small_run(tmp_path / "split", 70, **kw)
    _small_run(tmp_path / "split", 140, **kw)
    from minirl.behavior import replay_dataset
    ra, rb = replay_dataset(tmp_path / "whole", 140), replay_dataset(tmp_path / "split", 140)
    assert all(np.array_equal(ra[k], rb[k]) for k in ra)
    assert ra["terminals"].any()   # Hopper falls under random actions: true terminals are recorded


def test_sac_refuses_to_resume_with_other_settings_and_stops_at_its_goal(tmp_path):
    _small_run(tmp_path, 150)
    with pytest.raises(ValueError, match="seed was 3, now 4"):
        _small_run(tmp_path, 300, seed=4)
    history = _small_run(tmp_path / "goal", 1000, stop_return=-1e9, stop_after=2)  # any return reaches it
    assert [h["step"] for h in history] == [100, 200]
    assert torch.load(tmp_path / "goal" / "checkpoint.pt", weights_only=False)["step"] == 200


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("initial", [0, 4_000])
def test_progress_bar_redraws_about_a_hundred_times_off_a_terminal(initial):
    from minirl.utils import REDRAWS_OFF_TERMINAL, progress_bar
    log, terminal = io.StringIO(), _Terminal()
    for stream in (log, terminal):  # mininterval=0: only tqdm's item count limits the redraws
        for _ in progress_bar(range(initial, 20_000), initial=initial, total=20_000, mininterval=0, file=stream):
            pass
    redraws_log, redraws_terminal = log.getvalue().count("\n"), terminal.getvalue().count("\r")
    assert redraws_log <= REDRAWS_OFF_TERMINAL + 3          # a first draw, ~100 redraws, the closing one
    assert redraws_log >= REDRAWS_OFF_TERMINAL // 2
    assert redraws_terminal > 10 * REDRAWS_OFF_TERMINAL     # a terminal still sees it move
    assert "20000/20000" in log.getvalue()                  # and the log ends at the total


class _NotebookStream(io.StringIO):  # what sys.stderr is in a Jupyter kernel: not a terminal, but it redraws \r
    pass


_NotebookStream.__module__ = "ipykernel.iostream"


def test_progress_bar_in_a_log_file_writes_plain_lines_at_a_modest_interval():
    # a redirected log (python -m minirl train ... 2> log) got tqdm's carriage returns: one line of redraws
    from minirl.utils import LOG_INTERVAL, progress_bar
    log = io.StringIO()
    bar = progress_bar(range(5000), total=5000, desc="IQL", file=log)
    assert bar.mininterval >= LOG_INTERVAL >= 10      # seconds between two lines, unless told otherwise
    for _ in bar:
        pass
    lines = log.getvalue().split("\n")
    assert "\r" not in log.getvalue() and lines[-1] == ""   # every redraw a line of its own, the last one ended
    assert lines[0].startswith("IQL:") and "5000/5000" in lines[-2] and len(lines) <= 3
    assert all(line.isascii() and line == line.rstrip() for line in lines)  # no block characters, no padding
    for _ in progress_bar(range(20_000), total=20_000, mininterval=0, file=log):
        pass
    assert all(line.strip() for line in log.getvalue().split("\n")[:-1])  # and no empty lines between them


def test_progress_bar_in_a_notebook_redraws_in_place():
    from minirl.utils import progress_bar
    out = _NotebookStream()
    bar = progress_bar(range(2000), total=2000, mininterval=0, file=out)
    assert bar.mininterval == 0
    for _ in bar:
        pass
    assert out.getvalue().count("\r") > 10 and out.getvalue().count("\n") <= 1  # Jupyter shows one line


def test_the_training_loop_does_not_import_data_making():
    import subprocess
    import sys
    code = ("import sys, minirl.train, minirl.evaluation; "
            "print(sorted(m for m in sys.modules if m in ('minirl.behavior', 'minirl.datasets')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_progress_bar_disabled_writes_nothing():
    from minirl.utils import progress_bar
    log = io.StringIO()
    for _ in progress_bar(range(50), total=50, enabled=False, file=log):
        pass
    assert log.getvalue() == ""


def test_progress_bar_off_a_terminal_keeps_its_pace_when_redraws_are_minutes_apart():
    # tqdm's monitor thread resets miniters to 1 for a bar silent for longer than its maxinterval (10 s by default):
    # a 1M-step run at 60 updates/s, redrawing every 1% (~3 min), then redrew every second in its log
    from minirl.utils import progress_bar
    log = progress_bar(range(10**6), total=10**6, file=io.StringIO())
    terminal = progress_bar(range(10**6), total=10**6, file=_Terminal())
    silent_for = 3600.0                                      # seconds since the last redraw
    assert log.miniters == 10**4 and not silent_for >= log.maxinterval   # the monitor's condition never holds
    assert silent_for >= terminal.maxinterval                # on a terminal tqdm's default behaviour is kept
    log.close(), terminal.close()
