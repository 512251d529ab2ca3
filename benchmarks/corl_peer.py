"""CORL's single-file IQL and CQL as timing peers for ``benchmarks/speed.py --corl DIR``.

CORL (Tarasov et al. 2022, github.com/tinkoff-ai/CORL) is not on PyPI and none of its code is copied here: the
benchmark imports ``DIR/algorithms/offline/iql.py`` and ``cql.py`` from a checkout the user provides. Those files
import ``d4rl``, ``wandb``, ``gym`` and ``pyrallis`` at the top for their training scripts; the timed code (the
networks, ``ImplicitQLearning.train`` / ``ContinuousCQL.train`` and ``ReplayBuffer.sample``) uses none of them, so
any of the four that is not installed is replaced while the file is imported: ``gym`` by ``gymnasium`` (the file
names ``gym.Env`` in annotations), ``pyrallis`` by a module whose ``wrap()`` decorator returns the function, the
other two by empty modules.

Each peer is built as CORL's own ``train(config)`` builds it from its ``TrainConfig`` defaults, except where minirl's
reference sizes differ (so that both sides do the same work; ``speed.py`` prints both parameter counts):
IQL: 2x256 networks, as CORL; CQL: CORL's defaults (3x256 critics and actor, 10 sampled actions, importance
sampling), the same as minirl's. One timed step is what CORL's loop does per step:
``batch = replay_buffer.sample(batch_size); trainer.train(batch)``.
"""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import torch

ALGOS = {"iql": "iql.py", "cql": "cql.py"}


def _standin(name: str) -> types.ModuleType:
    if name == "gym":
        import gymnasium
        return gymnasium
    module = types.ModuleType(name)
    if name == "pyrallis":
        module.wrap = lambda *args, **kwargs: (lambda fn: fn)
    return module


_STANDINS = ("d4rl", "wandb", "gym", "pyrallis")


def load_module(corl_dir: str | Path, algo: str) -> types.ModuleType:
    """Import CORL's ``algorithms/offline/<algo>.py`` from a checkout, with stand-ins for absent script imports."""
    path = Path(corl_dir) / "algorithms" / "offline" / ALGOS[algo]
    if not path.exists():
        raise FileNotFoundError(f"--corl {corl_dir}: {path} is missing (expected a checkout of tinkoff-ai/CORL)")
    added = []
    for name in _STANDINS:
        if importlib.util.find_spec(name) is None:
            sys.modules[name] = _standin(name)
            added.append(name)
    try:
        spec = importlib.util.spec_from_file_location(f"corl_{algo}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name in added:
            del sys.modules[name]
    return module


def _buffer(m, data, device: str):
    """CORL's ReplayBuffer holding the synthetic transitions (its ``load_d4rl_dataset`` takes D4RL's dict)."""
    buf = m.ReplayBuffer(data.obs_dim, data.act_dim, len(data), device)
    buf.load_d4rl_dataset({"observations": data.observations, "actions": data.actions, "rewards": data.rewards,
                           "next_observations": data.next_observations,
                           "terminals": data.terminals.astype(np.float32)})
    return buf


def make_iql(m, data, device: str):
    c = m.TrainConfig(device=device)
    q, v = m.TwinQ(data.obs_dim, data.act_dim).to(device), m.ValueFunction(data.obs_dim).to(device)
    actor = m.GaussianPolicy(data.obs_dim, data.act_dim, 1.0).to(device)
    trainer = m.ImplicitQLearning(
        max_action=1.0, actor=actor, actor_optimizer=torch.optim.Adam(actor.parameters(), lr=c.actor_lr),
        q_network=q, q_optimizer=torch.optim.Adam(q.parameters(), lr=c.qf_lr), v_network=v,
        v_optimizer=torch.optim.Adam(v.parameters(), lr=c.vf_lr), discount=c.discount, tau=c.tau, device=device,
        beta=c.beta, iql_tau=c.iql_tau, max_steps=c.max_timesteps)
    return trainer, [actor, q, v]


def make_cql(m, data, device: str):
    c = m.TrainConfig(device=device)
    critic_1 = m.FullyConnectedQFunction(data.obs_dim, data.act_dim, c.orthogonal_init, c.q_n_hidden_layers)
    critic_2 = m.FullyConnectedQFunction(data.obs_dim, data.act_dim, c.orthogonal_init)
    critic_1, critic_2 = critic_1.to(device), critic_2.to(device)
    actor = m.TanhGaussianPolicy(data.obs_dim, data.act_dim, 1.0, log_std_multiplier=c.policy_log_std_multiplier,
                                 orthogonal_init=c.orthogonal_init).to(device)
    trainer = m.ContinuousCQL(
        critic_1=critic_1, critic_2=critic_2,
        critic_1_optimizer=torch.optim.Adam(critic_1.parameters(), c.qf_lr),
        critic_2_optimizer=torch.optim.Adam(critic_2.parameters(), c.qf_lr),
        actor=actor, actor_optimizer=torch.optim.Adam(actor.parameters(), c.policy_lr), discount=c.discount,
        soft_target_update_rate=c.soft_target_update_rate, device=device, target_entropy=-float(data.act_dim),
        alpha_multiplier=c.alpha_multiplier, use_automatic_entropy_tuning=c.use_automatic_entropy_tuning,
        backup_entropy=c.backup_entropy, policy_lr=c.policy_lr, qf_lr=c.qf_lr, bc_steps=c.bc_steps,
        target_update_period=c.target_update_period, cql_n_actions=c.cql_n_actions,
        cql_importance_sample=c.cql_importance_sample, cql_lagrange=c.cql_lagrange,
        cql_target_action_gap=c.cql_target_action_gap, cql_temp=c.cql_temp, cql_alpha=c.cql_alpha,
        cql_max_target_backup=c.cql_max_target_backup, cql_clip_diff_min=c.cql_clip_diff_min,
        cql_clip_diff_max=c.cql_clip_diff_max)
    return trainer, [actor, critic_1, critic_2]


def make_peer(corl_dir: str | Path, algo: str, data, batch_size: int, device: str):
    """``(step, online networks)`` for CORL's ``algo``, or ``None`` when CORL has no single-file counterpart."""
    if algo not in ALGOS:
        return None
    m = load_module(corl_dir, algo)
    torch.manual_seed(0)
    trainer, networks = (make_iql if algo == "iql" else make_cql)(m, data, device)
    buf = _buffer(m, data, device)

    def step():
        trainer.train(buf.sample(batch_size))
    return step, networks
