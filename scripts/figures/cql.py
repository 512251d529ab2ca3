"""The figures of the CQL chapter (book/cql.md), made with minirl's own functions:

* ``cql_penalty_axis.png``: Q over a 1-D action axis at one state, fitted to the data's rewards without and with
  CQL(H)'s penalty (``cql.discrete_cql_penalty`` over a grid of actions), and where the penalty pushes Q;
* ``cql_gap_vs_n.png``: the importance-sampled gap of the deep agent (``cql.cql_penalty`` over 3N sampled actions,
  without the 1/(3N) of an average) against N, for one fixed critic: why a fixed Lagrange threshold means a different
  constraint at each N;
* ``cql_value_check.png``: the results of record (``results/record``, read with ``minirl.plots``): the critic's
  estimate at the start states minus the return of its policy over training, for CQL, CQL-Lagrange and offline SAC.

    python scripts/make_figures.py cql
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.distributions import Normal  # noqa: E402

from minirl import cql, plots  # noqa: E402



# ---------------------------------------------------------------------------------------------------------------
# 1. The penalty on a 1-D action axis
# ---------------------------------------------------------------------------------------------------------------

GRID = np.linspace(-1.0, 1.0, 201)   # the action axis, enumerated: the soft maximum is an exact sum over it
DEGREE = 5                           # Q(a) = w . Legendre features of degree <= 5: smooth, and free off the data
ALPHAS = (0.0, 0.1, 0.5)


def true_reward(a):
    return 3.0 - 4.0 * (a + 0.1) ** 2


def one_state_data(seed: int = 0, n: int = 40):
    """n actions in two clusters (the data never shows a > 0.5 or a < -0.9), snapped to the grid, with noisy
    rewards. One state, one step (gamma = 0): the TD target is the reward."""
    rng = np.random.default_rng(seed)
    a = np.concatenate([rng.normal(-0.55, 0.1, n // 2), rng.normal(0.2, 0.1, n // 2)]).clip(-1, 1)
    idx = np.abs(GRID[None] - a[:, None]).argmin(1)
    r = true_reward(GRID[idx]) + rng.normal(0.0, 0.3, n)
    return idx, r


def fit_q(idx, r, alpha: float) -> np.ndarray:
    """argmin_w 1/2 mean_i (Q(a_i) - r_i)^2 + alpha mean_i [logsumexp_a Q(a) - Q(a_i)], Q = Phi w (convex in w)."""
    phi = torch.as_tensor(np.polynomial.legendre.legvander(GRID, DEGREE), dtype=torch.float64)
    ia, rr = torch.as_tensor(idx), torch.as_tensor(r, dtype=torch.float64)
    w = torch.zeros(DEGREE + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-14,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        q = phi @ w
        loss = 0.5 * ((q[ia] - rr) ** 2).mean()
        if alpha:
            loss = loss + alpha * cql.discrete_cql_penalty(q.expand(len(idx), -1), ia).mean()
        loss.backward()
        return loss

    for _ in range(5):
        opt.step(closure)
    return (phi @ w).detach().numpy()


def penalty_axis(path: Path) -> Path:
    idx, r = one_state_data()
    qs = {alpha: fit_q(idx, r, alpha) for alpha in ALPHAS}
    # where the penalty's gradient pushes Q, at the unpenalised fit: -(softmax Q - pi_hat_beta), per action
    q = torch.tensor(qs[0.0], requires_grad=True)
    cql.discrete_cql_penalty(q.expand(len(idx), -1), torch.as_tensor(idx)).mean().backward()
    push = -q.grad.numpy()

    fig, (ax, bx) = plt.subplots(2, 1, figsize=(7.5, 6.4), sharex=True, height_ratios=(2.2, 1))
    ax.plot(GRID, true_reward(GRID), color="0.4", ls=":", lw=1.5, label="true reward r(a)")
    ax.plot(GRID[idx], r, "k.", ms=5, label="the data's actions and rewards")
    colors = {0.0: "C3", 0.1: "C0", 0.5: "C2"}
    for alpha, qa in qs.items():
        name = "without the penalty (alpha = 0)" if alpha == 0 else f"CQL(H), alpha = {alpha:g}"
        ax.plot(GRID, qa, color=colors[alpha], lw=2, label=name)
        top = min(qa.max(), 9.6)   # the unpenalised maximum is off the top: drawn at the edge, with an arrow
        ax.plot(GRID[qa.argmax()], top, marker="*", ms=13, color=colors[alpha], mec="k", mew=0.6, clip_on=False)
        if qa.max() > top:
            ax.annotate(f"argmax at a = {GRID[qa.argmax()]:g}, Q = {qa.max():.0f}", xy=(GRID[qa.argmax()], top),
                        xytext=(0.3, 8.6), fontsize=9, color=colors[alpha], ha="right",
                        arrowprops=dict(arrowstyle="->", color=colors[alpha]))
    ax.set_ylim(-6, 10)
    ax.set_ylabel("Q(s, a) (return units)")
    ax.set_title("Q at one state, fitted to the data; stars: argmax_a Q(s, a)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.4, 0.0))   # below the data, clear of the curves
    for x in GRID[np.unique(idx)]:
        bx.axvline(x, color="0.85", lw=0.8, zorder=0)
    bx.bar(GRID, push, width=GRID[1] - GRID[0], color=np.where(push > 0, "C2", "C3"))
    bx.axhline(0, color="k", lw=0.6)
    bx.set_yscale("symlog", linthresh=0.01)
    bx.set_xlabel("action a")
    bx.set_ylabel("push on Q(s, a)\n-(softmax Q - data)")
    bx.set_title("The penalty's push on the unpenalised Q (grey: actions in the data)", fontsize=10)
    fig.tight_layout()
    plots.save_figure(fig, path)
    return path


# ---------------------------------------------------------------------------------------------------------------
# 2. The importance-sampled gap against N
# ---------------------------------------------------------------------------------------------------------------

ACT_DIM = 3                                   # Hopper's action dimension; the box is [-1, 1]^3
PEAK, CURV = 0.3, 2.0                         # Q(s, a) = -CURV ||a - PEAK||^2 at one state
A_DATA = torch.tensor([0.0, 0.1, -0.2], dtype=torch.float64)
NS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)
DRAWS = 4000


def q_bowl(a: torch.Tensor) -> torch.Tensor:
    return -CURV * ((a - PEAK) ** 2).sum(-1)


def exact_gap() -> float:
    """log int_box exp Q(s, a) da - Q(s, a_data), the integral a product of 1-D integrals (trapezoid rule)."""
    x = np.linspace(-1.0, 1.0, 200_001)
    y = np.exp(-CURV * (x - PEAK) ** 2)
    one_d = float(((y[1:] + y[:-1]) / 2 * np.diff(x)).sum())
    return ACT_DIM * math.log(one_d) - float(q_bowl(A_DATA))


def tanh_gaussian(mean: float, std: float, n: int):
    """DRAWS x n actions from a tanh-Gaussian policy and their log-densities in the box (as cql.sample_actions)."""
    dist = Normal(torch.full((ACT_DIM,), mean, dtype=torch.float64), torch.full((ACT_DIM,), std, dtype=torch.float64))
    u = dist.sample((DRAWS, n))
    a = torch.tanh(u)
    return a, (dist.log_prob(u) - torch.log1p(-a ** 2)).sum(-1)


def gap_estimates() -> dict[int, np.ndarray]:
    """The deep agent's estimate of the gap, cql.cql_penalty over N uniform actions (density 0.5^3), N from the
    policy at s and N from the policy at s' (a slightly different mean), DRAWS times for each N."""
    torch.manual_seed(0)
    out = {}
    for n in NS:
        a_u = torch.rand(DRAWS, n, ACT_DIM, dtype=torch.float64) * 2 - 1
        log_u = torch.full((DRAWS, n), ACT_DIM * math.log(0.5), dtype=torch.float64)
        a_pi, log_pi = tanh_gaussian(math.atanh(PEAK), 0.4, n)
        a_next, log_next = tanh_gaussian(math.atanh(0.2), 0.4, n)
        a = torch.cat([a_u, a_pi, a_next], 1)
        log_p = torch.cat([log_u, log_pi, log_next], 1)
        out[n] = cql.cql_penalty(q_bowl(A_DATA).expand(DRAWS), q_bowl(a), log_p).numpy()
    return out


def gap_vs_n(path: Path) -> Path:
    est, exact = gap_estimates(), exact_gap()
    n = np.array(NS, dtype=float)
    mean = np.array([est[k].mean() for k in NS])
    lo, hi = (np.array([np.percentile(est[k], q) for k in NS]) for q in (5, 95))
    avg = np.array([(est[k] - math.log(3 * k)).mean() for k in NS])

    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    ax.fill_between(n, lo, hi, color="C0", alpha=0.2, label="as implemented: 5%-95% of 4,000 draws")
    ax.plot(n, mean, "o-", color="C0", label="as implemented (no 1/3N): mean")
    ax.plot(n, exact + np.log(3 * n), "k--", lw=1, label="ln 3N + exact gap")
    ax.plot(n, avg, "s-", color="C1", ms=4, label="an average (minus ln 3N): mean")
    ax.axhline(exact, color="k", ls=":", lw=1, label="exact gap, log of the integral minus Q(s, a_data)")
    i4, i10 = NS.index(4), NS.index(10)
    for k, name in ((4, "N = 4 (cpu scale)"), (10, "N = 10 (the paper)")):
        ax.axvline(k, color="0.6", lw=0.8)
        ax.text(k * 1.04, 0.25, name, fontsize=9, color="0.3")
    ax.annotate("", xy=(10, mean[i10]), xytext=(10, mean[i4]),
                arrowprops=dict(arrowstyle="<->", color="C3", lw=1.5))
    ax.annotate("", xy=(4, mean[i4]), xytext=(10, mean[i4]),
                arrowprops=dict(arrowstyle="-", color="C3", lw=0.8, ls="--"))
    ax.text(10.8, (mean[i4] + mean[i10]) / 2, "ln(30/12) = 0.92\n+ a smaller bias", fontsize=9, color="C3",
            va="center")
    ax.set_xscale("log")
    ax.set_ylim(0, 7.6)
    ax.set_xlabel("N, sampled actions per proposal (3N in all, log scale)")
    ax.set_ylabel("estimated gap at one state (units of Q)")
    ax.set_title("One fixed critic, three action dimensions: its gap as CQL estimates it")
    ax.legend(loc="upper left")
    fig.tight_layout()
    plots.save_figure(fig, path)
    return path


# ---------------------------------------------------------------------------------------------------------------
# 3. The results of record: the value check over training
# ---------------------------------------------------------------------------------------------------------------

TIERS = ("hopper-medium", "hopper-expert", "hopper-medium-replay", "hopper-medium-expert")
CRITICS = {"cql": ("CQL (alpha = 5)", "C0"), "cql-lagrange": ("CQL-Lagrange (kappa = 5)", "C1"),
           "sac-offline": ("offline SAC (no penalty)", "C3")}


def value_check(path: Path) -> Path:
    runs = plots.load_results("results/record")
    with plt.rc_context({"font.size": 11}):
        fig, axes = plt.subplots(2, 2, figsize=(8.4, 7.0), sharex=True)
        for ax, tier in zip(axes.flat, TIERS):
            for label, (name, color) in CRITICS.items():
                sel = plots.select(runs, label, tier)
                n = min(len(r["curve"]["step"]) for r in sel)
                steps = sel[0]["curve"]["step"][:n] / 1000
                err = np.stack([r["curve"]["q_start"][:n] - r["curve"]["mc_discounted"][:n] for r in sel])
                ax.plot(steps, err.mean(0), color=color, lw=2.2, label=name)
                for e in err:
                    ax.plot(steps, e, color=color, lw=0.6, alpha=0.45)
            ax.axhline(0, color="k", lw=1)
            ax.set_yscale("symlog", linthresh=100.0)
            ax.set_ylim(-1e3, None)
            ax.set_title(tier, fontsize=11)
            ax.grid(alpha=0.3)
        for ax in axes[1]:
            ax.set_xlabel("gradient steps (thousands)")
        for ax in axes[:, 0]:
            ax.set_ylabel("estimate - return (return units)")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=10, bbox_to_anchor=(0.5, -0.01))
        fig.suptitle("Critic's estimate minus its policy's return (symmetric log; thin lines: seeds)", fontsize=12)
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        plots.save_figure(fig, path)
    return path


def main(out_dir: Path) -> list[Path]:
    torch.set_num_threads(1)
    out_dir = Path(out_dir)
    with plt.rc_context({"font.size": 11, "legend.fontsize": 9}):   # readable at 700 px; other pages keep defaults
        return [penalty_axis(out_dir / "cql_penalty_axis.png"), gap_vs_n(out_dir / "cql_gap_vs_n.png"),
                value_check(out_dir / "cql_value_check.png")]
