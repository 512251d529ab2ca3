"""Chapter 1's figure: the same data, two empirical MDPs, two greedy policies (extrapolation error in a table).

``offline_rl_unseen.png`` recomputes notebook 01's experiment with ``minirl.tabular`` (the same calls and seeds): a
random MDP with 6 states, 3 actions and gamma = 0.9 (seed 0); a cautious behaviour policy that never takes the worst
action of any state under Q*; 100,000 transitions (seed 0); the empirical MDP with the unseen pairs paying 0
(pessimistic) or 1 (optimistic) forever.

* left: the optimistic model's Q*_hat(s, a), the six unseen pairs outlined, each state's greedy action marked;
* right: the true return J of four policies (optimal, behaviour, greedy on each model), run in the true MDP.

Exact and deterministic (no training; numpy only).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from minirl import plots  # noqa: E402
from minirl import tabular as tab  # noqa: E402


def experiment() -> dict:
    """Notebook 01's unseen-pairs experiment, returned as arrays."""
    mdp = tab.random_mdp(n_states=6, n_actions=3, gamma=0.9, seed=0)
    S, A, gamma = mdp.n_states, mdp.n_actions, mdp.gamma
    Q_star = tab.value_iteration(mdp)
    worst = tab.greedy_policy(-Q_star)
    pi_beta = (1.0 - worst) / (A - 1)
    data = tab.sample_dataset(mdp, pi_beta, n_transitions=100_000, seed=0)
    mdp_low, counts = tab.empirical_mdp(data, S, A, gamma, unseen_reward=0.0)
    mdp_high, _ = tab.empirical_mdp(data, S, A, gamma, unseen_reward=1.0)
    Q_low, Q_high = tab.value_iteration(mdp_low), tab.value_iteration(mdp_high)
    policies = {
        "optimal\n(true MDP)": tab.greedy_policy(Q_star),
        "behaviour\n$\\pi_\\beta$": pi_beta,
        "greedy,\nunseen pay 0": tab.greedy_policy(Q_low),
        "greedy,\nunseen pay 1": tab.greedy_policy(Q_high),
    }
    return {"seen": counts > 0, "Q_high": Q_high, "J": {k: tab.policy_return(mdp, p) for k, p in policies.items()},
            "unseen_taken": {k: int((p * (counts == 0)).sum()) for k, p in policies.items()}}


def main(out_dir: Path) -> list[Path]:
    with plt.rc_context({"font.size": 13}):
        return _draw(out_dir)


def _draw(out_dir: Path) -> list[Path]:
    r = experiment()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.4), gridspec_kw={"width_ratios": [0.8, 1.25]})

    Q = r["Q_high"]
    im = ax.imshow(Q, cmap="viridis", aspect="auto")
    S, A = Q.shape
    greedy = Q.argmax(axis=1)
    for s in range(S):
        for a in range(A):
            ax.text(a, s, f"{Q[s, a]:.2f}", ha="center", va="center", fontsize=11.5,
                    color="k" if Q[s, a] > Q.mean() else "w", fontweight="bold" if a == greedy[s] else "normal")
            if not r["seen"][s, a]:
                ax.add_patch(Rectangle((a - 0.5, s - 0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=2.5))
    ax.set_xticks(range(A))
    ax.set_yticks(range(S))
    ax.set_xlabel("action $a$")
    ax.set_ylabel("state $s$")
    ax.set_title("$\\hat Q^*$ when unseen pairs pay 1\n(red: $N(s,a) = 0$; bold: greedy)", fontsize=12.5)
    fig.colorbar(im, ax=ax, fraction=0.05, label="value (reward units)")

    names = list(r["J"])
    colors = ["0.4", "tab:gray", "tab:green", "tab:red"]
    bars = bx.bar(range(len(names)), [r["J"][n] for n in names], color=colors)
    for b, n in zip(bars, names):
        bx.text(b.get_x() + b.get_width() / 2, b.get_height() + 0.1,
                f"{r['J'][n]:.4f}\n{r['unseen_taken'][n]} unseen", ha="center", va="bottom", fontsize=11.5)
    bx.set_xticks(range(len(names)), names, fontsize=11)
    bx.set_ylim(0, 10)
    bx.set_ylabel("true return $J(\\pi)$ (reward units)")
    bx.set_title("each policy run in the true MDP\n(label: its return, unseen actions it takes)", fontsize=12.5)
    bx.grid(axis="y", alpha=0.3)

    fig.tight_layout()
    path = out_dir / "offline_rl_unseen.png"
    plots.save_figure(fig, path)
    return [path]
