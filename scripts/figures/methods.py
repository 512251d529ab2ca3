"""The map of the methods' figure (book/methods.md): a decision chart, from questions about the data to a family of
methods.

One figure, ``methods_chart.png``, drawn with matplotlib alone (no runs are read): three questions about the
dataset (whole paths present? copying them good enough? pieces that join?), each a yes/no branch, ending in three
families: filtered imitation (10%BC, goal-BC, path-BC), staying near
the data (BC, one-step RL, TD3+BC, BCQ with a small Phi), and multi-step dynamic programming (IQL with a high
expectile, CQL). A note names the methods that end highest after online fine-tuning in CORL's AntMaze runs. Deterministic.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

QUESTION = dict(facecolor="#eef2f7", edgecolor="0.3")
LEAF = {"imitate": "#fde7c9", "near": "#e3e3e3", "dp": "#d4e6f6"}

# name -> (x, y, text, kind)
NODES = {
    "q1": (0.5, 0.88, "Does some episode in the data do the\nwhole task (start to goal, or a high return)?", "q"),
    "q2": (0.22, 0.60, "Is copying those episodes\n(picked by return, or by the goal\nthey reach) good enough?", "q"),
    "q3": (0.72, 0.60, "Do pieces of different episodes\ncover the way, so that joining\nthem does the task?", "q"),
    "imitate": (0.16, 0.22, "Filtered imitation\n10%BC, goal-BC, path-BC\nknob: the fraction kept", "imitate"),
    "dp": (0.50, 0.22, "Dynamic programming\nIQL (expectile 0.7-0.9), CQL\nknob: tau, or alpha", "dp"),
    "near": (0.84, 0.22, "Stay near the data\nBC, one-step RL, TD3+BC,\nBCQ with a small Phi", "near"),
}
EDGES = [("q1", "q2", "yes"), ("q1", "q3", "no"), ("q2", "imitate", "yes"), ("q2", "dp", "no"),
         ("q3", "dp", "yes"), ("q3", "near", "no")]
HALF = {"q": (0.19, 0.08), "imitate": (0.145, 0.075), "dp": (0.145, 0.075), "near": (0.145, 0.075)}  # half sizes


def _half(name: str) -> tuple[float, float]:
    """Half the width and height of a node's box: one size for the questions, one per leaf."""
    return HALF["q"] if NODES[name][3] == "q" else HALF[name]


def main(out_dir: Path) -> list[Path]:
    with plt.rc_context({"font.size": 11}):
        fig, ax = plt.subplots(figsize=(11, 6.2))
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
        for name, (x, y, text, kind) in NODES.items():
            w, h = _half(name)
            style = QUESTION if kind == "q" else dict(facecolor=LEAF[kind], edgecolor="0.3")
            ax.add_patch(FancyBboxPatch((x - w, y - h), 2 * w, 2 * h, boxstyle="round,pad=0.01,rounding_size=0.02",
                                        linewidth=1.2, **style))
            ax.text(x, y, text, ha="center", va="center", fontsize=10.5 if kind != "q" else 11,
                    fontweight="bold" if kind != "q" else "normal")
        for a, b, label in EDGES:
            (xa, ya, *_), (xb, yb, *_) = NODES[a], NODES[b]
            start = (xa, ya - _half(a)[1])
            end = (xb, yb + _half(b)[1] + 0.01)
            ax.annotate("", xy=end, xytext=start, arrowprops=dict(arrowstyle="-|>", color="0.25", lw=1.4))
            ax.text((start[0] + end[0]) / 2 + 0.012, (start[1] + end[1]) / 2, label, color="0.15", fontsize=11,
                    fontstyle="italic", ha="left", va="center")
        ax.text(0.5, 0.04, "A later online phase will fine-tune the policy? In CORL's AntMaze runs CQL and Cal-QL "
                "end highest (chapter 'What came after').", ha="center", va="center", fontsize=10.5, color="0.2")
        ax.set_title("Which family of offline methods fits a dataset", fontsize=13)
        out = Path(out_dir) / "methods_chart.png"
        fig.savefig(out, dpi=130, bbox_inches="tight")
        plt.close(fig)
    return [out]
