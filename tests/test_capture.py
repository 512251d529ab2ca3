"""minirl.devices.CapturedStep: a training step recorded as a CUDA graph must be the eager step, replayed.

The equality tests run only where there is a CUDA GPU (benchmarks/gpu.sh runs them there); on a CPU they are skipped
with the reason. What a CPU can check runs everywhere: which tensors and optimisers the capture saves and restores.
"""
import copy
import math

import pytest
import torch

from minirl import devices, runs

from speed import synthetic_dataset

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="CUDA graphs need a CUDA GPU; this machine has none (benchmarks/gpu.sh runs "
                                       "this test on one)")


@pytest.fixture(scope="module")
def data():
    return synthetic_dataset(n=2_000, obs_dim=5, act_dim=2)


def small_agent(algo, data, device, **overrides):
    cfg = {**runs.get_scale("cpu").config_for(algo), **runs.algorithm(algo).for_steps(1_000), **overrides}
    return runs.make_agent(algo, data, device, **cfg)[0]


def test_the_capture_finds_every_network_tensor_and_the_optimiser_state(data):
    agent = small_agent("iql", data, "cpu")
    agent.update(data.sample(32))
    found = {id(t) for t in devices._state_tensors(agent)}
    for module in (agent.actor, agent.critic, agent.critic_target, agent.value):
        assert all(id(p) in found for p in module.state_dict(keep_vars=True).values())
    for opt in (agent.actor_opt, agent.critic_opt, agent.value_opt):
        moments = [t for s in opt.state.values() for t in s.values()]
        assert moments and all(id(t) in found for t in moments)
    assert set(devices._optimizers(agent)) == {agent.actor_opt, agent.critic_opt, agent.value_opt}


def test_the_capture_finds_a_tensor_attribute_and_its_optimiser(data):
    agent = small_agent("cql", data, "cpu")  # CQL's temperature log_alpha is a bare Parameter with its own Adam
    found = {id(t) for t in devices._state_tensors(agent)}
    assert id(agent.log_alpha) in found and agent.alpha_opt in devices._optimizers(agent)


def test_capturing_without_a_gpu_is_a_clear_error(data):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    agent = small_agent("bc", data, "cpu")
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        devices.CapturedStep(lambda: agent.update(data.sample(32)), agent)


@needs_cuda
@pytest.mark.parametrize("algo", ["bc", "bcq", "cql", "iql"])
def test_the_captured_step_is_the_eager_step(algo, data):
    agent = small_agent(algo, data, "cuda")  # IQL with its cosine schedule: a tensor learning rate, on the device
    twin = copy.deepcopy(agent)
    torch.cuda.manual_seed(3)
    eager = [{k: float(v) for k, v in agent.update(data.sample(64, "cuda")).items()} for _ in range(10)]
    torch.cuda.manual_seed(3)
    step = devices.CapturedStep(lambda: twin.update(data.sample(64, "cuda")), twin)
    for logs in eager:
        replay = {k: float(v) for k, v in step().items()}
        for k, v in logs.items():
            assert replay[k] == pytest.approx(v, rel=1e-4, abs=1e-5), k
    for name, module in vars(agent).items():
        if isinstance(module, torch.nn.Module):
            for (key, x), y in zip(module.state_dict().items(), getattr(twin, name).state_dict().values()):
                torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-5, msg=f"{name}.{key}")


@needs_cuda
def test_a_python_step_counter_follows_the_replays(data):
    agent = small_agent("iql", data, "cuda")
    step = devices.CapturedStep(lambda: agent.update(data.sample(64, "cuda")), agent)
    assert agent.step == 0
    for _ in range(4):
        step()
    assert agent.step == 4


@needs_cuda
def test_a_learning_rate_schedule_held_as_a_python_number_is_refused(data):
    agent = small_agent("bc", data, "cuda")

    def update_with_a_python_schedule():
        agent.opt.param_groups[0]["lr"] *= 0.99  # a Python number that changes every step: a graph would freeze it
        return agent.update(data.sample(64, "cuda"))
    with pytest.raises(ValueError, match="learning rate held as a Python number"):
        devices.CapturedStep(update_with_a_python_schedule, agent)


@needs_cuda
def test_train_with_capture_follows_iqls_schedule(data):
    from minirl.train import train
    agent = small_agent("iql", data, "cuda", max_steps=30)
    history = train(agent, data, 30, batch_size=64, device="cuda", log_every=10, progress=False, capture=True)
    lrs = [entry["actor_lr"] for entry in history["train"]]
    assert agent.step == 30 and len(lrs) == 3 and lrs[0] > lrs[1] > lrs[2] > 0
    assert all(math.isfinite(entry["critic_loss"]) for entry in history["train"])


@needs_cuda
@pytest.mark.parametrize("algo", ["bc", "bcq", "cql", "iql"])
def test_a_stack_of_seeds_captured_is_the_stack_eager(algo, data):
    from minirl import seeds
    agents = []
    for s in range(3):
        torch.manual_seed(s)
        agents.append(small_agent(algo, data, "cuda"))
    stacked = seeds.stack(agents)
    twin = copy.deepcopy(stacked)

    def batch():
        return seeds.stack_batches([data.sample(64, "cuda") for _ in range(3)])
    torch.cuda.manual_seed(3)
    eager = [{k: float(v) for k, v in stacked.update(batch()).items()} for _ in range(10)]
    torch.cuda.manual_seed(3)
    step = devices.CapturedStep(lambda: twin.update(batch()), twin)
    for logs in eager:
        replay = {k: float(v) for k, v in step().items()}
        for k, v in logs.items():
            assert replay[k] == pytest.approx(v, rel=1e-4, abs=1e-5), k


@needs_cuda
def test_train_captures_a_batch_of_seeds(data, tmp_path):
    from minirl.train import train
    agents = [small_agent("iql", data, "cuda", max_steps=30) for _ in range(3)]
    histories = train(agents, data, 30, batch_size=64, device="cuda", log_every=10, progress=False, capture=True,
                      seed=[0, 1, 2], out=[tmp_path / f"s{s}" for s in range(3)])
    assert len(histories) == 3 and all(len(h["train"]) == 3 for h in histories)
    assert all((tmp_path / f"s{s}" / "agent.pt").exists() for s in range(3))


def test_capture_off_a_gpu_is_a_one_line_error(data):
    from minirl.config import UserError
    from minirl.train import train
    agent = small_agent("bc", data, "cpu")
    with pytest.raises(UserError, match="--capture .* needs --device cuda, not cpu"):
        train(agent, data, 5, device="cpu", progress=False, capture=True)


@pytest.mark.parametrize("algo, setting, problem", [("iql", {"target_update_period": 2}, "target_update_period=2"),
                                                    ("cql", {"bc_steps": 10}, "bc_steps=10")])
def test_an_update_with_a_python_branch_on_the_step_says_it_cannot_be_captured(algo, setting, problem, data):
    assert small_agent(algo, data, "cpu").capture_problem() is None  # the papers' settings can be captured
    agent = small_agent(algo, data, "cpu", **setting)
    assert problem in agent.capture_problem()
    if algo == "cql":  # once the cloning phase is over, nothing step-dependent is left
        agent.step = 10
        assert agent.capture_problem() is None


def test_the_discrete_agents_target_copy_every_n_steps_cannot_be_captured():
    from minirl.discrete import DiscreteBCQ, DiscreteBCQConfig, DiscreteCQL
    assert DiscreteBCQ(4, 3).capture_problem() is None  # its default: a soft update every step
    every_8000 = DiscreteBCQ(4, 3, DiscreteBCQConfig(target_tau=1.0, target_update_every=8000))
    for agent in (every_8000, DiscreteCQL(4, 3)):  # DiscreteCQL copies its target every 8,000 steps by default
        assert "target_update_every=8000" in agent.capture_problem()
