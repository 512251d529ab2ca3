"""Behaviour cloning: the baseline every chapter compares to.

Supervised learning of the dataset's actions, no rewards:
    deterministic:  min_phi  E_(s,a)~D [ || pi_phi(s) - a ||^2 ]            (CORL's BC, TD3+BC with alpha = 0)
    gaussian:       min_phi  E_(s,a)~D [ -log pi_phi(a | s) ]               (the BC of the IQL paper: AWR with beta = 0)
BC recovers the behaviour policy's return when the data comes from one policy; on mixed-quality data it averages
good and bad actions, which is the gap that offline RL closes (``%BC``, filtered BC, and the later chapters).
``top_fraction`` (``--algo 10%bc`` sets 0.1) makes it filtered BC: the training loop keeps only the best fraction of
the dataset's episodes by return (:meth:`minirl.data.OfflineDataset.best_episodes`) before BC sees them.
``goal_pieces`` makes it goal-BC on a maze (:func:`minirl.maze.goal_pieces`): ``"reach"`` (``--algo goal-bc``) clones
the episodes that end at the task's goal, ``"from_start"`` (``--algo path-bc``) only their part from the last step
in the task's start cell, the best that any imitation of the data can copy. They are the stitching chapter's
imitation controls: they succeed where whole paths to the goal are in the data, and have nothing to copy where
they are not.

One difference from CORL's ``any_percent_bc.py``: :func:`mse_loss` SUMS the squared error over the action
dimensions (and averages over the batch), while CORL averages over both (``F.mse_loss``). The two losses differ by
the constant factor ``|A|``: same minimiser, and Adam's steps are invariant to a constant scaling of the loss (up
to its epsilon), so training is the same in practice. On Pendulum (``|A| = 1``) they are identical.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from .agent import Algorithm, load_state, state_of
from .config import LAYERS, POSITIVE, UserError, check_fields, interval
from .nets import DeterministicActor, GaussianActor, adam, batch_mean, obs_tensor


@dataclass
class BCConfig:
    hidden: tuple[int, ...] = (256, 256)  # actor layer sizes
    lr: float = 3e-4                      # Adam learning rate
    actor: Literal["deterministic", "gaussian"] = "deterministic"  # MSE, or negative log-likelihood
    normalize_states: bool = True         # train on (s - mean) / std of the dataset
    reward_scale: Literal["return_range"] | None = None  # BC ignores rewards
    top_fraction: float = 1.0             # clone only the best fraction of episodes by return (10%BC: 0.1)
    goal_pieces: Literal["off", "reach", "from_start"] = "off"  # mazes: clone only the pieces that reach the goal

    def __post_init__(self):
        check_fields(self, hidden=LAYERS, lr=POSITIVE, top_fraction=interval("(0, 1]"))
        if self.goal_pieces not in ("off", "reach", "from_start"):
            raise ValueError(f"goal_pieces must be 'off', 'reach' or 'from_start', got {self.goal_pieces!r}")
        if self.goal_pieces != "off" and self.top_fraction < 1.0:
            raise ValueError("goal_pieces and top_fraction are two filters: set one of them")


def mse_loss(pred_actions: torch.Tensor, data_actions: torch.Tensor) -> torch.Tensor:
    """``E || pi(s) - a ||^2``: squared error summed over action dimensions, averaged over the batch."""
    return batch_mean(((pred_actions - data_actions) ** 2).sum(-1))


def nll_loss(log_probs: torch.Tensor) -> torch.Tensor:
    """``-E log pi(a | s)`` for the dataset's actions."""
    return -batch_mean(log_probs)


class BC:
    seed_axis = True  # its update runs on K seeds stacked (minirl.seeds): the losses broadcast over a leading axis
    modules, optimizers = ("actor",), ("opt",)  # its pieces by name (minirl.agent)
    tensors, counters = (), ("step",)

    def __init__(self, obs_dim: int, act_dim: int, action_low=None, action_high=None,
                 config: BCConfig | None = None, device: str = "cpu"):
        self.cfg = cfg = config or BCConfig()
        if cfg.actor not in ("deterministic", "gaussian"):
            raise ValueError(f"BCConfig.actor must be 'deterministic' or 'gaussian', got {cfg.actor!r}")
        self.device = torch.device(device)
        actor_cls = DeterministicActor if cfg.actor == "deterministic" else GaussianActor
        self.actor = actor_cls(obs_dim, act_dim, cfg.hidden, action_low, action_high).to(self.device)
        self.opt = adam(self.actor.parameters(), cfg.lr)
        self.step = 0  # updates done so far

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.cfg.actor == "deterministic":
            return mse_loss(self.actor(batch["obs"]), batch["act"])
        return nll_loss(self.actor.log_prob(batch["obs"], batch["act"]))

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        loss = self.loss(batch)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.step += 1
        return {"actor_loss": loss.detach()}

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        # both actor kinds take (obs, deterministic)
        return self.actor(obs_tensor(obs, self.device), deterministic).cpu().numpy()

    state_dict, load_state_dict = state_of, load_state  # its declared pieces, counters and config (minirl.agent)


# --------------------------------------------------------------------------------------------------------------
# The --algo names built on BC (minirl.runs): what each clones
# --------------------------------------------------------------------------------------------------------------

def cloned_data(data, plan):
    """The data BC clones in a run (:func:`minirl.runs.run`): all of it; the best ``top_fraction`` of its episodes by
    return (10%BC; a maze dataset's episodes end at goal states, so there whole trajectories are ranked,
    :func:`minirl.maze.best_trajectories`); or the pieces of a maze's data that reach its goal (goal-BC, path-BC)."""
    from . import maze
    cfg, at = plan.config, plan.named and plan.named.maze  # the maze, its type and task; None off a maze
    if cfg.top_fraction < 1.0:
        return maze.best_trajectories(data, cfg.top_fraction) if at else data.best_episodes(cfg.top_fraction)
    if cfg.goal_pieces != "off":
        try:
            return maze.goal_pieces(data, at, from_start_cell=cfg.goal_pieces == "from_start")
        except ValueError as e:  # no such piece in this dataset: said in one line
            raise UserError(str(e)) from None
    return data


def needs_a_maze(plan) -> None:
    """goal-BC and path-BC clone the pieces that reach a maze's goal: any other dataset is an error before any work."""
    if plan.config.goal_pieces != "off" and (plan.named is None or plan.named.maze is None):
        raise UserError(f"{plan.algo} clones the pieces of a maze's data that reach its goal: it needs a maze dataset "
                        f"(pointmaze-...), got {plan.dataset!r}")


ALGORITHMS = tuple(Algorithm(name, BC, BCConfig, preset, data=cloned_data, check=needs_a_maze) for name, preset in (
    ("bc", {}),
    # filtered BC: behaviour cloning on the best 10% of episodes by return (Chen et al. 2021), the baseline that
    # tells whether an offline RL algorithm does more than pick the good episodes
    ("10%bc", {"top_fraction": 0.1}),
    # the maze's imitation controls: BC on the pieces of the data that reach the task's goal, and on their parts
    # from the task's start cell (minirl.maze.goal_pieces; none exist on the stitch datasets)
    ("goal-bc", {"goal_pieces": "reach"}),
    ("path-bc", {"goal_pieces": "from_start"}),
))
