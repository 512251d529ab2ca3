"""Do the expert's falling episodes pull IQL off the expert's level on hopper-medium-expert? Train without them.

IQL's 1M-step runs on ``hopper-medium-expert`` (``results/record-1m``) score near the expert's level until about
120,000 steps and then, at most evaluations, about 40. ``experiments/medium_expert_states.py`` found their falling
episodes in the expert's states, following the expert's own falling episodes (528 of its 1,352 episodes in the data end
before 1,000 steps, at a median of 318: 527 fall, the last is cut by the dataset's end), and AWR weights that, past the first steps, do not tell those from the expert's full-length
episodes. That is a description, not a cause. This script makes the test: the same data without the expert's falling
episodes (the medium half untouched), written as a local Minari dataset (``minari:minirl/hopper/medium-expert-nofalls-v0``),
and IQL trained on it with the settings of the record runs' first ``--steps`` steps: the ``cpu`` scale, bfloat16 where
the CPU has it, evaluations every 20,000 steps and the cosine actor schedule of a 1M-step run (``--set
max_steps=1000000``), so that each run is, but for the data, the record run of its seed cut at ``--steps``.

The rule, fixed before the runs: over the evaluations from ``--window`` (140,000 to 300,000 steps, 9 per run), take each
run's mean score. **The expert's falling episodes explain the drop** if the runs without them score higher than the
record runs on the full data by a 95% bootstrap interval (over seeds) above 0 *and* stay at the expert's level (their
mean over the window 100 or more); **they explain part of it** if the interval is above 0 but the mean stays below 100;
**they do not** if the interval reaches 0. ``--check`` first trains the full data with the same settings for 40,000
steps (seed 0) and compares its evaluations with the record run's: the cut runs are the record runs' settings only if
they match.

    OMP_NUM_THREADS=1 taskset -c 1 python experiments/medium_expert_falls.py --check --seeds 0 1 2

Runs go to ``results/record-1m-falls`` (the check to ``results/record-1m-falls-check``); the dataset to
``$MINARI_DATASETS_PATH`` (outside git, remade from ``hopper-medium-expert`` if missing). Each phase resumes.
The runs are made by ``experiments/run_suite.py`` (the runs' ``result.json`` record the command as it was run, when
both scripts were in ``benchmarks/``).

Book section: book/iql.md, "Results of record", the paragraph "The test: without the expert's falling episodes";
notebook 4 (``notebooks/04_iql.ipynb``), "The test: the same data without the expert's falling episodes".
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

from minirl import datasets, plots

REPO = Path(__file__).resolve().parent.parent
SOURCE = "hopper-medium-expert"
DATASET_ID = "minirl/hopper/medium-expert-nofalls-v0"
LIMIT = 1000  # Hopper's episode limit: an episode shorter than this fell (terminated), but for the expert half's
# last episode, which the dataset's end cuts at 303 steps (527 of the 528 dropped end with a terminal)


def without_expert_falls(ds):
    """``hopper-medium-expert`` (the medium tier followed by the expert tier, equal halves) without the expert half's
    episodes shorter than the 1,000-step limit; the episodes kept and the number dropped."""
    half = len(ds) // 2
    bounds = ds.episode_bounds()
    keep = [i for i, (start, stop) in enumerate(bounds) if start < half or stop - start == LIMIT]
    return ds.select_episodes(keep), len(bounds) - len(keep)


def export() -> str:
    """The dataset without the expert's falling episodes as a local Minari dataset (made once); its minirl name.
    The source is loaded and filtered every time, for the size an existing copy must have."""
    ds = datasets.load_dataset(SOURCE, progress=False)
    kept, dropped = without_expert_falls(ds)
    return datasets.to_local_minari(DATASET_ID, "hopper", len(kept), lambda: (
        kept, f"{SOURCE} (sha256 {ds.fingerprint()[:12]}) without the {dropped} episodes of its expert half that end "
              f"before {LIMIT} steps"))


def suite(names: list[str], tag: str, steps: int, seeds: list[int], root: str) -> None:
    cmd = [sys.executable, str(REPO / "experiments" / "run_suite.py"), "--scale", "cpu", "--precision", "auto",
           "--threads", "1", "--root", root, "--tag", tag, "--algos", "iql", "--datasets", *names,
           "--seeds", *map(str, seeds), "--steps", str(steps), "--eval-every", "20000",
           "--set", "max_steps=1000000"]
    if subprocess.run(cmd, cwd=REPO).returncode:
        raise SystemExit(f"run_suite failed: {' '.join(cmd)}")


def run_dir(tag: Path, name: str, seed: int) -> Path:
    """Where run_suite puts a run of this script: ``<tag>/iql-max_steps=1000000/<dataset>/s<seed>`` (the label
    names the --set value)."""
    return tag / "iql-max_steps=1000000" / datasets.file_stem(name) / f"s{seed}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=300_000, help="gradient steps of each run (of a 1M-step schedule)")
    p.add_argument("--window", type=int, nargs=2, default=[140_000, 300_000], metavar=("FROM", "TO"))
    p.add_argument("--check", action="store_true", help="first reproduce the record run (seed 0) for 40,000 steps")
    p.add_argument("--root", default="results")
    p.add_argument("--record", default="results/record-1m/iql/hopper-medium-expert",
                   help="the full-data runs to compare with")
    a = p.parse_args(argv)
    lo, hi = a.window
    if not 0 < lo <= hi <= a.steps:
        p.error(f"--window: expected 0 < FROM <= TO <= --steps ({a.steps}), got {lo} {hi}")
    record = Path(a.record)
    if a.check:
        suite([SOURCE], "record-1m-falls-check", 40_000, [0], a.root)
        ours = plots.evaluations(run_dir(Path(a.root) / "record-1m-falls-check", SOURCE, 0))
        theirs = plots.evaluations(record / "s0")
        pairs = [(s, ours[s], theirs.get(s)) for s in sorted(ours)]
        print("check, seed 0 on the full data (step, this run, the record run):", pairs)
        if any(t is None or abs(o - t) > 1e-6 for _, o, t in pairs):
            raise SystemExit("--check: the evaluations differ from the record run's, so runs on this machine are not "
                             "the record runs cut short; compare against full-data runs made here instead (--record)")
    name = export()
    info = datasets.dataset_info(name, progress=False)
    print(f"{name}: {info['transitions']:,} transitions, {info['episodes']:,} episodes")
    suite([name], "record-1m-falls", a.steps, a.seeds, a.root)
    cut, short = plots.window_means([run_dir(Path(a.root) / "record-1m-falls", name, s) for s in a.seeds], lo, hi)
    full, short_full = plots.window_means(sorted(record.glob("s*")), lo, hi)
    print(f"mean score over the evaluations at {lo:,}-{hi:,} steps, per seed")
    for run in short + short_full:
        print(f"  left out, its evaluations do not reach {hi:,} steps yet: {run}")
    print("  without the expert's falling episodes:", {k: round(v, 1) for k, v in cut.items()})
    print("  the full data (record runs):          ", {k: round(v, 1) for k, v in full.items()})
    if len(cut) >= 2 and len(full) >= 2:
        diff, low, high = plots.difference_ci(list(cut.values()), list(full.values()))
        verdict = ("do not explain the drop" if plots.verdict(low, high) != "above" else
                   "explain the drop" if np.mean(list(cut.values())) >= 100 else "explain part of the drop")
        print(f"  difference {diff:+.1f} [{low:+.1f}, {high:+.1f}] (95% bootstrap over seeds): "
              f"the expert's falling episodes {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
