import json

import numpy as np
import pytest
import torch

from minirl import datasets
from minirl.datasets import (cache_path, full_size, get_task, load_dataset, make_dataset, normalized_score,
                             parse_name)
from minirl.runs import make_agent
from minirl.train import prepare_dataset, train


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_normalized_score_formula():
    t = get_task("pendulum")
    assert normalized_score(t, t.ref_random) == pytest.approx(0.0)
    assert normalized_score("pendulum", t.ref_expert) == pytest.approx(100.0)
    mid = (t.ref_random + t.ref_expert) / 2
    assert np.allclose(normalized_score("pendulum", [mid, t.ref_expert]), [50.0, 100.0])
    # by hand: 100 * (R - R_random) / (R_expert - R_random)
    r = -500.0
    assert normalized_score("pendulum", r) == pytest.approx(100 * (r - t.ref_random) / (t.ref_expert - t.ref_random))


def test_reference_returns_are_sane():
    t = get_task("pendulum")
    assert t.ref_random < -1000 and t.ref_expert > -200  # Pendulum-v1: random ~ -1250, expert > -200


def test_names_and_errors():
    assert "pendulum-medium-replay" in datasets.dataset_names()
    assert parse_name("pendulum-medium-expert")[1] == "medium-expert"
    with pytest.raises(ValueError, match="unknown task 'cartpole'"):
        parse_name("cartpole-medium")
    with pytest.raises(ValueError, match="the tier must be one of"):
        parse_name("pendulum-great")
    with pytest.raises(ValueError, match="n_transitions must be between 1 and"):
        make_dataset("pendulum-medium", 0)


def test_same_name_and_size_give_the_same_data_and_smaller_is_a_prefix():
    a = make_dataset("pendulum-medium", 450, progress=False)
    b = make_dataset("pendulum-medium", 450, progress=False)
    c = make_dataset("pendulum-medium", 250, progress=False)
    assert np.array_equal(a.observations, b.observations) and np.array_equal(a.actions, b.actions)
    assert np.array_equal(a.actions[:250], c.actions) and np.array_equal(a.rewards[:250], c.rewards)
    assert len(a) == 450 and a.timeouts[-1] and a.timeouts[199] and not a.terminals.any()  # 200-step episodes
    assert np.array_equal(a.next_observations[:199], a.observations[1:200])  # consecutive within an episode


def test_tiers_differ_and_respect_the_bounds():
    rnd = make_dataset("pendulum-random", 400, progress=False)
    med = make_dataset("pendulum-medium", 400, progress=False)
    assert not np.array_equal(rnd.actions, med.actions)
    for ds in (rnd, med):
        assert ds.actions.min() >= -2 and ds.actions.max() <= 2
        assert ds.action_low.tolist() == [-2.0] and ds.action_high.tolist() == [2.0]


def test_medium_replay_spans_the_snapshots_in_proportion():
    task = get_task("pendulum")
    n = 1100
    ds = make_dataset("pendulum-medium-replay", n, progress=False)
    assert len(ds) == n
    weights = np.array([c for _, c in task.replay])
    counts = datasets._proportional(weights, n)
    assert counts.sum() == n and np.all(np.abs(counts - weights / weights.sum() * n) < 1)
    assert task.replay[0][0] is None  # the random warm-up comes first


def test_medium_expert_is_medium_then_expert():
    me = make_dataset("pendulum-medium-expert", 600, progress=False)
    med = make_dataset("pendulum-medium", 300, progress=False)
    exp = make_dataset("pendulum-expert", 300, progress=False)
    assert np.array_equal(me.actions, np.concatenate([med.actions, exp.actions]))
    assert full_size("pendulum-medium-expert") == full_size("pendulum-medium") + full_size("pendulum-expert")


def test_load_dataset_caches(data_dir):
    ds = load_dataset("pendulum-random", 300, progress=False)
    path = cache_path("pendulum-random", 300)
    assert path.exists() and path.parent == data_dir
    again = load_dataset("pendulum-random", 300, progress=False)
    assert np.array_equal(ds.observations, again.observations)


def test_behaviour_quality_is_ordered():
    # the tiers are what their names say: random < medium < expert in mean return
    means = {tier: make_dataset(f"pendulum-{tier}", 2000, progress=False).return_stats()["return_mean"]
             for tier in ("random", "medium", "expert")}
    assert means["random"] < means["medium"] < means["expert"]
    score = normalized_score("pendulum", means["medium"])
    assert 20 < score < 70  # "medium": roughly a third to a half of the expert


def test_bc_recovers_the_behaviour_policy_return():
    """BC on 20k pendulum-expert transitions reaches the data's normalised score within 15 points.

    Why 15: returns of one policy on Pendulum vary with the initial angle (std ~ 95 return ~ 9 points per episode),
    so the mean over 10 evaluation episodes has a standard error of ~3 points and the dataset's mean one of ~1;
    BC acts with the mean action, which removes the behaviour's noise (measured: +0 to +2 points). 15 points is
    ~5 standard errors, while a policy that did not learn scores below 10.
    """
    raw = load_dataset("pendulum-expert", 20_000, progress=False)
    data_score = normalized_score("pendulum", raw.return_stats()["return_mean"])
    torch.manual_seed(0)
    agent, _ = make_agent("bc", raw)
    data, state_norm, _ = prepare_dataset(raw, normalize_states=True)
    hist = train(agent, data, 1500, eval_env="Pendulum-v1", eval_every=1500, eval_episodes=10, task="pendulum",
                 seed=0, state_normalizer=state_norm, progress=False)
    assert abs(hist["eval"][-1]["score_mean"] - data_score) < 15


def test_cli_dataset_commands(capsys):
    from minirl.cli import main
    assert main(["dataset", "make", "pendulum-random", "--size", "300"]) == 0
    assert cache_path("pendulum-random", 300).exists()
    assert main(["dataset", "info", "pendulum-random", "--size", "300"]) == 0
    assert main(["dataset", "list", "--size", "300"]) == 0
    out = capsys.readouterr().out
    assert '"transitions": 300' in out and '"episodes": 2' in out
    listed = [line for line in out.splitlines() if line.startswith("pendulum-random ")]
    assert listed and listed[0].endswith("cached")
    with pytest.raises(SystemExit):
        main(["dataset", "info"])  # a name is required
    assert "needs at least one dataset name" in capsys.readouterr().err


def test_dataset_info_scores_the_mean_best_and_best_tenth_of_episodes():
    from minirl.datasets import dataset_info
    info = dataset_info("pendulum-medium-expert", 4000, progress=False)
    returns = np.sort(load_dataset("pendulum-medium-expert", 4000, progress=False).episode_returns())
    k = max(len(returns) // 10, 1)
    assert info["episodes"] == len(returns) and info["best_10pct_episodes"] == k
    assert info["normalized_score_max"] == pytest.approx(normalized_score("pendulum", returns[-1]))
    assert info["best_10pct_normalized_score_mean"] == pytest.approx(normalized_score("pendulum", returns[-k:].mean()))
    assert info["normalized_score_mean"] <= info["best_10pct_normalized_score_mean"] <= info["normalized_score_max"]
    line = datasets.episode_summary(["pendulum-medium-expert"], 4000)
    assert line.startswith("pendulum-medium-expert") and f"{info['normalized_score_max']:6.1f}" in line
    assert f"best {k:,d} episodes (10%BC's data) {info['best_10pct_normalized_score_mean']:6.1f}" in line


def test_select_episodes_feeds_filtered_bc():
    ds = make_dataset("pendulum-medium-expert", 2000, progress=False)
    r = ds.episode_returns()
    best = ds.select_episodes(np.argsort(r)[-2:])
    assert len(best) == 400 and np.allclose(np.sort(best.episode_returns()), np.sort(r)[-2:])


def test_hopper_datasets():
    task = get_task("hopper")
    assert task.env_id == "Hopper-v5" and -50 < task.ref_random < 100 < 2000 < task.ref_expert  # 2,592: stochastic
    med = make_dataset("hopper-medium", 3000, progress=False)
    assert (med.obs_dim, med.act_dim) == (11, 3)
    assert med.terminals.any()  # the hopper falls: true terminals, unlike Pendulum's time limits
    assert np.abs(med.actions).max() <= 1
    replay = make_dataset("hopper-medium-replay", 2000, progress=False)
    assert len(replay) == 2000
    assert task.expert is not None and "hopper-medium-expert" in datasets.dataset_names()
    assert make_dataset("hopper-expert", 1000, progress=False).return_stats()["transitions"] == 1000
    # the expert reference is this run's own expert, whose deterministic evaluation met the stop criterion
    manifest = json.loads((datasets.ASSETS / "hopper" / "manifest.json").read_text())
    assert task.info["eval_return_expert"] >= 3000 and manifest["ref_expert_source"].startswith("mean return of expert")
    # medium is the snapshot whose evaluation is about a third of the expert's; medium-replay is the buffer up to it
    assert 0.25 < task.info["eval_return_medium"] / task.info["eval_return_expert"] < 0.45
    assert full_size("hopper-medium-replay") == task.info["medium_step"]


def test_cache_key_follows_the_snapshots(monkeypatch, tmp_path):
    key, random_key = datasets.recipe_key("pendulum-medium"), datasets.recipe_key("pendulum-random")
    assert key == datasets.recipe_key("pendulum-medium") and key != datasets.recipe_key("pendulum-expert")
    assert cache_path("pendulum-medium", 100).name == f"pendulum-medium-n100-{key}.npz"
    # a re-exported snapshot (different bytes) gives a different key, so the old cache is not reused
    fake = tmp_path / "assets"
    (fake / "pendulum").mkdir(parents=True)
    for f in ("manifest.json", "expert.pt"):
        (fake / "pendulum" / f).write_bytes((datasets.ASSETS / "pendulum" / f).read_bytes())
    (fake / "pendulum" / "medium.pt").write_bytes(b"another policy")
    monkeypatch.setattr(datasets, "ASSETS", fake)
    get_task.cache_clear()
    try:
        assert datasets.recipe_key("pendulum-medium") != key
        assert datasets.recipe_key("pendulum-random") == random_key  # random data uses no snapshot
    finally:
        get_task.cache_clear()


def _hopper_run(path):
    from minirl.behavior import train_sac
    from minirl.sac import SACConfig
    cfg = SACConfig(hidden=(16,), batch_size=16, start_steps=300, update_after=300)
    train_sac("Hopper-v5", 600, path, seed=0, config=cfg, snapshot_every=100, eval_every=100, eval_episodes=1,
              checkpoint_every=250, progress=False)


def test_full_replay_is_the_whole_buffer_of_the_run_the_assets_came_from(tmp_path, monkeypatch):
    """hopper-full-replay (D4RL v2's tier): the run's buffer from its first step to the expert snapshot, shipped and
    checked like medium-replay; its first transitions are medium-replay's; a run whose buffer differs is refused."""
    import shutil
    from minirl.behavior import replay_dataset
    run = tmp_path / "run"
    _hopper_run(run)
    monkeypatch.setattr(datasets, "ASSETS", tmp_path / "assets")
    get_task.cache_clear()
    try:
        datasets.export_assets("hopper", run, {"random": 1000, "medium": 1000, "expert": 1000},
                               medium_step=400, expert_step=600, episodes=1)
        assert "hopper-full-replay" not in datasets.dataset_names()  # not shipped yet
        with pytest.raises(ValueError, match="ships no whole replay buffer"):
            parse_name("hopper-full-replay")
        other = tmp_path / "other"
        shutil.copytree(run, other)
        chunk = sorted((other / "replay").glob("*.npz"))[0]
        with np.load(chunk) as z:
            arrays = dict(z)
        arrays["rew"][3] += 1.0
        np.savez(chunk, **arrays)
        with pytest.raises(ValueError, match="it is not the run the hopper assets came from"):
            datasets.export_full_replay("hopper", other)
        entry = datasets.export_full_replay("hopper", run)
        assert entry["transitions"] == 600 and "hopper-full-replay" in datasets.dataset_names()
        assert full_size("hopper-full-replay") == 600
        full = make_dataset("hopper-full-replay", progress=False)
        want = replay_dataset(run, 600)
        assert len(full) == 600 and all(np.array_equal(getattr(full, k), want[k]) for k in want)
        medium = make_dataset("hopper-medium-replay", progress=False)
        for k in ("observations", "actions", "rewards", "next_observations", "terminals"):
            assert np.array_equal(getattr(full, k)[:400], getattr(medium, k))
        assert np.array_equal(full.timeouts[:399], medium.timeouts[:399])  # medium's last step is a cut, not full's
        assert "pendulum-full-replay" not in datasets.dataset_names()
    finally:
        get_task.cache_clear()


def test_replay_buffer_packs_losslessly(tmp_path):
    from minirl.behavior import replay_dataset
    _hopper_run(tmp_path)
    data = replay_dataset(tmp_path, 500)
    packed = datasets.pack_replay(data)
    assert packed["observations"].nbytes + packed["end_next_observations"].nbytes < 0.7 * (
        data["observations"].nbytes + data["next_observations"].nbytes)
    back = datasets.unpack_replay(packed)
    assert all(np.array_equal(back[k], data[k]) and back[k].dtype == data[k].dtype for k in data)
    broken = dict(data, next_observations=data["next_observations"] + 1.0)
    with pytest.raises(ValueError, match="cannot be packed"):
        datasets.pack_replay(broken)


def test_shipped_replay_buffer_is_the_runs_buffer_checked_on_load(tmp_path, monkeypatch):
    """A task whose medium-replay is its SAC run's own buffer (D4RL's definition), exported the way the hopper
    assets are: the dataset is that buffer in order, a prefix for a smaller size, and a damaged file is refused."""
    from minirl.behavior import replay_dataset
    run = tmp_path / "run"
    _hopper_run(run)
    monkeypatch.setattr(datasets, "ASSETS", tmp_path / "assets")
    get_task.cache_clear()
    try:
        m = datasets.export_assets("hopper", run, {"random": 1000, "medium": 1000, "expert": 1000},
                                   medium_step=400, expert_step=600, episodes=1)
        assert m["replay"]["transitions"] == 400 and m["info"]["medium_step"] == 400
        again = datasets.export_assets("hopper", run, {"random": 1000, "medium": 1000, "expert": 1000},
                                       medium_step=400, expert_step=600, episodes=1)
        assert again["replay"]["sha256"] == m["replay"]["sha256"]  # the same buffer, the same committed bytes
        full = make_dataset("hopper-medium-replay", progress=False)
        want = replay_dataset(run, 400)
        assert len(full) == 400 and all(np.array_equal(getattr(full, k), want[k]) for k in want)
        part = make_dataset("hopper-medium-replay", 150, progress=False)
        assert np.array_equal(part.observations, want["observations"][:150]) and part.timeouts[-1]
        assert "hopper-medium-expert" in datasets.dataset_names()
        path = tmp_path / "assets" / "hopper" / "medium_replay.npz"
        path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
        with pytest.raises(ValueError, match="medium_replay.npz is damaged"):
            make_dataset("hopper-medium-replay", progress=False)
    finally:
        get_task.cache_clear()
