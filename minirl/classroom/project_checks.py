"""The end-to-end assignment (``notebooks/exercises/06_project.ipynb``): continuous CQL, written, trained and swept.

The student writes one update of ``minirl.cql.CQL`` (CQL(H) with importance-sampled proposals on SAC), trains it on
``pendulum-expert`` and sweeps the penalty's weight alpha. Two graded parts:

* :func:`check_cql_update` (an *agent* task): the update, compared step by step with ``CQL.update`` from the same
  seed on :func:`~minirl.classroom.agent_checks.continuous_exercise`'s small fixed data, as the other agent tasks;
* :func:`check_penalty_sweep` (an *experiment* task), two checks:

  1. a small sweep on inputs nobody knows in advance (:func:`replay_setting`: two of :data:`PROJECT_ALPHAS`, one
     seed and a few dozen updates, drawn per grading run), trained with minirl's own ``CQL.update``: the scores the
     student's sweep returns must equal the grader's own run of that sweep (:func:`penalty_sweep_reference`, the
     same loop, so the same numbers to the last bit). A sweep that returns constants, trains too briefly, or swaps in
     a policy trained some other way gets other numbers;
  2. the student's update trained once through the student's sweep at the grading setting :data:`GRADING` (alpha 5,
     4,000 updates, seed 100): the policy must reach the reference's distribution, at least the lowest score of
     minirl's own ``CQL.update`` over the 20 seeds of ``results/assignment/reference.json`` minus :data:`TOLERANCE`
     points. The score is not the one the sweep reports: the check keeps the agent the sweep's run updated and
     returns its actor's weights and counters (plain data), and the verdict evaluates that policy itself
     (:func:`score_of_actor`, in the grader's process when grading). The reference's runs and the scores of broken
     updates at the same setting come from ``experiments/assignment_reference.py``.

  While the sweep runs, minirl's other learners cannot (:func:`other_learners`): no policy of minirl's BC, IQL,
  TD3+BC, BCQ or SAC can stand in for the one the sweep trains.

The networks are small (2 x 64, N = 4 sampled actions per proposal) so that a run of 4,000 updates takes about a
minute on one core; the sweep the student runs (4 alphas x 3 seeds x 5,000 updates) about 11 minutes.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .agent_checks import _check_agent, _method, _values, continuous_exercise
from .checks import Checks, Ref

DATASET = "pendulum-expert"                   # narrow data: offline SAC (alpha = 0) fails on it
HIDDEN = (64, 64)                             # actor and critics
N_ACTIONS = 4                                 # N: sampled actions per proposal (uniform, pi(.|s), pi(.|s'))
PROJECT_ALPHAS = (0.0, 1.0, 5.0, 20.0)        # the sweep of the assignment
GRADING = {"cql_alpha": 5.0, "steps": 4000, "seed": 100}  # the graded training run
EVAL_EPISODES = 20
TOLERANCE = 10.0                              # normalised-score points below the reference's lowest seed
REFERENCE_FILE = Path(__file__).resolve().parents[2] / "results" / "assignment" / "reference.json"


def make_cql(cql_alpha: float = 5.0, seed: int = 0, dims: tuple = (3, 1, -2.0, 2.0)):
    """The assignment's CQL: 2 x 64 networks, N = 4, the paper's learning rates, fixed alpha (no Lagrange), the
    deterministic backup; seeded. ``dims`` = (obs_dim, act_dim, action low, action high), Pendulum's by default."""
    import torch

    from ..cql import CQL, CQLConfig
    torch.manual_seed(seed)
    cfg = CQLConfig(actor_hidden=HIDDEN, critic_hidden=HIDDEN, n_actions=N_ACTIONS, cql_alpha=cql_alpha)
    return CQL(*dims, config=cfg)


def make_exercise_cql(seed: int = 0):
    """CQL for :func:`continuous_exercise` (the update check): 32-32 networks, N = 3, alpha 1, gamma 0.9, faster
    learning rates so that 20 updates move the networks; raw states; seeded."""
    import torch

    from ..cql import CQL, CQLConfig
    torch.manual_seed(seed)
    cfg = CQLConfig(actor_hidden=(32, 32), critic_hidden=(32, 32), n_actions=3, cql_alpha=1.0, gamma=0.9, tau=0.05,
                    actor_lr=1e-3, critic_lr=3e-3, alpha_lr=1e-3, normalize_states=False)
    return CQL(2, 1, -1.0, 1.0, config=cfg)


_DATA: dict = {}


def project_data():
    """``(dataset, state_normalizer)``: :data:`DATASET`, states normalised as CQL trains on them, kept for the
    process. Read from minirl.datasets' cache where it is there (the grader fills it before it forks:
    ``sandbox.warm``); made otherwise (a rollout of about 100,000 steps, 6 s of CPU) without writing the cache, which a
    grading process may not write."""
    if not _DATA:
        from .. import datasets
        from ..train import prepare_dataset
        cached = datasets.cache_path(DATASET).exists()
        raw = (datasets.load_dataset if cached else datasets.make_dataset)(DATASET, progress=False)
        data, normalizer, _ = prepare_dataset(raw, normalize_states=True)
        _DATA["data"] = data, normalizer
    return _DATA["data"]


def train_and_score(update, cql_alpha: float, seed: int, steps: int, progress: bool = False) -> float:
    """Train :func:`make_cql` ``(cql_alpha, seed)`` on :data:`DATASET` for ``steps`` calls of ``update(agent, batch)``
    (``None``: the agent's own ``CQL.update``) with minirl's training loop, then return the normalised score of its
    deterministic policy over :data:`EVAL_EPISODES` episodes (float32, one thread)."""
    import torch

    from ..train import train
    data, normalizer = project_data()
    agent = make_cql(cql_alpha, seed, (data.obs_dim, data.act_dim, data.action_low, data.action_high))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = train(agent, data, steps, eval_env="Pendulum-v1", eval_every=steps, eval_episodes=EVAL_EPISODES,
                    task="pendulum", seed=seed, state_normalizer=normalizer, progress=progress,
                    precision="float32", update=update)
    finally:
        torch.set_num_threads(threads)
    return float(out["eval"][-1]["score_mean"])


def check_cql_update(fn) -> None:
    """Task: ``fn(agent, batch)`` does one update of a ``minirl.cql.CQL`` (alpha 1, fixed): its losses, critics,
    target critics, actor and entropy temperature must follow ``agent.update`` on :func:`continuous_exercise`'s data
    from the same seed (the random draws in the order the task states)."""
    batch = continuous_exercise()
    probe = batch["obs"][:16], batch["act"][:16]
    _check_agent("cql_update", fn, make_exercise_cql, batch, ("critic_loss", "td_loss", "cql_gap", "actor_loss"), {
        "Q_i(s, a) of both critics at 16 pairs": lambda a: _values(lambda: a.critic(*probe)),
        "the target critics": lambda a: _values(lambda: a.critic_target(*probe)),
        "the actor's log-probabilities of 16 data actions": lambda a: _values(lambda: a.actor.log_prob(*probe)),
        "the entropy temperature log alpha": lambda a: float(a.log_alpha.detach()),
        "agent.step": lambda a: a.step,
    }, reference=_method("cql", "CQL", "update"))


def penalty_sweep_reference(update, alphas, seeds, steps: int) -> np.ndarray:
    """The sweep with minirl's own loop: ``scores[i, j]`` = :func:`train_and_score` of ``update`` at ``alphas[i]``,
    ``seeds[j]``."""
    return np.array([[train_and_score(update, a, s, steps) for s in seeds] for a in alphas])


def reference_distribution(path: Path = REFERENCE_FILE) -> dict:
    """The reference's scores at the grading setting (``experiments/assignment_reference.py``): a dict with
    ``scores`` (one per seed), ``seeds``, the setting and the machine that made them."""
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no reference scores; run `python experiments/assignment_reference.py`")
    ref = json.loads(Path(path).read_text())
    setting = {k: ref[k] for k in GRADING}
    if setting != GRADING or ref["hidden"] != list(HIDDEN) or ref["n_actions"] != N_ACTIONS:
        raise ValueError(f"{path} was made at {setting}, hidden {ref['hidden']}, N {ref['n_actions']}; the grading "
                         f"setting is {GRADING}, hidden {list(HIDDEN)}, N {N_ACTIONS}: rerun the experiment")
    return ref


def passing_score(ref: dict | None = None) -> float:
    """The lowest score that passes: the reference's lowest seed minus :data:`TOLERANCE`."""
    ref = ref or reference_distribution()
    return min(ref["scores"]) - TOLERANCE


def score_of_actor(weights: dict, cql_alpha: float, seed: int) -> float:
    """The normalised score of the deterministic policy whose actor has ``weights`` (``state_dict`` arrays of
    :func:`make_cql`'s actor), over :data:`EVAL_EPISODES` episodes seeded as :func:`train_and_score`'s evaluation
    (:class:`minirl.train.Evaluation`): what a run that ended with this actor scored, computed from its weights."""
    import torch

    from ..datasets import normalized_score
    from ..evaluation import run_episodes
    data, normalizer = project_data()
    agent = make_cql(cql_alpha, seed, (data.obs_dim, data.act_dim, data.action_low, data.action_high))
    state = agent.actor.state_dict()
    if not isinstance(weights, dict) or set(weights) != set(state):
        raise ValueError(f"the actor's weights name {sorted(weights) if isinstance(weights, dict) else weights!r}, "
                         f"expected {sorted(state)}")
    agent.actor.load_state_dict({k: torch.as_tensor(np.asarray(v), dtype=state[k].dtype).reshape(state[k].shape)
                                 for k, v in weights.items()})
    returns = run_episodes(agent, "Pendulum-v1", EVAL_EPISODES, seed=10_000 * (seed + 1),
                           state_normalizer=normalizer)["returns"]
    return float(normalized_score("pendulum", returns).mean())


def replay_setting() -> tuple[tuple[float, ...], tuple[int, ...], int]:
    """``(alphas, seeds, steps)`` of the penalty sweep's first check: two of :data:`PROJECT_ALPHAS`, one seed below
    10,000 and 20 to 60 updates, from :func:`~minirl.classroom.checks.fresh` (public in a self-check, drawn from the
    instructor's key while grading). Two alphas catch a sweep that ignores its alphas, a drawn seed one that ignores
    its seeds; each run costs about 0.7 s of CPU at 40 updates (0.1 s of it the 20 evaluation episodes) in the child
    and again in the grader, so the sweep is as small as those catches allow."""
    from .checks import fresh
    rng = np.random.default_rng(fresh(23))
    alphas = tuple(float(a) for a in rng.choice(PROJECT_ALPHAS, 2, replace=False))
    return alphas, (int(rng.integers(1, 10_000)),), int(rng.integers(20, 61))


def other_learners() -> tuple:
    """The updates of minirl's learners other than CQL's: made unavailable while the sweep runs (a stub that raises),
    so that a policy trained by one of them cannot be returned as the sweep's."""
    from .. import bc, bcq, discrete, iql, sac, td3bc
    return (bc.BC.update, bcq.BCQ.update, iql.IQL.update, iql.IQL.update_actor, td3bc.TD3BC.update, sac.SAC.update,
            discrete.DiscreteBCQ.update, discrete.DiscreteCQL.update)


def _own_update(agent, batch):
    return agent.update(batch)  # minirl's CQL.update: the update the first check's sweep trains (and its replay)


def check_penalty_sweep(fn, update=None):
    """Task: ``fn(update, alphas, seeds, steps)`` returns the normalised scores of ``update`` trained at each alpha and
    seed, an array of shape ``(len(alphas), len(seeds))``. Two checks (the module's docstring): the scores of a small
    sweep on fresh inputs (:func:`replay_setting`, minirl's own update) equal the grader's own run of that sweep; and
    one run of the student's ``update`` (the notebook passes its ``cql_update``; ``None``: the agent's own) at
    :data:`GRADING` trains a policy that scores at least :func:`passing_score`, evaluated by the check from its
    weights (:func:`score_of_actor`), never read off what the sweep returns. Returns the score the sweep reported at
    the grading setting (``None`` if that run fails)."""
    update = update or _own_update
    ref = reference_distribution()
    floor = passing_score(ref)
    lo, hi = min(ref["scores"]), max(ref["scores"])
    c = Checks("penalty_sweep", reference=penalty_sweep_reference, unavailable=other_learners())
    project_data()  # the dataset, made before the checks run (with minirl's SAC, unavailable while they do)
    alphas, seeds, steps = replay_setting()

    def small_sweep():
        got = np.asarray(fn(_own_update, alphas, seeds, steps), dtype=float)
        if got.shape != (len(alphas), len(seeds)):
            raise ValueError(f"expected scores of shape {(len(alphas), len(seeds))} for {len(alphas)} alphas and "
                             f"{len(seeds)} seeds, got {got.shape}")
        return got

    c.compare(f"penalty_sweep(update, alphas={alphas}, seeds={seeds}, steps={steps}) with minirl's own CQL.update "
              "returns the scores of the grader's own run of that sweep (the same training loop: the same numbers)",
              small_sweep, Ref(lambda: penalty_sweep_reference(_own_update, alphas, seeds, steps)), atol=1e-9,
              rtol=0.0)
    state: dict = {}

    def watched(agent, batch):  # the agent the sweep trains: its actor is what the verdict scores
        state["agent"] = agent
        return update(agent, batch)

    def run():
        if "score" not in state and "error" not in state:
            try:
                got = np.asarray(fn(watched, (GRADING["cql_alpha"],), (GRADING["seed"],), GRADING["steps"]),
                                 dtype=float)
                if got.shape != (1, 1):
                    raise ValueError(f"expected scores of shape (1, 1) for one alpha and one seed, got {got.shape}")
                if "agent" not in state:
                    raise ValueError("the sweep never called the update it was given: train with "
                                     "train_and_score(update, alpha, seed, steps)")
                agent = state.pop("agent")
                actor = getattr(agent, "actor", None)
                if actor is None or not hasattr(actor, "state_dict"):
                    raise ValueError("the agent the update was called with has no actor to evaluate")
                state["score"] = float(got[0, 0])
                state["actor"] = {k: v.detach().cpu().numpy() for k, v in actor.state_dict().items()}
                state["steps"] = int(getattr(agent, "step", -1))
            except Exception as e:  # noqa: BLE001 - reported by the check
                state["error"] = e
        if "error" in state:
            raise state["error"]
        return {"reported": state["score"], "actor": state["actor"], "steps": state["steps"]}

    def verdict(got):
        if got.get("steps") != GRADING["steps"]:
            return (f"the agent the update was last called with made {got.get('steps')} updates, expected "
                    f"{GRADING['steps']:,}: train one agent per alpha and seed with train_and_score")
        try:
            score = score_of_actor(got["actor"], GRADING["cql_alpha"], GRADING["seed"])
        except Exception as e:  # noqa: BLE001 - weights that do not fit the assignment's actor
            return f"the trained actor could not be evaluated ({type(e).__name__}: {e})"
        if score >= floor:
            return None
        return (f"the policy your update trained scored {score:.1f} (your sweep reported {float(got['reported']):.1f}), "
                f"expected at least {floor:.1f}")

    c.compare(f"the policy trained by {GRADING['steps']:,} updates at alpha {GRADING['cql_alpha']:g} (seed "
              f"{GRADING['seed']}) scores at least {floor:.1f}: the reference's {len(ref['scores'])} seeds scored "
              f"{lo:.1f} to {hi:.1f}, less a tolerance of {TOLERANCE:g}", run, verdict)
    c.report()
    return state.get("score")
