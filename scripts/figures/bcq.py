"""Figures of the BCQ chapter (book/bcq.md).

    python scripts/make_figures.py bcq

1. ``bcq_pipeline.png``: BCQ's action selection at one state on a 1-D action axis: minirl's VAE (``nets.VAE``,
   trained with ``bcq.vae_loss``) proposes n = 10 actions near the data's, minirl's perturbation model
   (``bcq.Perturbation``, trained with ``bcq.perturbation_loss``) shifts each by at most Phi of half the action range,
   and the critic's argmax picks one. The critic is an illustrative function (accurate near the data, with a peak
   where there is no data), not a trained network.
2. ``bcq_reach.png``: which actions Phi = 0, 0.05, 0.25 and 1.0 can reach from the same VAE's samples (clipped
   latent), against the data's actions and the critic: Phi is the width of the constraint (claim (e)).
3. ``bcq_phi_sweep.png``: the sweep of record on Hopper's mixed tiers (``results/record`` for Phi = 0.05,
   ``results/record-bcq-phi`` for 0 and 0.25, seeds 0-2): each run's statistic of record (the mean of its last 5
   evaluations) with 95% bootstrap intervals against BC and 10%BC (``plots.plot_sweep``, ``plots.plot_baseline``),
   and each seed's critic estimate minus the return of its policy at the start states, over the same evaluations.

Deterministic: fixed seeds, one torch thread.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from minirl import bcq, nets, plots  # noqa: E402

LOW, HIGH = -1.0, 1.0                    # action bounds: half the range is 1, so a shift of Phi is Phi
N_CANDIDATES = 10                        # n, the target's number of VAE samples
PHI = 0.05                               # BCQ's default
PHIS = [0.0, 0.05, 0.25, 1.0]
GRID = np.linspace(LOW, HIGH, 2001)
DATA_COLOR, VAE_COLOR, PERT_COLOR, Q_COLOR = "0.55", "C0", "C1", "C3"


def critic(a):
    """An illustrative critic Q(s, a) at the one state: a smooth hill whose top (a = 0) lies to the right of the
    data's most likely actions, where the data still has actions, and a taller peak at a = 0.75, where it has hardly
    any (extrapolation error)."""
    hill = 2.0 - 3.0 * a ** 2
    bump = -((a - 0.75) ** 2) / (2 * 0.04 ** 2)
    spurious = 2.2 * (np.exp(bump) if isinstance(a, np.ndarray) else torch.exp(bump))
    return hill + spurious


def data_actions(n=2000, seed=0):
    """The data's actions at the state: one noisy behaviour, normal with mean -0.3 and standard deviation 0.45,
    truncated to the bounds."""
    rng = np.random.default_rng(seed)
    a = rng.normal(-0.3, 0.45, 3 * n)
    return a[(a > LOW) & (a < HIGH)][:n].astype(np.float32)


def train_models(actions):
    """minirl's VAE on the data's actions at one state (obs = 0), then minirl's perturbation model (Phi = 0.05)
    against the critic, each with the loss ``minirl/bcq.py`` uses."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    obs = torch.zeros(len(actions), 1)
    act = torch.as_tensor(actions)[:, None]
    vae = nets.VAE(1, 1, hidden=(64, 64), action_low=[LOW], action_high=[HIGH])
    opt = torch.optim.Adam(vae.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3000):
        idx = torch.randint(len(actions), (256,), generator=gen)
        recon, mean, std = vae(obs[idx], act[idx])
        loss = bcq.vae_loss(recon, act[idx], mean, std)
        opt.zero_grad()
        loss.backward()
        opt.step()
    pert = bcq.Perturbation(1, 1, hidden=(64, 64), phi=PHI, action_low=[LOW], action_high=[HIGH])
    opt = torch.optim.Adam(pert.parameters(), lr=1e-3)
    for _ in range(1000):
        with torch.no_grad():
            a = vae.decode(torch.zeros(256, 1))
        loss = bcq.perturbation_loss(critic(pert(torch.zeros(256, 1), a)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return vae.eval(), pert.eval()


def vae_support(vae, k=81):
    """The decoded actions over a grid of the clipped latent [-0.5, 0.5]^2: what the VAE can propose."""
    z1, z2 = np.meshgrid(np.linspace(-0.5, 0.5, k), np.linspace(-0.5, 0.5, k))
    z = torch.as_tensor(np.stack([z1.ravel(), z2.ravel()], 1), dtype=torch.float32)
    with torch.no_grad():
        return vae.decode(torch.zeros(len(z), 1), z).numpy()[:, 0]


def reachable(support, phi):
    """Mask over GRID: the actions within phi (of half the range, here 1) of an action the VAE can propose."""
    s = np.sort(support)
    i = np.clip(np.searchsorted(s, GRID), 1, len(s) - 1)
    dist = np.minimum(np.abs(GRID - s[i - 1]), np.abs(GRID - s[i]))
    return dist <= phi + 1e-3


def segments(mask):
    """(start, width) of the runs of True in a mask over GRID, for broken_barh."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
    return [(GRID[a], GRID[min(b, len(GRID) - 1)] - GRID[a]) for a, b in zip(edges[::2], edges[1::2])]


def data_histogram(ax, actions):
    ax.hist(actions, bins=np.linspace(LOW, HIGH, 81), density=True, color=DATA_COLOR, alpha=0.6,
            label="the data's actions at s")
    ax.set_ylim(0, 1.6 * ax.get_ylim()[1])  # headroom: the legend sits above the bars
    ax.set_ylabel("density")
    ax.set_yticks([])


def pipeline_figure(actions, vae, pert, path):
    torch.manual_seed(1)
    with torch.no_grad():
        a = vae.decode(torch.zeros(N_CANDIDATES, 1))
        shifted = pert(torch.zeros(N_CANDIDATES, 1), a)
    a, shifted = a.numpy()[:, 0], shifted.numpy()[:, 0]
    q = critic(shifted)
    best = int(np.argmax(q))

    fig, axes = plt.subplots(3, 1, figsize=(7.5, 7), sharex=True, gridspec_kw=dict(height_ratios=[1, 0.8, 1.4]))
    ax = axes[0]
    data_histogram(ax, actions)
    for x in a:
        ax.axvline(x, ymax=0.35, color=VAE_COLOR, lw=2)
    ax.plot([], [], color=VAE_COLOR, lw=2, label=f"{N_CANDIDATES} VAE samples $a_i \\sim G_\\omega(s)$")
    ax.set_title("1. the VAE proposes actions like the data's", loc="left")
    ax.legend(loc="upper left", fontsize=10)

    ax = axes[1]
    order = np.argsort(a)
    for row, i in enumerate(order):
        ax.plot([a[i] - PHI, a[i] + PHI], [row, row], color=PERT_COLOR, lw=5, alpha=0.3, solid_capstyle="butt")
        ax.annotate("", xy=(shifted[i], row), xytext=(a[i], row),
                    arrowprops=dict(arrowstyle="->", color=PERT_COLOR, lw=1.5))
        ax.plot(a[i], row, "o", color=VAE_COLOR, ms=4)
    ax.plot([], [], color=PERT_COLOR, lw=5, alpha=0.3, label=f"$[a_i - \\Phi, a_i + \\Phi]$, $\\Phi = {PHI}$")
    ax.plot([], [], marker=r"$\rightarrow$", ls="", color=PERT_COLOR, ms=12,
            label="$a_i \\to a_i + \\xi_\\phi(s, a_i)$")
    ax.set_yticks([])
    ax.set_ylabel("samples")
    ax.set_ylim(-1, N_CANDIDATES)
    ax.set_title("2. the perturbation model shifts each by at most $\\Phi$", loc="left")
    ax.legend(loc="upper left", fontsize=10)

    ax = axes[2]
    ax.plot(GRID, critic(GRID), color=Q_COLOR, label="critic $Q_{\\theta_1}(s, a)$")
    ax.plot(shifted, q, "o", color=PERT_COLOR, ms=5, label="perturbed samples")
    ax.plot(shifted[best], q[best], "*", color="k", ms=16, label=f"BCQ's action: the argmax, a = {shifted[best]:.2f}")
    peak = GRID[np.argmax(critic(GRID))]
    ax.axvline(peak, color=Q_COLOR, ls=":", lw=1.5)
    ax.annotate(f"the critic's own maximum,\na = {peak:.2f}: hardly any data there",
                xy=(peak, critic(np.array([peak]))[0]), xytext=(0.05, 3.5), fontsize=10,
                arrowprops=dict(arrowstyle="->", color="0.3"))
    ax.set_ylim(-3.5, 4.8)
    ax.set_ylabel("Q (illustrative)")
    ax.set_xlabel("action a at state s (bounds [-1, 1]; half the range is 1)")
    ax.set_title("3. the critic's argmax picks one", loc="left")
    ax.legend(loc="lower left", fontsize=10)
    ax.set_xlim(LOW, HIGH)
    fig.tight_layout()
    plots.save_figure(fig, path)


def reach_figure(actions, vae, path):
    support = vae_support(vae)
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(7.5, 5.8), sharex=True, gridspec_kw=dict(height_ratios=[1.2, 1]))
    data_histogram(ax0, actions)
    axq = ax0.twinx()
    axq.plot(GRID, critic(GRID), color=Q_COLOR, label="critic $Q(s, a)$ (illustrative)")
    axq.set_ylabel("Q", color=Q_COLOR)
    axq.set_ylim(-3.5, 4.8)
    lines = ax0.get_legend_handles_labels()
    qlines = axq.get_legend_handles_labels()
    ax0.legend(lines[0] + qlines[0], lines[1] + qlines[1], loc="upper left", fontsize=10)
    ax0.set_title("the data at s, and a critic that is wrong where the data is not", loc="left")

    for row, phi in enumerate(PHIS):
        mask = reachable(support, phi)
        ax1.broken_barh(segments(mask), (row - 0.3, 0.6), color=VAE_COLOR, alpha=0.25 + 0.15 * row)
        best = GRID[mask][np.argmax(critic(GRID[mask]))]
        ax1.plot(best, row, "*", color="k", ms=14)
        ax1.annotate(f"a = {best:.2f}", (best, row), xytext=(8, 6), textcoords="offset points", fontsize=10)
    ax1.axvline(GRID[np.argmax(critic(GRID))], color=Q_COLOR, ls=":", lw=1.5)
    ax1.set_yticks(range(len(PHIS)), [f"$\\Phi = {p:g}$" for p in PHIS])
    ax1.set_ylim(-0.6, len(PHIS) - 0.4)
    ax1.invert_yaxis()
    ax1.set_xlim(LOW, HIGH)
    ax1.set_xlabel("action a at state s (bounds [-1, 1]; a shift of $\\Phi$ of half the range is $\\Phi$ here)")
    ax1.set_title("reachable: the VAE's proposals widened by $\\Phi$ (star: best under the critic)", loc="left",
                  fontsize=11)
    fig.tight_layout()
    plots.save_figure(fig, path)


SWEEP = {0.0: ("record-bcq-phi", "bcq-phi=0.0"), 0.05: ("record", "bcq"), 0.25: ("record-bcq-phi", "bcq-phi=0.25")}
MIXED = ["hopper-medium-replay", "hopper-medium-expert"]


def sweep_figure(path):
    sources = {tag: plots.load_results(f"results/{tag}") for tag in ("record", "record-bcq-phi")}
    record = sources["record"]
    fig, axes = plt.subplots(2, 2, figsize=(8.5, 7), sharex=True, gridspec_kw=dict(height_ratios=[1.4, 1]))
    xs = list(range(len(SWEEP)))
    for col, ds in enumerate(MIXED):
        runs = {phi: [r for r in plots.select(sources[tag], lab, ds) if r["seed"] in (0, 1, 2)]
                for phi, (tag, lab) in SWEEP.items()}
        ax = axes[0, col]
        plots.plot_baseline(ax, record, "bc", ds, color="C7", name="BC")
        plots.plot_baseline(ax, record, "10%bc", ds, color="C2", name="10%BC")
        record_of = {phi: [plots.record_score(r) for r in runs[phi]] for phi in SWEEP}  # last 5 evaluations
        plots.plot_sweep(ax, xs, [record_of[phi] for phi in SWEEP], color=VAE_COLOR, name="BCQ")
        for x, phi in zip(xs, SWEEP):  # the seeds again, beside the interval, large enough to count
            ax.plot(np.full(len(runs[phi]), x + 0.08), record_of[phi], "o", color=VAE_COLOR,
                    ms=5, alpha=0.7, label="BCQ: each seed" if x == 0 else None)
        ax.set_title(ds)
        ax.legend(fontsize=10, loc="upper left")
        ax.set_ylim(0, 180)
        ax = axes[1, col]
        ax.axhline(0, color="k", lw=0.8)
        for x, phi in zip(xs, SWEEP):
            err = [np.mean(r["curve"]["q_start"][-plots.RECORD_K:] - r["curve"]["mc_discounted"][-plots.RECORD_K:])
                   for r in runs[phi]]
            ax.plot(np.full(len(err), x), err, "o", color=Q_COLOR, ms=6, alpha=0.8)
        ax.set_ylabel("estimate - return\n(discounted, per seed)")
        ax.set_xticks(xs, [f"$\\Phi = {p:g}$" for p in SWEEP])
        ax.set_xlabel("constraint width (3 seeds each)")
        ax.set_ylim(-50, 110)
        ax.text(0.02, 0.9, "critic above its policy's return", transform=ax.transAxes, fontsize=10, va="top")
        ax.text(0.98, 0.06, "critic below the return", transform=ax.transAxes, fontsize=10, ha="right")
    axes[0, 0].set_ylabel("normalised score\n(mean of the last 5 evaluations)")
    fig.tight_layout()
    plots.save_figure(fig, path)


def main(out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    actions = data_actions()
    vae, pert = train_models(actions)
    paths = [out_dir / "bcq_pipeline.png", out_dir / "bcq_reach.png", out_dir / "bcq_phi_sweep.png"]
    with plt.rc_context({"font.size": 12}):
        pipeline_figure(actions, vae, pert, paths[0])
        reach_figure(actions, vae, paths[1])
        sweep_figure(paths[2])
    return paths


if __name__ == "__main__":
    import sys

    print("\n".join(str(p) for p in main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("book/figures"))))
