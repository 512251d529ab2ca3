"""Unit tests of minirl.data: validation errors, transforms, episodes, combining, files and sampling."""
import builtins
import sys

import numpy as np
import pytest
import torch

from minirl.data import OfflineDataset, RewardTransform, StateNormalizer

OBS_DIM, ACT_DIM = 3, 2


def make_dict(lengths=(4, 5, 3), seed=0, terminal_first=True) -> dict:
    """A D4RL dict of random data with episodes of the given lengths: the first ends with a terminal, the middle
    ones with timeouts, and the last one is left incomplete (no flag on its last step)."""
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    terminals, timeouts = np.zeros(n, bool), np.zeros(n, bool)
    ends = np.cumsum(lengths) - 1
    for i, end in enumerate(ends[:-1]):
        (terminals if (i == 0 and terminal_first) else timeouts)[end] = True
    return {"observations": rng.normal(size=(n, OBS_DIM)).astype(np.float32),
            "actions": rng.uniform(-1, 1, size=(n, ACT_DIM)).astype(np.float32),
            "rewards": rng.normal(size=n).astype(np.float32),
            "next_observations": rng.normal(size=(n, OBS_DIM)).astype(np.float32),
            "terminals": terminals, "timeouts": timeouts}


def make_ds(**kwargs) -> OfflineDataset:
    return OfflineDataset(**make_dict(**kwargs))


def with_changes(**changes) -> dict:
    return {**make_dict(), **changes}


# ---------------------------------------------------------------------------------------------------------------
# construction and validation
# ---------------------------------------------------------------------------------------------------------------

def test_construction_stores_typed_readonly_copies():
    d = make_dict()
    d["observations"] = d["observations"].astype(np.float64)
    d["rewards"] = np.arange(12)  # integer rewards are fine
    d["terminals"] = d["terminals"].astype(np.int64)
    d["timeouts"] = d["timeouts"].astype(np.float32)
    ds = OfflineDataset(**d, infos={"qpos": np.zeros((12, 4))}, action_low=-1, action_high=np.ones(ACT_DIM))
    assert (len(ds), ds.size, ds.obs_dim, ds.act_dim) == (12, 12, OBS_DIM, ACT_DIM)
    assert ds.observations.dtype == ds.next_observations.dtype == ds.actions.dtype == np.float32
    assert ds.rewards.dtype == np.float32 and ds.rewards.shape == (12,)
    assert ds.terminals.dtype == ds.timeouts.dtype == bool
    np.testing.assert_array_equal(ds.terminals, d["terminals"] == 1)
    np.testing.assert_array_equal(ds.action_low, [-1, -1])
    assert ds.action_low.dtype == np.float32 and ds.infos["qpos"].shape == (12, 4)
    d["observations"][0, 0] = 123.0  # the dataset holds its own copy...
    assert ds.observations[0, 0] != 123.0
    with pytest.raises(ValueError, match="read-only"):  # ...which cannot be changed
        ds.rewards[0] = 1.0


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        OfflineDataset(**with_changes(reward=np.zeros(12)))


@pytest.mark.parametrize("field, shape", [("observations", r"\(N, obs_dim\)"), ("rewards", r"\(N,\)"),
                                          ("timeouts", r"\(N,\)")])
def test_missing_field(field, shape):
    with pytest.raises(ValueError, match=rf"{field} is missing \(expected an array of shape {shape}\)"):
        OfflineDataset(**with_changes(**{field: None}))


def test_rewards_column_is_an_error_not_squeezed():
    with pytest.raises(ValueError, match=r"rewards must be 1-D with shape \(N,\), got shape \(12, 1\)"):
        OfflineDataset(**with_changes(rewards=np.zeros((12, 1), np.float32)))


def test_observations_must_be_2d():
    with pytest.raises(ValueError, match=r"observations must be 2-D .* got shape \(12,\)"):
        OfflineDataset(**with_changes(observations=np.zeros(12, np.float32)))


def test_actions_must_be_2d():
    with pytest.raises(ValueError, match=r"actions must be 2-D .* got shape \(12, 2, 1\)"):
        OfflineDataset(**with_changes(actions=np.zeros((12, 2, 1), np.float32)))


def test_terminals_must_be_1d():
    with pytest.raises(ValueError, match=r"terminals must be 1-D .* got shape \(12, 1\)"):
        OfflineDataset(**with_changes(terminals=np.zeros((12, 1), bool)))


@pytest.mark.parametrize("field", ["actions", "rewards", "next_observations", "terminals", "timeouts"])
def test_length_mismatch(field):
    d = make_dict()
    d[field] = d[field][:-2]
    with pytest.raises(ValueError, match=rf"{field} has 10 entries, expected N = 12"):
        OfflineDataset(**d)


def test_infos_length_mismatch():
    with pytest.raises(ValueError, match=r"infos\['qpos'\] has 11 entries, expected N = 12"):
        OfflineDataset(**make_dict(), infos={"qpos": np.zeros((11, 4))})


def test_next_observations_dim_mismatch():
    with pytest.raises(ValueError, match="next_observations has 4 columns, expected obs_dim = 3"):
        OfflineDataset(**with_changes(next_observations=np.zeros((12, 4), np.float32)))


def test_empty_dataset():
    d = {k: v[:0] for k, v in make_dict().items()}
    with pytest.raises(ValueError, match=r"N = 0"):
        OfflineDataset(**d)


def test_nan_rewards_count_and_first_index():
    r = make_dict()["rewards"]
    r[[5, 7, 9]] = np.nan
    with pytest.raises(ValueError, match=r"rewards has 3 NaN values \(first at index 5\)"):
        OfflineDataset(**with_changes(rewards=r))


def test_inf_observations_count_and_first_row():
    obs = make_dict()["observations"]
    obs[4, 2], obs[8, 0] = np.inf, -np.inf
    with pytest.raises(ValueError, match=r"observations has 2 infinite values \(first at index 4, column 2: inf\)"):
        OfflineDataset(**with_changes(observations=obs))


def test_nan_in_next_observations_and_actions():
    nxt = make_dict()["next_observations"]
    nxt[6, 1] = np.nan
    with pytest.raises(ValueError, match=r"next_observations has 1 NaN value \(first at index 6"):
        OfflineDataset(**with_changes(next_observations=nxt))
    act = make_dict()["actions"]
    act[2, 0] = np.nan
    with pytest.raises(ValueError, match=r"actions has 1 NaN value \(first at index 2"):
        OfflineDataset(**with_changes(actions=act))


@pytest.mark.parametrize("field, shape", [("observations", (12, 3)), ("next_observations", (12, 3)),
                                          ("actions", (12, 2))])
def test_float_fields_reject_integers(field, shape):
    with pytest.raises(ValueError, match=rf"{field} must be floating point, got int64"):
        OfflineDataset(**with_changes(**{field: np.zeros(shape, np.int64)}))


def test_observations_reject_bool():
    with pytest.raises(ValueError, match="observations must be floating point, got bool"):
        OfflineDataset(**with_changes(observations=np.zeros((12, 3), bool)))


def test_rewards_reject_bool():
    with pytest.raises(ValueError, match="rewards must be numeric .* got bool"):
        OfflineDataset(**with_changes(rewards=np.zeros(12, bool)))


def test_flags_reject_values_other_than_0_and_1():
    t = np.zeros(12)
    t[[3, 6]] = 2.0
    t[10] = 0.5
    with pytest.raises(ValueError, match=r"terminals has 3 values that are not 0 or 1 \(first at index 3"):
        OfflineDataset(**with_changes(terminals=t))
    with pytest.raises(ValueError, match=r"timeouts has 1 value that is not 0 or 1 \(first at index 0"):
        OfflineDataset(**with_changes(timeouts=np.r_[-1, np.zeros(11, int)]))
    with pytest.raises(ValueError, match="timeouts must be boolean .* got <U"):
        OfflineDataset(**with_changes(timeouts=np.array(["0"] * 12)))


def test_actions_outside_bounds():
    act = make_dict()["actions"]  # uniform in [-1, 1]
    act[7, 1], act[9, 0] = 1.5, -1.0 - 1e-7  # the second one is within the 1e-6 tolerance
    with pytest.raises(ValueError, match=r"actions has 1 value outside the bounds \[-1, 1\] \(first at index 7"):
        OfflineDataset(**with_changes(actions=act), action_low=-1.0, action_high=1.0)
    act = make_dict()["actions"]
    act[:, 1] = -0.5  # below the second dimension's lower bound 0 everywhere
    with pytest.raises(ValueError, match=r"actions has 12 values outside the bounds \[\[-1, 0\], 1\] "
                                         r"\(first at index 0, column 1: -0.5\)"):
        OfflineDataset(**with_changes(actions=act), action_low=[-1, 0], action_high=1)


def test_actions_beyond_one_without_bounds_are_an_error_that_says_how_to_pass_them():
    """Issue 73.3: Pendulum's actions (|a| up to 2) without bounds were silently limited to [-1, 1] by the actor."""
    act = make_dict()["actions"] * 2.0
    with pytest.raises(ValueError, match=r"actions has \d+ values outside \[-1, 1\] \(first at index \d+, column \d: "
                                         r"-?1\.\d+\) and no action bounds were given.*pass action_low= and "
                                         r"action_high= .*env.action_space.low"):
        OfflineDataset(**with_changes(actions=act))
    ds = OfflineDataset(**with_changes(actions=act), action_low=-2.0, action_high=2.0)  # said: accepted
    assert ds.actions.max() > 1
    OfflineDataset(**make_dict())  # within [-1, 1], no bounds needed


def test_bounds_with_wrong_shape():
    with pytest.raises(ValueError, match=r"action_high must be a scalar or have shape \(act_dim,\) = \(2,\), "
                                         r"got shape \(3,\)"):
        OfflineDataset(**make_dict(), action_low=-1, action_high=np.ones(3))


def test_bounds_low_not_below_high():
    with pytest.raises(ValueError, match=r"action_low must be < action_high .* 1 dimension is not "
                                         r"\(first at index 1: low 1 >= high 1\)"):
        OfflineDataset(**make_dict(), action_low=[-1, 1], action_high=1)


def test_bounds_must_come_in_pairs():
    with pytest.raises(ValueError, match="must be given together"):
        OfflineDataset(**make_dict(), action_low=-1)


# ---------------------------------------------------------------------------------------------------------------
# transforms
# ---------------------------------------------------------------------------------------------------------------

def test_state_normalizer_round_trip_numpy_and_torch():
    ds = make_ds()
    norm = ds.state_normalizer()
    np.testing.assert_allclose(norm.mean, ds.observations.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm.std, ds.observations.std(0) + 1e-3, rtol=1e-5)
    z = norm.transform(ds.observations)
    assert z.dtype == np.float32
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(norm.inverse(z), ds.observations, rtol=1e-5, atol=1e-6)
    x = torch.tensor(ds.observations, dtype=torch.float64)  # a copy: the dataset's arrays are read-only
    zt = norm.transform(x)
    assert isinstance(zt, torch.Tensor) and zt.dtype == torch.float32 and zt.device == x.device
    np.testing.assert_allclose(zt.numpy(), z, rtol=1e-6, atol=1e-6)
    assert torch.allclose(norm.inverse(zt), x.float(), rtol=1e-5, atol=1e-6)
    again = StateNormalizer.from_state_dict(norm.state_dict())
    assert again == norm
    torch.save(norm.state_dict(), buf := __import__("io").BytesIO())  # plain lists: weights_only loading works
    buf.seek(0)
    assert StateNormalizer.from_state_dict(torch.load(buf, weights_only=True)) == norm


def test_state_normalizer_errors():
    with pytest.raises(ValueError, match="std must be positive; 1 entry is not"):
        StateNormalizer(mean=np.zeros(3), std=np.array([1.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="last dimension is 3"):
        StateNormalizer(mean=np.zeros(3), std=np.ones(3)).transform(np.zeros((5, 4)))


def test_reward_transform_round_trip():
    tr = RewardTransform(scale=2.5, bias=-1.0)
    r = make_ds().rewards
    np.testing.assert_allclose(tr.transform(r), 2.5 * r - 1.0, rtol=1e-6)
    np.testing.assert_allclose(tr.inverse(tr.transform(r)), r, rtol=1e-5, atol=1e-6)
    rt = torch.tensor(r)
    assert torch.allclose(tr.inverse(tr.transform(rt)), rt, rtol=1e-5, atol=1e-6)
    assert tr.transform(2.0) == 4.0
    assert RewardTransform.from_state_dict(tr.state_dict()) == tr
    with pytest.raises(ValueError, match="non-zero"):
        RewardTransform(scale=0.0)


def test_return_range_scale_on_three_episodes():
    d = make_dict(lengths=(2, 3, 2))
    d["rewards"] = np.array([4, 6, 10, 10, 10, 1, 2], np.float32)  # returns 10, 30, 3
    ds = OfflineDataset(**d)
    np.testing.assert_allclose(ds.episode_returns(), [10, 30, 3])
    tr = ds.return_range_scaler()
    assert tr.scale == pytest.approx(1000 / 27) and tr.bias == 0.0
    assert ds.return_range_scaler(scale=1.0).scale == pytest.approx(1 / 27)


def test_return_range_scale_needs_a_range():
    one_episode = make_ds(lengths=(6,))
    with pytest.raises(ValueError, match="only one episode .* divide by zero"):
        one_episode.return_range_scaler()
    d = make_dict(lengths=(2, 2))
    d["rewards"] = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="all 2 episode returns are equal"):
        OfflineDataset(**d).return_range_scaler()


def test_transformed_is_a_new_dataset_and_reversible():
    ds = make_ds()
    before = {k: v.copy() for k, v in ds.as_dict().items() if isinstance(v, np.ndarray)}
    norm, tr = ds.state_normalizer(), RewardTransform(scale=3.0, bias=1.0)
    new = ds.transformed(state=norm, reward=tr)
    assert new is not ds
    for k, v in before.items():  # the original is untouched
        np.testing.assert_array_equal(getattr(ds, k), v)
    np.testing.assert_allclose(new.observations, norm.transform(ds.observations))
    np.testing.assert_allclose(new.next_observations, norm.transform(ds.next_observations))
    np.testing.assert_allclose(new.rewards, 3 * ds.rewards + 1, rtol=1e-6)
    np.testing.assert_array_equal(new.actions, ds.actions)
    np.testing.assert_array_equal(new.terminals, ds.terminals)
    restored = StateNormalizer.from_state_dict(norm.state_dict())
    np.testing.assert_allclose(restored.inverse(new.observations), ds.observations, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(restored.inverse(new.next_observations), ds.next_observations, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tr.inverse(new.rewards), ds.rewards, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ds.transformed().observations, ds.observations)


# ---------------------------------------------------------------------------------------------------------------
# episodes
# ---------------------------------------------------------------------------------------------------------------

def test_episode_bounds_terminal_timeout_and_incomplete_last():
    ds = make_ds(lengths=(4, 5, 3))  # terminal at 3, timeout at 8, last episode has no flag
    assert not ds.terminals[-1] and not ds.timeouts[-1]
    assert ds.episode_bounds() == [(0, 4), (4, 9), (9, 12)]
    eps = list(ds.episodes())
    assert [len(e["rewards"]) for e in eps] == [4, 5, 3]
    assert eps[0]["terminals"][-1] and eps[1]["timeouts"][-1]
    np.testing.assert_array_equal(eps[1]["observations"], ds.observations[4:9])
    assert len(OfflineDataset(**eps[2])) == 3
    returns = ds.episode_returns()
    np.testing.assert_allclose(returns, [ds.rewards[a:b].sum() for a, b in ds.episode_bounds()], rtol=1e-6)
    stats = ds.return_stats()
    assert stats["episodes"] == 3 and stats["transitions"] == 12
    assert stats["return_min"] == pytest.approx(returns.min()) and stats["return_max"] == pytest.approx(returns.max())
    assert stats["return_mean"] == pytest.approx(returns.mean()) and stats["return_std"] == pytest.approx(returns.std())


def test_last_transition_flagged_makes_no_empty_episode():
    d = make_dict(lengths=(3, 2))
    d["timeouts"][-1] = True
    assert OfflineDataset(**d).episode_bounds() == [(0, 3), (3, 5)]


# ---------------------------------------------------------------------------------------------------------------
# combining and subsetting
# ---------------------------------------------------------------------------------------------------------------

def test_concatenate_keeps_episodes_apart():
    a, b = make_ds(lengths=(4, 3), seed=1), make_ds(lengths=(2, 5), seed=2)  # both end mid-episode
    ab = OfflineDataset.concatenate([a, b])
    assert len(ab) == 14
    assert ab.episode_bounds() == [(0, 4), (4, 7), (7, 9), (9, 14)]
    assert ab.timeouts[6] and not ab.terminals[6]
    np.testing.assert_array_equal(ab.observations[7:], b.observations)
    assert not a.timeouts[-1]  # the parts are untouched


def test_concatenate_does_not_add_timeout_after_terminal():
    d = make_dict(lengths=(3,))
    d["terminals"][-1] = True
    ab = OfflineDataset.concatenate([OfflineDataset(**d), make_ds(lengths=(2,))])
    assert ab.terminals[2] and not ab.timeouts[2]


def test_concatenate_infos_and_bounds():
    a = OfflineDataset(**make_dict(), infos={"qpos": np.zeros((12, 2))}, action_low=-1, action_high=1)
    b = OfflineDataset(**make_dict(seed=3), infos={"qpos": np.ones((12, 2))}, action_low=-1, action_high=1)
    ab = OfflineDataset.concatenate([a, b])
    assert ab.infos["qpos"].shape == (24, 2) and ab.infos["qpos"][12:].all()
    np.testing.assert_array_equal(ab.action_high, [1, 1])
    c = OfflineDataset(**make_dict(), infos={"qvel": np.zeros(12)}, action_low=-1, action_high=1)
    with pytest.raises(ValueError, match=r"different infos keys.*differing: \['qpos', 'qvel'\]"):
        OfflineDataset.concatenate([a, c])
    d = OfflineDataset(**make_dict(), infos={"qpos": np.zeros((12, 2))})
    with pytest.raises(ValueError, match=r"different action bounds: part 0 has \[-1, 1\], part 1 has None"):
        OfflineDataset.concatenate([a, d])


def test_take():
    ds = make_ds(lengths=(4, 5, 3))
    first = ds.take(6)  # cuts the second episode
    assert len(first) == 6 and first.timeouts[-1]
    assert first.episode_bounds() == [(0, 4), (4, 6)]
    np.testing.assert_array_equal(first.actions, ds.actions[:6])
    at_terminal = ds.take(4)
    assert at_terminal.terminals[-1] and not at_terminal.timeouts[-1]
    assert len(ds.take(len(ds))) == len(ds)
    for bad in (0, 13, 2.5):
        with pytest.raises(ValueError, match=r"take\(n\) needs an integer 1 <= n <= 12"):
            ds.take(bad)


# ---------------------------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------------------------

def assert_same(a: OfflineDataset, b: OfflineDataset):
    for k, v in a.as_dict().items():
        if k == "infos":
            assert v.keys() == b.infos.keys()
            for key in v:
                assert v[key].dtype == b.infos[key].dtype
                np.testing.assert_array_equal(v[key], b.infos[key])
        elif v is None:
            assert getattr(b, k) is None
        else:
            assert v.dtype == getattr(b, k).dtype
            np.testing.assert_array_equal(v, getattr(b, k))


def test_npz_round_trip(tmp_path):
    ds = OfflineDataset(**make_dict(), infos={"qpos": np.arange(24.0).reshape(12, 2), "ok": np.ones(12, bool)},
                        action_low=[-1, -2], action_high=[1, 2])
    ds.save(tmp_path / "ds.npz")
    assert_same(ds, OfflineDataset.load(tmp_path / "ds.npz"))
    plain = make_ds()
    plain.save(tmp_path / "plain")  # numpy adds .npz
    loaded = OfflineDataset.load(tmp_path / "plain.npz")
    assert_same(plain, loaded)
    assert loaded.action_low is None and loaded.infos == {}


def write_hdf5(path, d: dict, with_next: bool):
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as f:
        for k, v in d.items():
            if k != "next_observations" or with_next:
                f.create_dataset(k, data=v)
        f.create_dataset("infos/qpos", data=np.arange(len(d["rewards"]), dtype=np.float64))
        f.create_dataset("infos/goal/xy", data=np.zeros((len(d["rewards"]), 2)))
        f.create_dataset("metadata/algorithm", data="SAC")


def test_from_hdf5_with_next_observations(tmp_path):
    d = make_dict()
    write_hdf5(tmp_path / "d.hdf5", d, with_next=True)
    ds = OfflineDataset.from_hdf5(tmp_path / "d.hdf5")
    assert_same(OfflineDataset(**d, infos={"qpos": np.arange(12.0), "goal/xy": np.zeros((12, 2))}), ds)


def test_from_hdf5_without_next_observations(tmp_path):
    d = make_dict(lengths=(4, 5, 3))  # terminal at 3, timeout at 8, the file's last transition is 11
    write_hdf5(tmp_path / "d.hdf5", d, with_next=False)
    ds = OfflineDataset.from_hdf5(tmp_path / "d.hdf5")
    kept = [0, 1, 2, 3, 4, 5, 6, 7, 9, 10]  # qlearning_dataset drops the timeout (8) and the last transition (11)
    assert len(ds) == len(kept)
    np.testing.assert_array_equal(ds.observations, d["observations"][kept])
    np.testing.assert_array_equal(ds.next_observations, d["observations"][np.array(kept) + 1])
    np.testing.assert_array_equal(ds.rewards, d["rewards"][kept])
    np.testing.assert_array_equal(ds.infos["qpos"], np.array(kept, float))
    assert ds.terminals[3] and not ds.terminals[[0, 1, 2, 4, 5, 6, 7, 8, 9]].any()
    # the step before the dropped timeout closes its episode, so episodes stay apart
    assert ds.episode_bounds() == [(0, 4), (4, 8), (8, 10)]


def test_from_hdf5_without_h5py(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)  # makes `import h5py` raise ImportError
    with pytest.raises(ImportError, match=r"reading \.hdf5 needs h5py: pip install h5py"):
        OfflineDataset.from_hdf5(tmp_path / "d.hdf5")


def test_from_hdf5_without_h5py_via_import_hook(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "h5py":
            raise ImportError("No module named 'h5py'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match="pip install h5py"):
        OfflineDataset.from_hdf5(tmp_path / "d.hdf5")


# ---------------------------------------------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------------------------------------------

def check_batch(batch: dict, b: int, device: str):
    assert set(batch) == {"obs", "act", "rew", "next_obs", "done"}
    shapes = {"obs": (b, OBS_DIM), "act": (b, ACT_DIM), "rew": (b,), "next_obs": (b, OBS_DIM), "done": (b,)}
    for k, t in batch.items():
        assert tuple(t.shape) == shapes[k], k
        assert t.dtype == torch.float32, k
        assert t.device.type == device, k


def test_sample_shapes_dtypes_and_values_cpu():
    ds = make_ds()
    batch = ds.sample(32, generator=torch.Generator().manual_seed(0))
    check_batch(batch, 32, "cpu")
    # every sampled row is a real transition, with its own reward, next state and done flag
    rows = [int(np.flatnonzero((ds.observations == o.numpy()).all(1))[0]) for o in batch["obs"]]
    np.testing.assert_array_equal(batch["act"].numpy(), ds.actions[rows])
    np.testing.assert_array_equal(batch["rew"].numpy(), ds.rewards[rows])
    np.testing.assert_array_equal(batch["next_obs"].numpy(), ds.next_observations[rows])
    np.testing.assert_array_equal(batch["done"].numpy(), ds.terminals[rows].astype(np.float32))


def test_sample_on_meta_device():
    check_batch(make_ds().sample(8, device="meta"), 8, "meta")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_sample_on_cuda():
    check_batch(make_ds().sample(8, device="cuda"), 8, "cuda")


def test_sample_is_deterministic_with_a_seeded_generator():
    ds = make_ds()
    a = ds.sample(16, generator=torch.Generator().manual_seed(123))
    b = ds.sample(16, generator=torch.Generator().manual_seed(123))
    c = ds.sample(16, generator=torch.Generator().manual_seed(124))
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert not torch.equal(a["obs"], c["obs"])


def test_sample_rejects_bad_batch_size():
    ds = make_ds()
    for bad in (0, -3, 2.0, True):
        with pytest.raises(ValueError, match="batch_size must be a positive integer"):
            ds.sample(bad)


def test_to_tensors_is_cached_and_sampling_does_not_copy(monkeypatch):
    ds = make_ds()
    t1, t2 = ds.to_tensors("cpu"), ds.to_tensors(torch.device("cpu"))
    assert set(t1) == {"obs", "act", "rew", "next_obs", "done", "timeout"}
    assert all(t1[k] is t2[k] for k in t1)
    np.testing.assert_array_equal(t1["timeout"].numpy(), ds.timeouts.astype(np.float32))
    assert ds.to_tensors("meta")["obs"] is not t1["obs"]  # one cache entry per device

    def no_copy(*args, **kwargs):
        raise AssertionError("sample() copied the dataset from numpy")

    for name in ("tensor", "as_tensor", "from_numpy"):  # once cached, a batch needs no host -> device copy
        monkeypatch.setattr(torch, name, no_copy)
    check_batch(ds.sample(64), 64, "cpu")
    assert ds.to_tensors("cpu")["obs"] is t1["obs"]


def test_fingerprint_tells_equal_data_from_data_one_value_apart():
    ds = make_ds()
    assert ds.fingerprint() == make_ds().fingerprint() and len(ds.fingerprint()) == 64
    d = make_dict()
    d["rewards"][3] = np.nextafter(d["rewards"][3], np.float32(np.inf))  # one reward one float apart
    assert OfflineDataset(**d).fingerprint() != ds.fingerprint()
    assert ds.select_episodes(np.array([0])).fingerprint() != ds.fingerprint()


def test_select_episodes_keeps_whole_episodes_in_order():
    ds = make_ds()
    bounds = ds.episode_bounds()
    sel = ds.select_episodes(np.array([2, 0]))
    (a2, b2), (a0, b0) = bounds[2], bounds[0]
    assert len(sel) == (b2 - a2) + (b0 - a0)
    assert np.array_equal(sel.observations, np.concatenate([ds.observations[a2:b2], ds.observations[a0:b0]]))
    assert np.allclose(sel.episode_returns(), ds.episode_returns()[[2, 0]])
    assert len(sel.episode_bounds()) == 2  # the cut last episode (2) is closed, not merged with episode 0


def test_select_episodes_errors():
    ds = make_ds()
    with pytest.raises(ValueError, match="indices has 1 out-of-range episode numbers \\(first: 7\\)"):
        ds.select_episodes(np.array([0, 7]))
    with pytest.raises(ValueError, match="non-empty 1-D array"):
        ds.select_episodes(np.array([], dtype=int))


def test_best_episodes_keeps_the_top_fraction_in_order():
    # five episodes of lengths 2, 3, 1, 2, 2 with returns 1, 9, 5, 7, -3
    lengths, returns = [2, 3, 1, 2, 2], [1.0, 9.0, 5.0, 7.0, -3.0]
    rewards = np.concatenate([np.full(n, r / n) for n, r in zip(lengths, returns)]).astype(np.float32)
    ends = np.cumsum(lengths) - 1
    n = sum(lengths)
    obs = np.arange(n, dtype=np.float32)[:, None]
    ds = OfflineDataset(observations=obs, actions=np.zeros((n, 1), np.float32), rewards=rewards,
                        next_observations=obs + 1, terminals=np.isin(np.arange(n), ends[:2]),
                        timeouts=np.isin(np.arange(n), ends[2:]))
    top = ds.best_episodes(0.4)                       # floor(0.4 * 5) = 2 episodes: returns 9 and 7, in data order
    assert np.allclose(top.episode_returns(), [9.0, 7.0])
    assert top.observations[:, 0].tolist() == [2, 3, 4, 6, 7]
    assert top.terminals.tolist() == [False, False, True, False, False] and top.timeouts[-1]
    assert len(ds.best_episodes(0.01).episode_bounds()) == 1   # at least one episode
    assert np.allclose(ds.best_episodes(1.0).episode_returns(), returns)
    for bad in (0, 1.5, -0.1, True, "0.1"):
        with pytest.raises(ValueError, match="fraction must be a number in"):
            ds.best_episodes(bad)
