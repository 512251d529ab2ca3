import json
import time

import numpy as np
import pytest
import torch

from minirl.bc import BC, BCConfig
from minirl.data import OfflineDataset
from minirl.data import RewardTransform
from minirl.cli import main
from minirl.evaluation import evaluate, value_check
from minirl.runs import ALGORITHMS, SCALES, get_scale, make_agent
from minirl.train import NonFiniteLossError, prepare_dataset, train


def pendulum_like(n=600, seed=0):
    """Random transitions shaped like Pendulum-v1 (obs 3, action 1 in [-2, 2]), 200-step episodes."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    timeouts = np.zeros(n, bool)
    timeouts[199::200] = True
    return OfflineDataset(observations=obs, actions=rng.uniform(-2, 2, (n, 1)).astype(np.float32),
                          rewards=rng.normal(size=n).astype(np.float32),
                          next_observations=np.roll(obs, -1, 0), terminals=np.zeros(n, bool), timeouts=timeouts,
                          action_low=-2.0, action_high=2.0)


def params(agent):
    return torch.cat([p.detach().flatten() for p in agent.actor.parameters()])


TIMING = ("updates_per_s", "update_s", "update_cpu_s")


def strip_timing(history):
    return {k: [{kk: vv for kk, vv in e.items() if kk not in TIMING} for e in v] for k, v in history.items()
            if k != "segments_s"}


def test_scales(monkeypatch):
    monkeypatch.setenv("MINIRL_SCALE", "full")
    assert get_scale().steps == 1_000_000 and get_scale().batch_size == 256
    assert get_scale("smoke").steps < get_scale("cpu").steps < get_scale("full").steps
    monkeypatch.setenv("MINIRL_SCALE", "huge")
    with pytest.raises(ValueError, match="MINIRL_SCALE must be smoke .*, cpu .* or full .*, got 'huge'"):
        get_scale()
    assert set(SCALES) == {"smoke", "cpu", "full"}


@pytest.mark.parametrize("checkpoint_every", [30, 25])
def test_resume_gives_the_same_numbers(tmp_path, checkpoint_every):
    # 25: the checkpoint falls between two log steps (10, 20, 30...); the update logs averaged into the entry at 30
    # are those of steps 21-30 in both runs, half of them made before the stop
    ds = pendulum_like()
    kw = dict(eval_env="Pendulum-v1", eval_every=30, eval_episodes=2, log_every=10, seed=3, progress=False)
    torch.manual_seed(0)
    a = BC(3, 1, -2, 2)
    straight = train(a, ds, 60, out=tmp_path / "a", checkpoint_every=checkpoint_every, **kw)
    torch.manual_seed(0)
    b1 = BC(3, 1, -2, 2)
    # the first run gets past its last checkpoint (30) before it stops at 45: the resumed run starts from 30 and
    # its logs must not keep the lines 31..45 of the interrupted run twice
    train(b1, ds, 45, out=tmp_path / "b", checkpoint_every=checkpoint_every, **kw)
    at_checkpoint = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=False)["update_s"]
    torch.manual_seed(123)  # a fresh process builds a fresh agent: its initial weights must not matter
    b2 = BC(3, 1, -2, 2)
    resumed = train(b2, ds, 60, out=tmp_path / "b", checkpoint_every=checkpoint_every, resume=True, **kw)
    assert torch.equal(params(a), params(b2))
    assert strip_timing(straight) == strip_timing(resumed)
    lines_a = [json.loads(x) for x in (tmp_path / "a" / "log.jsonl").read_text().splitlines()]
    lines_b = [json.loads(x) for x in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in e.items() if k not in TIMING} for e in lines_a] == \
           [{k: v for k, v in e.items() if k not in TIMING} for e in lines_b]
    assert (tmp_path / "b" / "eval.csv").read_text().splitlines()[0] == "step,return_mean,return_std"
    assert (tmp_path / "b" / "agent.pt").exists()
    # the wall time of each part of a run: one part straight through, two when resumed (the first up to its checkpoint)
    assert len(straight["segments_s"]) == 1 and len(resumed["segments_s"]) == 2
    assert all(isinstance(t, float) and t > 0 for t in straight["segments_s"] + resumed["segments_s"])
    # the update time since step 0: growing from entry to entry, carried across the resume, never above the wall time
    for history, segments in ((straight, straight["segments_s"]), (resumed, resumed["segments_s"])):
        update_s = [e["update_s"] for e in history["train"]]
        assert len(update_s) == 6 and all(0 < a < b for a, b in zip(update_s, update_s[1:]))
        assert update_s[-1] <= sum(segments)
    assert at_checkpoint > 0
    resumed_part = [e for e in resumed["train"] if e["step"] > checkpoint_every]
    assert all(e["update_s"] > at_checkpoint for e in resumed_part)  # the resumed part adds to the first part's
    # the rate is this part's mean: over the resumed part's own steps and seconds
    assert resumed_part[-1]["updates_per_s"] == pytest.approx(
        (60 - checkpoint_every) / (resumed_part[-1]["update_s"] - at_checkpoint), rel=1e-6)


def test_a_checkpoint_without_segment_times_resumes_with_the_earlier_time_unknown(tmp_path):
    ds = pendulum_like()
    kw = dict(log_every=10, seed=3, progress=False, checkpoint_every=10)
    train(BC(3, 1, -2, 2), ds, 20, out=tmp_path, **kw)
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert len(ck["segments_s"]) == 1 and ck["segments_s"][0] > 0
    del ck["segments_s"]                                   # as written before checkpoints recorded it
    torch.save(ck, tmp_path / "checkpoint.pt")
    history = train(BC(3, 1, -2, 2), ds, 30, out=tmp_path, resume=True, **kw)
    assert history["segments_s"][0] is None and history["segments_s"][1] > 0


def test_a_checkpoint_without_update_time_resumes_with_it_unknown(tmp_path):
    ds = pendulum_like()
    kw = dict(log_every=10, seed=3, progress=False, checkpoint_every=10)
    train(BC(3, 1, -2, 2), ds, 20, out=tmp_path, **kw)
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    del ck["update_s"]                                     # as written before checkpoints recorded it
    torch.save(ck, tmp_path / "checkpoint.pt")
    history = train(BC(3, 1, -2, 2), ds, 40, out=tmp_path, resume=True, **kw)
    assert [e["step"] for e in history["train"]] == [10, 20, 30, 40]
    assert "update_s" in history["train"][0] and all("update_s" not in e for e in history["train"][2:])
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert ck["update_s"] is None                          # and stays unknown in later checkpoints


def test_update_cpu_time_leaves_out_what_the_clock_counts_while_the_process_does_not_run(tmp_path):
    # an update that sleeps stands for a process stopped (kill -STOP) or waiting for a core: the clock counts the
    # sleep, the process's CPU time does not
    class SleepyBC(BC):
        def update(self, batch):
            time.sleep(0.02)
            return super().update(batch)

    ds = pendulum_like()
    kw = dict(log_every=10, seed=3, progress=False, checkpoint_every=20)
    history = train(SleepyBC(3, 1, -2, 2), ds, 20, out=tmp_path, **kw)
    (first, last) = history["train"]
    assert last["update_s"] >= 20 * 0.02                                  # every sleep is on the clock
    assert 0 < first["update_cpu_s"] < last["update_cpu_s"] < last["update_s"] - 15 * 0.02
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert ck["update_cpu_s"] == pytest.approx(last["update_cpu_s"], abs=0.05)
    resumed = train(BC(3, 1, -2, 2), ds, 30, out=tmp_path, resume=True, **kw)
    assert resumed["train"][-1]["update_cpu_s"] > ck["update_cpu_s"]     # carried across the resume
    del ck["update_cpu_s"]                                                 # as written before checkpoints recorded it
    torch.save(ck, tmp_path / "checkpoint.pt")
    resumed = train(BC(3, 1, -2, 2), ds, 30, out=tmp_path, resume=True, **kw)
    assert "update_cpu_s" not in resumed["train"][-1] and "update_s" in resumed["train"][-1]


def test_same_seed_same_numbers_different_seed_different():
    ds = pendulum_like()
    runs = []
    for seed in (0, 0, 1):
        torch.manual_seed(0)  # same initial weights: only the training seed (batches) differs
        agent = BC(3, 1, -2, 2)
        train(agent, ds, 20, seed=seed, progress=False)
        runs.append(params(agent))
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])


class ExplodingAgent:
    def __init__(self, at_step):
        self.at, self.n = at_step, 0

    def update(self, batch):
        self.n += 1
        return {"actor_loss": 1.0, "critic_loss": float("nan") if self.n == self.at else 0.5}


def test_nan_loss_stops_with_the_loss_and_step():
    with pytest.raises(NonFiniteLossError, match=r"critic_loss is nan at step 7"):
        train(ExplodingAgent(7), pendulum_like(), 20, progress=False)


def test_without_a_sync_per_step_a_nan_is_reported_with_its_window():
    # what a GPU run does by default: the losses are summed on the device and read once per log step
    with pytest.raises(NonFiniteLossError, match=r"critic_loss is nan in steps 6-10"):
        train(ExplodingAgent(7), pendulum_like(), 20, log_every=5, progress=False, sync_every_step=False)


def test_deferred_logs_average_the_same_numbers():
    ds = pendulum_like()
    histories = []
    for sync in (True, False):
        torch.manual_seed(0)
        histories.append(train(BC(3, 1, -2, 2), ds, 25, log_every=10, seed=1, progress=False,
                               sync_every_step=sync)["train"])
    a, b = histories
    assert [e["step"] for e in a] == [e["step"] for e in b] == [10, 20, 25]
    for ea, eb in zip(a, b):  # float64 sums on the host vs float32 sums on the device
        assert ea["actor_loss"] == pytest.approx(eb["actor_loss"], rel=1e-5)


def test_inf_loss_is_caught_too():
    class Inf(ExplodingAgent):
        def update(self, batch):
            return {"q_loss": float("inf")}
    with pytest.raises(NonFiniteLossError, match=r"q_loss is inf at step 1"):
        train(Inf(1), pendulum_like(), 5, progress=False)


def test_argument_errors(tmp_path):
    ds = pendulum_like()
    with pytest.raises(ValueError, match="eval_every is set but eval_env is None"):
        train(BC(3, 1, -2, 2), ds, 5, eval_every=2, progress=False)
    with pytest.raises(ValueError, match="checkpoint_every needs out="):
        train(BC(3, 1, -2, 2), ds, 5, checkpoint_every=2, progress=False)
    with pytest.raises(ValueError, match="resume=True needs out="):
        train(BC(3, 1, -2, 2), ds, 5, resume=True, progress=False)


def test_evaluate_is_seeded_and_batched():
    class Zero:
        calls = []

        def act(self, obs, deterministic=True):
            self.calls.append(len(obs))
            return np.zeros((len(obs), 1), np.float32)
    agent = Zero()
    r1 = evaluate(agent, "Pendulum-v1", episodes=3, seed=5)
    r2 = evaluate(agent, "Pendulum-v1", episodes=3, seed=5)
    assert r1.shape == (3,) and np.array_equal(r1, r2) and len(set(r1)) == 3
    assert agent.calls[0] == 3 and len(agent.calls) == 2 * 200  # one batched call per step, 200-step episodes


def test_episodes_keep_each_episodes_states_as_the_environment_gave_them():
    from minirl.evaluation import run_episodes
    from minirl.utils import make_env

    class Push:  # full torque: on Hopper each episode ends at its own step when the hopper falls
        def act(self, obs, deterministic=True):
            return np.ones((len(obs), 3), np.float32)
    ep = run_episodes(Push(), "Hopper-v5", 3, seed=7, state_normalizer=None, keep_states=True)
    assert all(len(s) < 1000 for s in ep["states"])  # the hopper falls before the time limit
    for i, states in enumerate(ep["states"]):
        env = make_env("Hopper-v5")
        obs = env.reset(seed=7 + i)[0]
        for t in range(len(states)):  # replaying the same actions gives the same states, one per action taken
            assert np.allclose(states[t], obs, atol=1e-6), (i, t)
            obs, _, term, trunc, _ = env.step(np.ones(3, np.float32))
        assert term or trunc  # the episode ended at the last kept state's action
        env.close()
    assert "states" not in run_episodes(Push(), "Hopper-v5", 1, seed=7, state_normalizer=None)


def test_value_check_compares_the_critic_with_the_discounted_return():
    """q_start is min_k Q_k(s0, pi(s0)) in raw reward units; mc_discounted is sum_t gamma^t r_t, computed here by hand."""
    import gymnasium as gym
    from types import SimpleNamespace

    class Critic(torch.nn.Module):  # two "critics": Q_1 = 3 + sum(s), Q_2 = 5 + sum(s); the smaller is Q_1
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, obs, act):
            base = obs.sum(-1) + 0 * act.sum(-1) + self.w
            return torch.stack([base + 3.0, base + 5.0])

    class Agent:
        modules = ("critic",)  # declared, as minirl.agent.Agent asks
        cfg = SimpleNamespace(gamma=0.9)
        critic = Critic()

        def act(self, obs, deterministic=True):
            return np.full((len(obs), 1), 0.5, np.float32)

    check = value_check(Agent(), "Pendulum-v1", episodes=2, seed=3, reward_transform=RewardTransform(scale=2.0))
    starts, expected = [], []
    for i in range(2):
        env = gym.make("Pendulum-v1")
        obs, _ = env.reset(seed=3 + i)
        starts.append(obs.astype(np.float32))
        total, t, done = 0.0, 0, False
        while not done:
            obs, r, term, trunc, _ = env.step(np.array([0.5], np.float32))
            total += 0.9 ** t * r
            t, done = t + 1, term or trunc
        expected.append(total)
    assert check["mc_discounted"] == pytest.approx(np.mean(expected), rel=1e-9)
    assert check["returns"].shape == (2,)
    assert np.array_equal(check["returns"], evaluate(Agent(), "Pendulum-v1", episodes=2, seed=3))
    assert check["q_start"] == pytest.approx((3.0 + np.mean([s.sum() for s in starts])) / 2.0, rel=1e-5)
    with pytest.raises(TypeError, match="BC has no critic to check"):
        value_check(BC(3, 1, -2, 2), "Pendulum-v1", episodes=1)


def test_training_logs_the_value_check_for_agents_with_a_critic(tmp_path):
    ds = pendulum_like()
    iql, _ = make_agent("iql", ds, hidden=(16, 16))
    bc, _ = make_agent("bc", ds, hidden=(16, 16))
    h_iql = train(iql, ds, 4, eval_env="Pendulum-v1", eval_every=2, eval_episodes=1, progress=False)
    h_bc = train(bc, ds, 4, eval_env="Pendulum-v1", eval_every=2, eval_episodes=1, progress=False)
    assert all({"q_start", "mc_discounted"} <= set(e) for e in h_iql["eval"])
    assert not any("q_start" in e for e in h_bc["eval"])


def test_prepare_dataset_and_make_agent():
    ds = pendulum_like()
    data, state, reward = prepare_dataset(ds, normalize_states=True, reward_scale="return_range")
    assert np.allclose(data.observations.mean(0), 0, atol=1e-4)
    assert np.allclose(state.inverse(data.observations), ds.observations, atol=1e-4)
    returns = data.episode_returns()
    assert returns.max() - returns.min() == pytest.approx(1000, rel=1e-4)
    assert prepare_dataset(ds) == (ds, None, None)
    with pytest.raises(ValueError, match="reward_scale must be None or 'return_range'"):
        prepare_dataset(ds, reward_scale="max")
    agent, cfg = make_agent("bc", ds, lr=1e-3, hidden=(32, 32))
    assert isinstance(agent, BC) and cfg == BCConfig(lr=1e-3, hidden=(32, 32))
    with pytest.raises(ValueError, match="BCConfig has no field 'learning_rate'"):
        make_agent("bc", ds, learning_rate=1e-3)
    with pytest.raises(ValueError, match="unknown algorithm 'dqn'"):
        make_agent("dqn", ds)


def test_cli_train_writes_logs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    out = tmp_path / "run"
    assert main(["train", "--algo", "bc", "--dataset", "pendulum-medium", "--scale", "smoke", "--steps", "50",
                 "--eval-every", "50", "--eval-episodes", "2", "--out", str(out),
                 "--set", "hidden=[32,32]", "--amp"]) == 0
    printed = capsys.readouterr().out
    assert "scale=smoke steps=50" in printed and "normalised score" in printed
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["config"]["hidden"] == [32, 32] and cfg["steps"] == 50 and cfg["precision"] == "bf16"  # --amp
    evals = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines() if '"eval"' in x]
    assert evals[-1]["step"] == 50 and "score_mean" in evals[-1]


def test_scale_steps_per_algorithm_and_evaluation_period():
    from minirl.runs import SCALES, _eval_every
    cpu = SCALES["cpu"]
    assert {cpu.steps_for(a) for a in ALGORITHMS} == {cpu.steps} == {50_000}  # equal budgets at the cpu scale
    assert SCALES["smoke"].steps_for("cql") < SCALES["smoke"].steps  # only smoke gives slow updates fewer steps
    assert _eval_every(cpu, 50_000) == 5_000
    assert _eval_every(cpu, 1_200) == 300  # a short run still gets 4 evaluations
    assert _eval_every(SCALES["smoke"], 200) == 100


def test_the_cpu_scale_sets_smaller_cql_and_bcq_sizes_and_the_user_overrides_them(tmp_path, monkeypatch):
    from minirl.runs import SCALES, plan_run
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    cpu, full = SCALES["cpu"], SCALES["full"]
    for algo in ("cql", "cql-lagrange", "sac-offline"):
        cfg = plan_run(algo, "hopper-medium", scale="cpu", out=tmp_path / algo).config
        assert (cfg.actor_hidden, cfg.critic_hidden, cfg.n_actions) == ((256, 256), (256, 256), 4)
        assert plan_run(algo, "hopper-medium", scale="full", out=tmp_path / algo).config.n_actions == 10
    assert plan_run("cql-lagrange", "hopper-medium", scale="cpu", out=tmp_path / "l").config.lagrange  # preset kept
    assert plan_run("bcq", "hopper-medium", scale="cpu", out=tmp_path / "b").config.vae_hidden == (256, 256)
    assert plan_run("bcq", "hopper-medium", scale="full", out=tmp_path / "b").config.vae_hidden == (750, 750)
    mine = plan_run("cql", "hopper-medium", scale="cpu", out=tmp_path / "c", overrides={"n_actions": 10}).config
    assert mine.n_actions == 10 and mine.critic_hidden == (256, 256)  # the user's setting wins, field by field
    assert cpu.config_for("iql") == {} and full.config_for("cql") == {}


def test_compile_agent_keeps_names_and_numbers():
    # aot_eager traces and runs the graphs without generating code: the wiring is tested, quickly
    from minirl.devices import compile_agent
    ds = pendulum_like()
    histories, keys = [], []
    for compiled in (False, True):
        torch.manual_seed(0)
        agent = BC(3, 1, -2, 2)
        if compiled:
            assert compile_agent(agent, backend="aot_eager") == ["actor"]
        histories.append(train(agent, ds, 12, log_every=4, seed=1, progress=False)["train"])
        keys.append(sorted(agent.state_dict()["actor"]))
    assert keys[0] == keys[1]  # in place: checkpoints load either way
    for a, b in zip(*histories):
        assert a["actor_loss"] == pytest.approx(b["actor_loss"], rel=1e-5)
    with pytest.raises(ValueError, match="no torch.nn.Module"):
        compile_agent(object())


def test_amp_trains_in_bfloat16_with_float32_parameters(tmp_path):
    ds = pendulum_like()
    runs = {}
    for amp in (False, True):
        torch.manual_seed(0)
        agent = BC(3, 1, -2, 2)
        runs[amp] = train(agent, ds, 40, log_every=20, seed=1, progress=False,
                          **({"amp": True} if amp else {"precision": "float32"}))["train"]
        assert all(p.dtype == torch.float32 for p in agent.actor.parameters())
    # the same run up to bfloat16 rounding: close, not equal
    for full, mixed in zip(runs[False], runs[True]):
        assert mixed["actor_loss"] != full["actor_loss"]
        assert mixed["actor_loss"] == pytest.approx(full["actor_loss"], rel=0.05)


def test_amp_needs_bfloat16_on_a_gpu(monkeypatch):
    from minirl.devices import autocast
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "an old GPU")
    with pytest.raises(ValueError, match="amp=True needs bfloat16 support, which an old GPU lacks"):
        autocast("cuda", True)
    assert not torch.is_autocast_enabled("cpu")
    with autocast("cpu", True):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    with autocast("cpu", False):
        assert not torch.is_autocast_enabled("cpu")


def test_compile_modes_reach_torch_compile(monkeypatch):
    from minirl import cli, devices
    calls = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: calls.append(kw))
    agent = BC(3, 1, -2, 2)
    assert devices.compile_agent(agent, mode="reduce-overhead") == ["actor"]
    assert calls == [{"backend": "inductor", "mode": "reduce-overhead"}]
    with pytest.raises(ValueError, match="compile mode must be one of"):
        devices.compile_agent(agent, mode="fast")
    with pytest.raises(ValueError, match="needs the inductor backend"):
        devices.compile_agent(agent, backend="aot_eager", mode="max-autotune")
    # the command line: --compile alone, with a mode, and not at all
    seen = []
    monkeypatch.setattr(cli, "run", lambda *a, **kw: seen.append(kw["compile"]))
    base = ["train", "--algo", "bc", "--dataset", "pendulum-medium"]
    for extra in ([], ["--compile"], ["--compile", "reduce-overhead"]):
        assert main(base + extra) == 0
    assert seen == [False, True, "reduce-overhead"]
    with pytest.raises(SystemExit):
        main(base + ["--compile", "fast"])


def test_filtered_bc_trains_on_the_best_tenth_of_episodes(tmp_path, monkeypatch):
    """`--algo 10%bc` is BC with top_fraction=0.1: the run keeps the best 10% of episodes before BC sees them (its
    state normaliser is that of the filtered data, not of the whole dataset)."""
    from minirl.data import StateNormalizer
    from minirl.datasets import load_dataset
    from minirl.runs import get_scale, run
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "cache"))
    run("10%bc", "pendulum-medium-expert", scale="smoke", steps=5, out=tmp_path / "run", evaluate=False,
        progress=False)
    saved = StateNormalizer.from_state_dict(torch.load(tmp_path / "run" / "agent.pt", weights_only=False)[
        "state_normalizer"])
    raw = load_dataset("pendulum-medium-expert", get_scale("smoke").dataset_size, progress=False)
    assert saved == raw.best_episodes(0.1).state_normalizer() and saved != raw.state_normalizer()


def test_default_device_and_threads(monkeypatch):
    from minirl import devices
    from minirl.config import UserError
    monkeypatch.delenv("MINIRL_DEVICE", raising=False)
    monkeypatch.delenv("MINIRL_THREADS", raising=False)
    assert devices.device_works("cpu") is True
    assert devices.device_works("meta") is False  # tensors without data: the update cannot give a number
    assert devices.default_device() == "cpu"      # no GPU here
    # a Mac: MPS is used when a small update runs on it, else the CPU (MPS itself is not available here)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(devices, "device_works", lambda device: device == "mps")
    assert devices.default_device() == "mps"
    monkeypatch.setattr(devices, "device_works", lambda device: False)
    assert devices.default_device() == "cpu"
    monkeypatch.setenv("MINIRL_DEVICE", "cuda")
    with pytest.raises(UserError, match="--device cuda"):
        devices.default_device()
    monkeypatch.setenv("MINIRL_DEVICE", "cpu")
    assert devices.default_device() == "cpu"
    assert devices.default_threads() >= 1
    monkeypatch.setenv("MINIRL_THREADS", "1")
    assert devices.default_threads() == 1
    for bad in ("0", "two", "1.5"):
        monkeypatch.setenv("MINIRL_THREADS", bad)
        with pytest.raises(UserError, match="MINIRL_THREADS must be"):
            devices.default_threads()


def test_the_default_precision_is_bfloat16_only_where_the_hardware_has_it(monkeypatch):
    from minirl import devices
    ds = pendulum_like()
    histories = {}
    for native in (True, False):
        monkeypatch.setattr(devices, "native_bf16", lambda device, native=native: native)
        assert devices.resolve_precision(devices.requested_precision(None, False), "cpu") == ("bf16" if native else "float32")
        resolved = "bf16" if native else "float32"
        for precision in (None, resolved):
            torch.manual_seed(0)
            histories[native, precision] = train(BC(3, 1, -2, 2), ds, 8, log_every=4, seed=1, progress=False,
                                                 precision=precision)["train"]
        # the default is the same run as asking for what it resolved to, bit for bit
        assert strip_timing({"t": histories[native, None]}) == strip_timing({"t": histories[native, resolved]})
    assert histories[True, None][-1]["actor_loss"] != histories[False, None][-1]["actor_loss"]


def test_estimate_seconds_times_a_copy_and_leaves_the_agent_alone():
    from minirl.train import describe_seconds, estimate_seconds
    ds = pendulum_like()
    torch.manual_seed(0)
    agent = BC(3, 1, -2, 2)
    before = {k: v.clone() for k, v in agent.actor.state_dict().items()}
    seconds = estimate_seconds(agent, ds, 1_000, batch_size=32, probe_seconds=0.05)
    assert 0 < seconds < 1_000  # a BC update on 32 samples takes far less than a second
    assert all(torch.equal(before[k], v) for k, v in agent.actor.state_dict().items())
    assert estimate_seconds(agent, ds, 0, batch_size=32, probe_seconds=0.01) == 0
    assert [describe_seconds(x) for x in (40, 720, 9000)] == ["about 40 s", "about 12 min", "about 2.5 h"]


def test_tensorboard_event_files_hold_the_logs(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ds = pendulum_like()
    torch.manual_seed(0)
    history = train(BC(3, 1, -2, 2), ds, 6, log_every=2, eval_env="Pendulum-v1", eval_every=3, eval_episodes=1,
                    out=tmp_path, tensorboard=True, progress=False)
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    loss = [(e.step, e.value) for e in events.Scalars("train/actor_loss")]
    assert loss == [(e["step"], pytest.approx(e["actor_loss"], rel=1e-6)) for e in history["train"]]
    assert [e.step for e in events.Scalars("eval/return_mean")] == [3, 6]
    with pytest.raises(ValueError, match="tensorboard=True needs out="):
        train(BC(3, 1, -2, 2), ds, 2, tensorboard=True, progress=False)
    import builtins
    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("torch.utils.tensorboard"):
            raise ImportError("no tensorboard")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    from minirl.config import UserError
    with pytest.raises(UserError, match=r"--tensorboard needs the tensorboard package: pip install -e '.\[tensorboard\]'"):
        train(BC(3, 1, -2, 2), ds, 2, out=tmp_path / "b", tensorboard=True, progress=False)


def test_cli_tensorboard_flag(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    out = tmp_path / "run"
    assert main(["train", "--algo", "bc", "--dataset", "pendulum-medium", "--scale", "smoke", "--steps", "20",
                 "--eval-every", "20", "--eval-episodes", "1", "--out", str(out), "--set", "hidden=[16,16]",
                 "--tensorboard"]) == 0
    assert list(out.glob("events.out.tfevents.*"))


def test_minirl_precision_decides_for_a_run_that_names_none(monkeypatch):
    """On a bfloat16 machine MINIRL_PRECISION=float32 trains the notebooks' runs as a laptop without it does."""
    from minirl import devices
    from minirl.config import UserError
    monkeypatch.setattr(devices, "native_bf16", lambda device: True)
    monkeypatch.delenv("MINIRL_PRECISION", raising=False)
    assert devices.default_precision("cpu") == "bf16"
    monkeypatch.setenv("MINIRL_PRECISION", "float32")
    assert devices.default_precision("cpu") == "float32"
    assert devices.requested_precision("bf16", False) == "bf16"  # a precision asked for wins
    ds = pendulum_like()
    runs = {}
    for precision in (None, "float32"):
        torch.manual_seed(0)
        runs[precision] = train(BC(3, 1, -2, 2), ds, 8, log_every=4, seed=1, progress=False,
                                precision=precision)["train"]
    assert strip_timing({"t": runs[None]}) == strip_timing({"t": runs["float32"]})
    monkeypatch.setenv("MINIRL_PRECISION", "fp32")
    with pytest.raises(UserError, match=r"\$MINIRL_PRECISION must be one of auto, float32, bf16, got 'fp32'"):
        devices.default_precision("cpu")
