"""Nothing silent before work: each case here ran without a word before (issue 73.4 and 73.7)."""
import numpy as np
import pytest
import torch

from minirl.config import UserError
from minirl.data import FIELDS, OfflineDataset


def pendulum_like(n=600, seed=0, **flags):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    timeouts = np.zeros(n, bool)
    timeouts[199::200] = True
    d = dict(observations=obs, actions=rng.uniform(-2, 2, (n, 1)).astype(np.float32),
             rewards=rng.normal(size=n).astype(np.float32), next_observations=np.roll(obs, -1, 0),
             terminals=np.zeros(n, bool), timeouts=timeouts)
    return OfflineDataset(**{**d, **flags}, action_low=-2.0, action_high=2.0)


def _bc():
    from minirl.bc import BC, BCConfig
    torch.manual_seed(0)
    return BC(3, 1, -2.0, 2.0, BCConfig(hidden=(8,)))


def test_a_batch_larger_than_the_dataset_is_said_before_training():
    from minirl.train import train
    with pytest.warns(UserWarning, match=r"batch_size 1,000 is larger than the dataset \(600 transitions\)"):
        train(_bc(), pendulum_like(), 5, batch_size=1000, progress=False)


@pytest.mark.parametrize("flags, message", [
    ({"terminals": np.ones(600, bool), "timeouts": np.zeros(600, bool)}, "all 600 transitions are terminal"),
    ({"timeouts": np.zeros(600, bool)}, "no transition of 600 ends an episode"),
])
def test_degenerate_episode_flags_warn_before_training(flags, message):
    from minirl.train import train
    ds = pendulum_like(**flags)
    assert message in ds.flag_problem()
    with pytest.warns(UserWarning, match=message):
        train(_bc(), ds, 2, batch_size=16, progress=False)
    assert pendulum_like().flag_problem() is None


def test_emulated_bfloat16_on_the_cpu_is_one_warning_line(tmp_path, monkeypatch, capsys):
    from minirl import devices
    from minirl.cli import main
    monkeypatch.setattr(devices, "native_bf16", lambda device, cpuinfo=None: False)  # a CPU without it
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    assert main(["train", "--algo", "bc", "--dataset", "pendulum-random", "--scale", "smoke", "--steps", "2",
                 "--precision", "bf16", "--no-eval", "--set", "hidden=[8]", "--out", str(tmp_path / "run")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if "warning" in x]
    assert lines == ["minirl: warning: --precision bf16 on a CPU without native bfloat16 (no AVX-512 BF16 or AMX): "
                     "it is emulated, at about a twentieth of float32's rate on an AVX2 CPU; --precision auto or "
                     "float32 is faster here"]


def test_an_npz_with_unknown_keys_is_an_error_naming_them(tmp_path):
    ds = pendulum_like()
    np.savez(tmp_path / "extra.npz", **{k: getattr(ds, k) for k in FIELDS}, qpos=np.zeros(600), notes=np.zeros(3))
    with pytest.raises(UserError, match=r"extra.npz has 2 keys minirl does not read: qpos, notes; expected "
                                        r"observations, .* \(rename an extra array infos/<name> to keep it\)"):
        OfflineDataset.load(tmp_path / "extra.npz", action_low=-2.0, action_high=2.0)
    np.savez(tmp_path / "kept.npz", **{k: getattr(ds, k) for k in FIELDS}, **{"infos/qpos": np.zeros(600)})
    assert "qpos" in OfflineDataset.load(tmp_path / "kept.npz", action_low=-2.0, action_high=2.0).infos


def test_a_garbage_file_names_the_file_and_what_was_expected(tmp_path):
    (tmp_path / "garbage.npz").write_bytes(b"\x80\x04 not a dataset at all")
    with pytest.raises(UserError, match=r"garbage.npz is not a dataset file \(.*\); expected an .npz with the "
                                        r"arrays observations, actions"):
        OfflineDataset.load(tmp_path / "garbage.npz")
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(UserError, match=r"one.npy is not a dataset file .*one array"):
        OfflineDataset.load(tmp_path / "one.npy")
    ds = pendulum_like()
    np.savez(tmp_path / "short.npz", **{k: getattr(ds, k) for k in FIELDS if k != "timeouts"})
    with pytest.raises(UserError, match=r"short.npz has no timeouts; expected an .npz with the arrays"):
        OfflineDataset.load(tmp_path / "short.npz")


def test_an_hdf5_key_minirl_does_not_read_is_named_in_a_warning(tmp_path):
    h5py = pytest.importorskip("h5py")
    ds = pendulum_like()
    with h5py.File(tmp_path / "d.hdf5", "w") as f:
        for k in FIELDS:
            f[k] = getattr(ds, k)
        f["qpos"] = np.zeros(600)
        f["metadata/algorithm"] = "SAC"  # D4RL's notes: read by nobody, expected
    with pytest.warns(UserWarning, match=r"1 key not read \(qpos\)"):
        OfflineDataset.from_hdf5(tmp_path / "d.hdf5", action_low=-2.0, action_high=2.0)


@pytest.mark.parametrize("algo", ["bc", "bcq", "cql", "iql", "sac-offline"])
def test_act_on_one_observation_returns_one_action(algo):
    """Issue 73.7: IQL's act() on an observation of shape (3,) returned shape (1, 1)."""
    from minirl.runs import build_agent, make_config
    agent = build_agent(algo, 3, 2, -2.0 * np.ones(2), 2.0 * np.ones(2), make_config(algo, {"hidden": (8,)}
                                                                                      if algo in ("bc", "iql") else {}))
    assert agent.act(np.zeros(3, np.float32)).shape == (2,)
    assert agent.act(np.zeros((4, 3), np.float32)).shape == (4, 2)


def test_default_threads_honours_the_standard_variables(monkeypatch):
    from minirl.devices import default_threads
    for v in ("MINIRL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert default_threads() == 1  # issue 73.7: it took every core
    monkeypatch.setenv("MINIRL_THREADS", "2")
    assert default_threads() == 2  # minirl's own wins
    monkeypatch.delenv("MINIRL_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    with pytest.raises(UserError, match="OMP_NUM_THREADS must be a whole number of threads >= 1, got 'many'"):
        default_threads()
