"""Figures of the IQL chapter (book/iql.md).

    python scripts/make_figures.py iql

* ``iql_expectile.png``: the expectile loss of ``minirl.iql.expectile_loss`` for three tau, and the exact expectile
  (``minirl.tabular.expectile``) of a four-valued distribution as tau goes to 1, with the bound of the chapter's
  lemma (part 4).
* ``iql_awr.png``: the advantage weights of ``minirl.iql.awr_weights`` (clamped at 100 as the agent clamps them)
  for three beta, and the return of the policy that advantage-weighted regression extracts on the notebook's
  tabular MDP (``minirl.tabular``), with and without the clamp.
* ``iql_data.png``: the results lesson, read from the committed runs: IQL, BC and 10%BC on our replay buffer
  (``results/record``, ``results/record-1m``) and on the richer 150,000-transition buffer of a second SAC run
  (``results/replay-size``, ``results/replay-size-200k-steps``), means over seeds with 95% bootstrap intervals
  (``minirl.plots.bootstrap_ci``), beside the score of the best tenth of each buffer's episodes.

Everything is deterministic: the tabular MDP and its dataset have fixed seeds, the bootstrap its default seed.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from minirl import plots  # noqa: E402
from minirl import tabular as tab  # noqa: E402
from minirl.iql import awr_weights, expectile_loss  # noqa: E402

# large type: the page shows a two-panel figure about 700 px wide
STYLE = {"font.size": 13, "axes.titlesize": 13, "axes.labelsize": 13, "legend.fontsize": 11,
         "xtick.labelsize": 11, "ytick.labelsize": 11}
COLORS = {"iql": "C0", "bc": "C7", "10%bc": "C2"}
NAMES = {"iql": "IQL", "bc": "BC", "10%bc": "10%BC"}


def expectile_figure(path: Path) -> Path:
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.4))
    u = torch.linspace(-2, 2, 201)
    for tau, color in ((0.5, "C7"), (0.7, "C0"), (0.9, "C3")):
        ax0.plot(u.numpy(), expectile_loss(u, tau).numpy(), color=color, label=f"tau = {tau}")
    ax0.set_xlabel("residual u = x - m")
    ax0.set_ylabel("loss |tau - 1(u < 0)| u^2")
    ax0.set_title("the expectile loss")
    ax0.legend()

    # the "Q-values of the data's actions at one state": values 0, 1, 2, 5 with probabilities 0.4, 0.3, 0.2, 0.1
    values, probs = np.array([0.0, 1.0, 2.0, 5.0]), np.array([0.4, 0.3, 0.2, 0.1])
    one_minus = np.logspace(-3, np.log10(0.5), 80)
    taus = 1 - one_minus
    m = np.array([tab.expectile(values[None], probs[None], t)[0] for t in taus])
    top, spread, p_top = values.max(), values.max() - values.min(), probs[values.argmax()]
    bound = top - (1 - taus) / taus * spread / p_top          # the lemma, part 4: m_tau >= M - (1-tau)/tau * D/p_M
    ax1.semilogx(one_minus, m, "-", color="C0", lw=2.5, label="expectile m_tau")
    ax1.semilogx(one_minus, np.maximum(bound, values.min()), "--", color="C3", lw=1.5, label="lemma's lower bound")
    ax1.axhline(top, color="k", ls=":", lw=1)
    ax1.axhline(float(values @ probs), color="C7", ls=":", lw=1)
    ax1.text(0.45, top - 0.1, "largest value", ha="left", va="top", fontsize=11)
    ax1.text(0.45, float(values @ probs) - 0.1, "mean", ha="left", va="top", fontsize=11, color="C7")
    ax1.invert_xaxis()
    ax1.set_ylim(-0.2, 5.4)
    ax1.set_xlabel("1 - tau (log scale; tau grows to the right)")
    ax1.set_ylabel("m_tau")
    ax1.set_title("values 0, 1, 2, 5 (probabilities .4, .3, .2, .1)")
    ax1.legend(loc="lower right")
    fig.tight_layout()
    plots.save_figure(fig, path)
    return path


def awr_figure(path: Path) -> Path:
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.4))
    adv = torch.linspace(-1.0, 2.0, 301)
    for beta, color in ((1.0, "C7"), (3.0, "C0"), (10.0, "C3")):
        ax0.semilogy(adv.numpy(), awr_weights(adv, beta=beta, max_weight=100.0).numpy(), color=color,
                     label=f"beta = {beta:g}")
    ax0.axhline(100.0, color="k", ls=":", lw=1)
    ax0.text(-0.95, 60.0, "clamp w_max = 100", ha="left", va="top", fontsize=11)
    ax0.axhline(1.0, color="C7", ls=":", lw=0.8)
    ax0.set_xlabel("advantage A = Q(s, a) - V(s)")
    ax0.set_ylabel("weight min(exp(beta A), 100)")
    ax0.set_title("advantage weights")
    ax0.legend(loc="lower right")

    # the notebook's MDP (section 2): 20 states, 4 actions, gamma 0.9, 500 transitions of a Dirichlet behaviour policy
    S, A, gamma = 20, 4, 0.9
    mdp = tab.random_mdp(S, A, gamma=gamma, seed=0, branching=3)
    pi_beta = np.random.default_rng(0).dirichlet(np.ones(A), size=S)
    data = tab.sample_dataset(mdp, pi_beta, 500, seed=0)
    mdp_hat, counts = tab.empirical_mdp(data, S, A, gamma)
    pi_hat = tab.empirical_behavior_policy(data, S, A)
    support = counts > 0
    q7, v7 = tab.expectile_value_iteration(mdp_hat, pi_hat, 0.7, support=support)
    q_star = tab.constrained_value_iteration(mdp_hat, support)
    betas = np.logspace(-2, 4, 61)
    for max_w, style, name in ((np.inf, "-", "no clamp"), (100.0, "--", "clamped at 100")):
        ret = [tab.policy_return(mdp, tab.awr_policy(q7, v7, pi_hat, b, max_w, support=support)) for b in betas]
        ax1.semilogx(betas, ret, style, color="C0" if max_w == np.inf else "C1", lw=2, label=name)
    keep = support & (q7 > v7[:, None])
    filtered = np.where(keep, pi_hat, 0.0)
    filtered /= filtered.sum(1, keepdims=True)
    for value, color, ls, name, x, va in (
            (tab.policy_return(mdp, tab.greedy_policy(q_star)), "k", "-.", "batch-constrained optimum", 0.011, "top"),
            (tab.policy_return(mdp, filtered), "C1", ":", "filtered BC (Q > V)", 9e3, "top"),
            (tab.policy_return(mdp, pi_hat), "C7", ":", "behaviour cloning", 9e3, "bottom")):
        ax1.axhline(value, color=color, ls=ls, lw=1)
        ax1.text(x, value + (0.03 if va == "bottom" else -0.04), name, ha="left" if x < 1 else "right", va=va,
                 fontsize=11, color=color)
    ax1.set_xlabel("inverse temperature beta (log scale)")
    ax1.set_ylabel("return in the true MDP")
    ax1.set_title("extracted policy, 20-state MDP, tau = 0.7")
    ax1.legend(loc="center right")
    fig.tight_layout()
    plots.save_figure(fig, path)
    return path


# (panel title, dataset name in the runs, [(budget label, results folder)], buffer name in buffers.json)
DATA_PANELS = [
    ("our buffer (hopper-medium-replay)", "hopper-medium-replay",
     [("50,000 steps", "results/record"), ("1M steps", "results/record-1m")], "hopper-medium-replay"),
    ("a richer buffer (second SAC run, 150k)", "minari:minirl/hopper/replay-150k-v0",
     [("50,000 steps", "results/replay-size"), ("200,000 steps", "results/replay-size-200k-steps")],
     "minari:minirl/hopper/replay-150k-v0"),
]


def data_figure(path: Path) -> Path:
    buffers = {b["name"]: b for b in json.loads(plots.results_path("results/replay-size/buffers.json").read_text())
               ["buffers"]}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    labels = ["bc", "10%bc", "iql"]
    for ax, (title, dataset, budgets, buffer) in zip(axes, DATA_PANELS):
        for i, (budget, folder) in enumerate(budgets):
            runs = plots.load_results(folder)
            for j, label in enumerate(labels):
                scores = plots.record_scores(runs, label, dataset)  # the statistic of record
                lo, hi = plots.bootstrap_ci(scores)
                x = i + (j - 1) * 0.22
                ax.plot([x, x], [lo, hi], color=COLORS[label], lw=4, solid_capstyle="butt")
                ax.plot([x], [scores.mean()], "o", color=COLORS[label], ms=9, mec="k", mew=0.6,
                        label=NAMES[label] if i == 0 else None)
                ax.plot(np.full(scores.size, x + 0.07), scores, ".", color=COLORS[label], ms=4, alpha=0.6)
        b = buffers[buffer]
        tenth, best = b["best_10pct_normalized_score_mean"], b["normalized_score_max"]
        ax.axhline(tenth, color="C2", ls="--", lw=1, label="best tenth (10%BC's data)")
        ax.axhline(best, color="k", ls=":", lw=1, label="best episode")
        ax.text(len(budgets) - 0.45, tenth + 1.5, f"{tenth:.1f}", ha="right", va="bottom", fontsize=11, color="C2")
        ax.text(len(budgets) - 0.45, best + 1.5, f"{best:.1f}", ha="right", va="bottom", fontsize=11)
        ax.set_xticks(range(len(budgets)), [name for name, _ in budgets])
        ax.set_xlim(-0.6, len(budgets) - 0.4)
        ax.set_xlabel("gradient steps of training")
        ax.set_title(title, fontsize=12)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=5, bbox_to_anchor=(0.5, -0.08), frameon=False)
    axes[0].set_ylabel("normalised score (100 = expert)")
    axes[0].set_ylim(0, 150)
    fig.tight_layout()
    plots.save_figure(fig, path)
    return path


def main(out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    with plt.rc_context(STYLE):  # not plt.rcParams.update: make_figures runs every page's module in one process
        return [expectile_figure(out_dir / "iql_expectile.png"), awr_figure(out_dir / "iql_awr.png"),
                data_figure(out_dir / "iql_data.png")]


if __name__ == "__main__":
    for p in main(Path(__file__).resolve().parents[2] / "book" / "figures"):
        print(p)
