"""minirl.plots statistics: the interquartile mean, bootstrap confidence intervals, the stratified bootstrap over
datasets and the table of a comparison.  Expected values are computed by hand in the comments."""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from minirl import plots


# --- interquartile mean ------------------------------------------------------------------------------------------

def test_iqm_of_1_to_8_is_the_mean_of_3_4_5_6():
    assert plots.iqm(np.arange(1, 9)) == pytest.approx(4.5)        # (3 + 4 + 5 + 6) / 4
    assert plots.iqm([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx(4.5)  # order does not matter


def test_iqm_of_four_values_is_the_mean_of_the_middle_two():
    assert plots.iqm([1.0, 2.0, 3.0, 4.0]) == pytest.approx(2.5)
    assert plots.iqm([-100.0, 2.0, 3.0, 1e6]) == pytest.approx(2.5)  # the extremes do not count


def test_iqm_fractional_boundaries():
    # n = 5: each value holds 1/5; [1/4, 3/4] covers 0.15 of the 2nd, 0.2 of the 3rd, 0.15 of the 4th value.
    # sorted (0, 0, 1, 10, 100): (0.15 * 0 + 0.2 * 1 + 0.15 * 10) / 0.5 = 3.4
    assert plots.iqm([100, 0, 10, 1, 0]) == pytest.approx(3.4)
    # n = 3: weights (1/6, 2/3, 1/6): (0 + 2/3 * 3 + 30 / 6) = 7
    assert plots.iqm([0.0, 3.0, 30.0]) == pytest.approx(7.0)
    # n = 6: 2nd and 5th values weigh 1/6, 3rd and 4th 1/3; the outlier 100 (6th) has weight 0
    assert plots.iqm([1, 2, 3, 4, 5, 100]) == pytest.approx(2 / 6 + 3 / 3 + 4 / 3 + 5 / 6)
    np.testing.assert_allclose(plots.iqm_weights(3), [1 / 6, 2 / 3, 1 / 6])
    for n in range(1, 30):
        assert plots.iqm_weights(n).sum() == pytest.approx(1.0)


def test_iqm_matches_scipy_trim_mean_when_n_is_a_multiple_of_4_and_not_otherwise():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in (4, 8, 12, 20):
        x = rng.normal(size=n) ** 3
        assert plots.iqm(x) == pytest.approx(stats.trim_mean(x, 0.25))
    x = np.array([0.0, 0.0, 1.0, 10.0, 100.0])
    assert stats.trim_mean(x, 0.25) == pytest.approx(11 / 3)  # drops one whole value at each end
    assert plots.iqm(x) != pytest.approx(stats.trim_mean(x, 0.25))


def test_iqm_degenerate_and_rows():
    assert plots.iqm([7.0]) == 7.0
    assert plots.iqm([2.0, 4.0]) == pytest.approx(3.0)
    rows = np.array([[1, 2, 3, 4], [10, 20, 30, 40.0]])
    np.testing.assert_allclose(plots.iqm(rows, axis=1), [2.5, 25.0])
    with pytest.raises(ValueError, match="empty"):
        plots.iqm([])


# --- bootstrap confidence intervals ------------------------------------------------------------------------------

def test_bootstrap_ci_contains_the_mean_and_is_deterministic():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.normal(50, 10, size=rng.integers(2, 12))
        lo, hi = plots.bootstrap_ci(x, seed=3)
        assert lo <= x.mean() <= hi
        assert (lo, hi) == plots.bootstrap_ci(x, seed=3)
        assert x.min() - 1e-9 <= lo and hi <= x.max() + 1e-9  # a resample only holds values seen
    x = rng.normal(size=10)
    assert plots.bootstrap_ci(x, seed=0) != plots.bootstrap_ci(x, seed=1)


def test_bootstrap_ci_shrinks_as_n_grows():
    rng = np.random.default_rng(2)
    widths = []
    for n in (5, 50, 500):
        lo, hi = plots.bootstrap_ci(rng.normal(size=n), n_boot=4000)
        widths.append(hi - lo)
    assert widths[0] > 2 * widths[1] > 4 * widths[2]
    # and roughly as a normal interval: 2 * 1.96 / sqrt(500) = 0.175
    assert widths[2] == pytest.approx(2 * 1.96 / np.sqrt(500), rel=0.2)


def test_bootstrap_ci_confidence_and_statistic():
    x = np.arange(20.0)
    lo90, hi90 = plots.bootstrap_ci(x, confidence=0.9)
    lo99, hi99 = plots.bootstrap_ci(x, confidence=0.99)
    assert lo99 < lo90 < hi90 < hi99
    # the median of a resample of (0, 0, 0, 1000) is 0 unless it holds at least two 1000s; the mean is 0 only for
    # the resample of four 0s (probability (3/4)^4 = 0.32): above the 40% quantile the mean is 250 (one 1000)
    assert plots.bootstrap_ci([0, 0, 0, 1000.0], statistic=np.median)[0] == 0.0
    assert plots.bootstrap_ci([0, 0, 0, 1000.0], confidence=0.2)[0] == 250.0  # its 40% quantile
    # any callable works (a non-vectorised one goes row by row)
    assert plots.bootstrap_ci(x, n_boot=200, statistic=lambda v: float(np.max(v)))[1] == 19.0


def test_bootstrap_ci_degenerate_cases():
    assert plots.bootstrap_ci([42.0]) == (42.0, 42.0)
    assert plots.bootstrap_ci([3.0, 3.0, 3.0]) == pytest.approx((3.0, 3.0))


@pytest.mark.parametrize("kwargs, message", [
    (dict(values=[]), "values is empty"),
    (dict(values=[1.0, float("nan")]), "1 non-finite values \\(first at index 1\\)"),
    (dict(values=[[1.0, 2.0]]), "one-dimensional"),
    (dict(values=[1.0, 2.0], confidence=95), "confidence must be strictly between 0 and 1"),
    (dict(values=[1.0, 2.0], confidence=0.0), "confidence must be strictly between 0 and 1"),
    (dict(values=[1.0, 2.0], n_boot=0), "n_boot must be a positive integer"),
])
def test_bootstrap_ci_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plots.bootstrap_ci(**kwargs)


# --- the stratified bootstrap ------------------------------------------------------------------------------------

def test_stratified_bootstrap_never_mixes_datasets():
    # Dataset A: every seed scores 0; dataset B: every seed scores 100.  A resample within each dataset always holds
    # three 0s and three 100s, so the mean is exactly 50 in every resample.  Pooling the six runs and resampling
    # them together (the wrong, unstratified bootstrap) changes the share of each dataset and widens the interval.
    groups = {"A": [0.0, 0.0, 0.0], "B": [100.0, 100.0, 100.0]}
    assert plots.stratified_bootstrap_ci(groups, statistic=np.mean) == pytest.approx((50.0, 50.0))
    lo, hi = plots.bootstrap_ci([0.0] * 3 + [100.0] * 3)
    assert lo < 30 and hi > 70
    # unequal sizes keep their proportions: 2 runs of A and 6 of B -> the mean is 75 in every resample
    assert plots.stratified_bootstrap_ci([[0.0, 0.0], [100.0] * 6], statistic=np.mean) == pytest.approx((75, 75))


def test_stratified_bootstrap_of_the_iqm():
    groups = {"A": [10.0, 20.0, 30.0], "B": [40.0, 50.0, 60.0]}
    lo, hi = plots.stratified_bootstrap_ci(groups, seed=5)
    assert lo < plots.iqm([10, 20, 30, 40, 50, 60.0]) < hi
    assert (lo, hi) == plots.stratified_bootstrap_ci(groups, seed=5)
    with pytest.raises(ValueError, match="groups is empty"):
        plots.stratified_bootstrap_ci({})
    with pytest.raises(ValueError, match="group 1 is empty"):
        plots.stratified_bootstrap_ci([[1.0], []])


# --- from runs to the table --------------------------------------------------------------------------------------

def _runs(cells: dict) -> list[dict]:
    """Runs of flat curves: five evaluations at the given score (so the statistic of record, the mean of the last
    five, is that score, and so is the final evaluation); ``None`` is an unfinished run."""
    return [{"label": lab, "dataset": d, "seed": i, "score": s,
             "curve": {"step": np.arange(1, 6) * 1000, "score": np.full(5, np.nan if s is None else s)}}
            for (lab, d), scores in cells.items() for i, s in enumerate(scores)]


def test_aggregate_iqm_and_ci_table():
    runs = _runs({("bc", "a"): [10.0, 20.0, 30.0], ("bc", "b"): [40.0, 50.0, 60.0],
                  ("iql", "a"): [70.0, 80.0, 90.0]})
    runs.append({"label": "iql", "dataset": "b", "seed": 0, "score": None})  # an unfinished evaluation is skipped
    agg = plots.aggregate_iqm(runs, "bc", ["a", "b"])
    assert agg["iqm"] == pytest.approx(plots.iqm([10, 20, 30, 40, 50, 60.0]))  # = 35
    assert agg["n_runs"] == 6 and agg["datasets"] == ["a", "b"] and agg["missing"] == []
    assert agg["lo"] < 35 < agg["hi"]
    agg = plots.aggregate_iqm(runs, "iql", ["a", "b"])
    assert agg["datasets"] == ["a"] and agg["missing"] == ["b"] and agg["n_runs"] == 3
    assert np.isnan(plots.aggregate_iqm(runs, "cql", ["a"])["iqm"])
    assert plots.common_datasets(runs, ["bc", "iql"], ["a", "b"]) == ["a"]

    table = plots.ci_table(runs, ["bc", "iql"], ["a", "b"]).splitlines()
    lo, hi = plots.bootstrap_ci([10.0, 20.0, 30.0])
    lo2, hi2 = plots.bootstrap_ci([70.0, 80.0, 90.0])
    assert table[2] == f"| a | 20.0 [{lo:.1f}, {hi:.1f}] (3) | 80.0 [{lo2:.1f}, {hi2:.1f}] (3) |"
    assert table[3].endswith("| not run |")
    # the IQM row uses only the dataset both labels ran ("a"): IQM of (10, 20, 30) = 20
    assert table[4].startswith("| IQM over 1 common dataset (runs) | 20.0 [")
    assert len(plots.ci_table(runs, ["bc"], ["a", "b"], aggregate=False).splitlines()) == 4
    assert "no dataset run by every label" in plots.ci_table(_runs({("bc", "a"): [1.0], ("iql", "b"): [2.0]}),
                                                             ["bc", "iql"], ["a", "b"])
    # a label without any run does not empty the IQM row of the others
    last = plots.ci_table(runs, ["bc", "iql", "cql"], ["a", "b"]).splitlines()[-1]
    assert last.startswith("| IQM over 1 common dataset (runs) | 20.0 [") and last.endswith("| not run |")


def test_ci_summary_matches_bootstrap_ci():
    runs = _runs({("bc", "a"): [1.0, 5.0, 9.0]})
    s = plots.ci_summary(runs)[("bc", "a")]
    assert s["mean"] == pytest.approx(5.0) and s["n"] == 3
    assert (s["lo"], s["hi"]) == plots.bootstrap_ci([1.0, 5.0, 9.0])


def test_plot_aggregate_labels_axes():
    runs = _runs({("bc", "a"): [10.0, 20.0, 30.0], ("iql", "a"): [70.0, 80.0, 90.0]})
    aggs = {lab: plots.aggregate_iqm(runs, lab, ["a"]) for lab in ("bc", "iql", "cql")}
    fig, ax = plt.subplots()
    assert plots.plot_aggregate(ax, aggs) == ["bc", "iql"]  # cql has no run: not drawn
    assert "IQM" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["bc (3 runs)", "iql (3 runs)"]
    plt.close(fig)


def test_runs_table_states_where_the_runs_come_from():
    hw_a = {"cpu": "AMD EPYC", "cpu_count": 2, "torch_threads": 1, "torch": "2.13.0+cpu"}
    hw_b = dict(hw_a, cpu="Intel Xeon", gpu="NVIDIA L4", cpu_id="family 6 model 143 stepping 8")
    runs = [{"label": "bc", "dataset": "a", "seed": s, "scale": "cpu", "steps": 20_000, "wall_time_s": 1800.0,
             "hardware": hw_a if s < 2 else hw_b} for s in range(3)]
    runs.append({"label": "cql", "dataset": "a", "seed": 0, "scale": "smoke", "steps": 20, "wall_time_s": None})
    budgets = {"cpu scale": lambda a: {"bc": 20_000}.get(a, 1_200)}
    # a chapter's notebook: the runs, scales and steps, no laboratory detail
    lines = plots.runs_table(runs, ["bc", "cql", "iql"], budgets).splitlines()
    assert lines[0] == "| algorithm | runs | scale | steps run | cpu scale |"
    assert lines[1].count("|") == lines[0].count("|")
    assert lines[2:] == ["| bc | 3 | cpu | 20,000 | 20,000 |", "| cql | 1 | smoke | 20 | 1,200 |",
                         "| iql | 0 | - | - | 1,200 |"]  # no run at all: said, not dropped
    assert len(plots.runs_table(runs, ["bc"]).splitlines()[0].split("|")) == 6  # no budget columns
    # lab=True: the wall time and the hardware too (the lab pages)
    table = plots.runs_table(runs, ["bc", "cql", "iql"], budgets, lab=True)
    lines = table.splitlines()
    assert lines[0] == "| algorithm | runs | scale | steps run | cpu scale | wall time | hardware |"
    assert lines[1].count("|") == lines[0].count("|")
    # 3 runs of half an hour: 1.5 h; both machines listed once each, the GPU named
    assert lines[2] == ("| bc | 3 | cpu | 20,000 | 20,000 | 1.5 h | AMD EPYC (2 cores, 1 thread), torch 2.13.0+cpu; "
                        "Intel Xeon [family 6 model 143 stepping 8] (2 cores, 1 thread), torch 2.13.0+cpu, GPU NVIDIA L4 |")
    assert lines[3] == "| cql | 1 | smoke | 20 | 1,200 | 0.0 h + 1 not known | - |"  # no wall time: said
    assert lines[4] == "| iql | 0 | - | - | 1,200 | 0.0 h | - |"
    assert len(plots.runs_table(runs, ["bc"], lab=True).splitlines()[0].split("|")) == 8


def test_lab_tables_give_machines_rates_wall_times_and_parts():
    hw_a = {"cpu": "AMD EPYC", "cpu_count": 2, "torch_threads": 1, "torch": "2.13.0+cpu"}
    hw_b = dict(hw_a, cpu="Intel Xeon")
    runs = [{"label": "bc", "dataset": "a", "seed": s, "precision": "bf16", "updates_per_s": 100.0 * (s + 1),
             "wall_time_s": 600.0 * (s + 1), "segments_s": [600.0 * (s + 1)], "hardware": hw_a if s < 2 else hw_b}
            for s in range(3)]
    runs.append({"label": "bc", "dataset": "a", "seed": 3, "precision": "float32", "updates_per_s": 50.0,
                 "wall_time_s": None, "segments_s": [None, 300.0], "hardware": hw_a, "data": {"episodes": 3924}})
    lines = plots.lab_table(runs, ["bc", "iql"], names={"bc": "BC"}).splitlines()
    assert lines[0] == ("| algorithm | runs | machine (runs) | precision | updates/s | wall time per run | "
                        "wall time in all |")
    assert lines[1].count("|") == lines[0].count("|")
    assert lines[2] == ("| BC | 4 | AMD EPYC (2 cores, 1 thread), torch 2.13.0+cpu (3); Intel Xeon (2 cores, 1 thread), "
                        "torch 2.13.0+cpu (1) | bf16, float32 | 50.0 to 300.0 | 10 to 30 min per run (1 run resumed "
                        "without a record of the earlier part's time) | 1.0 h + 1 not known |")
    assert lines[3] == "| iql | 0 | - | - | - | - | - |"
    rows = plots.lab_runs_table(runs).splitlines()  # no "path": no log to read, so no update time
    assert rows[0].count("|") == rows[1].count("|") == rows[2].count("|")
    assert rows[2] == "| bc, a, seed 0 | AMD EPYC, 1 thread, bf16 | 1 | 100.0 | not recorded | 0.17 h | - |"
    assert rows[5] == "| bc, a, seed 3 | AMD EPYC, 1 thread, float32 | several | 50.0 | not recorded | not recorded | 3,924 |"


def test_wall_minutes_gives_the_range_and_counts_the_unknown():
    runs = [{"wall_time_s": 600.0}, {"wall_time_s": 1620.0}, {"wall_time_s": None}]
    assert plots.wall_minutes(runs[:2]) == "10 to 27 min per run"
    assert plots.wall_minutes(runs) == ("10 to 27 min per run (1 run resumed without a record of the earlier "
                                        "part's time)")
    assert plots.wall_minutes(runs[2:] * 2).startswith("no known wall time (2 runs resumed")
    assert plots.wall_minutes(runs[:1]) == "10 min" and plots.wall_minutes(runs[:1] * 2) == "10 min per run"


# --- the spread over seeds ---------------------------------------------------------------------------------------

def test_sample_std_divides_by_n_minus_1():
    # 1, 2, 6: mean 3, squared deviations 4 + 1 + 9 = 14; sample variance 14 / 2 = 7 (population: 14 / 3)
    assert plots.sample_std([1.0, 2.0, 6.0]) == pytest.approx(7 ** 0.5)
    assert plots.sample_std([5.0, 5.0]) == 0.0
    assert np.isnan(plots.sample_std([4.0]))             # one seed: no spread to estimate


def test_score_summary_and_table_use_the_sample_std():
    runs = [{"label": "bcq", "dataset": "d", "seed": s, "score": v} for s, v in enumerate([10.0, 20.0, 45.0])]
    runs.append({"label": "bc", "dataset": "d", "seed": 0, "score": 3.0})
    s = plots.score_summary(runs)[("bcq", "d")]
    # mean 25; deviations -15, -5, 20: sum of squares 650; sample SD sqrt(325) = 18.03 (population 14.72)
    assert s["mean"] == pytest.approx(25.0) and s["std"] == pytest.approx(325 ** 0.5)
    table = plots.score_table(runs, labels=["bcq", "bc"], datasets=["d"])
    assert "| d | 25.0 ± 18.0 (3) | 3.0 (1) |" in table


# --- the value check: the critic's estimate against the Monte-Carlo return ------------------------------------

def _value_run(root, label, dataset, seed, rows):
    out = root / label / dataset / f"s{seed}"
    out.mkdir(parents=True)
    last = rows[-1]
    (out / "result.json").write_text(json.dumps({
        "label": label, "algo": label, "dataset": dataset, "seed": seed, "score": 1.0, "steps": last[0],
        "q_start": last[1], "mc_discounted": last[2]}))
    header = "step,return_mean,return_std,score_mean,score_std" + (",q_start,mc_discounted" if last[1] is not None else "")
    body = [f"{st},1,0,1,0" + (f",{q},{mc}" if q is not None else "") for st, q, mc in rows]
    (out / "eval.csv").write_text("\n".join([header, *body]) + "\n")


def test_value_check_is_loaded_plotted_and_tabulated(tmp_path):
    _value_run(tmp_path, "sac-offline", "d", 0, [(5, 100.0, 30.0), (10, 1000.0, 20.0)])
    _value_run(tmp_path, "sac-offline", "d", 1, [(5, 300.0, 30.0), (10, 3000.0, 40.0)])
    _value_run(tmp_path, "cql", "d", 0, [(5, 10.0, 30.0), (10, 20.0, 40.0)])
    _value_run(tmp_path, "bc", "d", 0, [(5, None, None), (10, None, None)])  # no critic: no value check
    runs = plots.load_results(tmp_path)
    bc = plots.select(runs, "bc", "d")[0]
    assert np.isnan(bc["curve"]["q_start"]).all() and len(bc["curve"]["q_start"]) == 2
    fig, ax = plt.subplots()
    line = plots.plot_value_check(ax, runs, "sac-offline", "d")
    assert list(line.get_ydata()) == [200.0, 2000.0]                     # mean over the two seeds
    assert list(ax.get_lines()[1].get_ydata()) == [30.0, 30.0]           # the Monte-Carlo return, dashed
    assert ax.get_lines()[1].get_linestyle() == "--" and ax.get_yscale() == "symlog"
    assert plots.plot_value_check(ax, runs, "bc", "d") is None
    assert ax.get_xlabel() == "gradient steps" and "discounted return" in ax.get_ylabel()
    plt.close(fig)
    table = plots.value_check_table(runs, ["sac-offline", "cql", "bc"], ["d"], k=None).splitlines()
    assert table[2] == "| sac-offline | d | 2 | 2,000.0 | 30.0 | +980.0, +2,960.0 | 0 of 4 |"  # 1000 - 20, 3000 - 40
    assert table[3] == "| cql | d | 1 | 20.0 | 40.0 | -20.0 | 2 of 2 |"
    assert len(table) == 4  # bc has no row
    _value_run(tmp_path, "sac-offline", "e", 0, [(10, 9_300_000.0, 0.6)])   # runaway estimates in millions
    table = plots.value_check_table(plots.load_results(tmp_path), ["sac-offline"], ["e"], k=None).splitlines()
    assert table[2] == "| sac-offline | e | 1 | 9.3M | 0.6 | +9.3M | 0 of 1 |"


def test_value_check_table_counts_the_evaluations_below_the_return(tmp_path):
    # seed 0: 10 < 30 and 50 > 40 (1 of 2 below); seed 1: 5 < 30, 20 < 40 (2 of 2): 3 of 4 in all
    _value_run(tmp_path, "cql", "d", 0, [(5, 10.0, 30.0), (10, 50.0, 40.0)])
    _value_run(tmp_path, "cql", "d", 1, [(5, 5.0, 30.0), (10, 20.0, 40.0)])
    runs = plots.load_results(tmp_path)
    table = plots.value_check_table(runs, ["cql"], ["d"], k=None).splitlines()
    assert table[0].endswith("| estimate below the return (evaluations) |")
    assert table[2] == "| cql | d | 2 | 35.0 | 40.0 | +10.0, -20.0 | 3 of 4 |"


def test_plot_value_scatter_puts_each_seed_at_return_and_estimate(tmp_path):
    _value_run(tmp_path, "sac-offline", "d", 0, [(10, 1000.0, 20.0)])
    _value_run(tmp_path, "cql", "d", 0, [(10, 20.0, 40.0)])
    _value_run(tmp_path, "bc", "d", 0, [(10, None, None)])
    runs = plots.load_results(tmp_path)
    fig, ax = plt.subplots()
    assert plots.plot_value_scatter(ax, runs, ["sac-offline", "cql", "bc"], ["d"]) == ["sac-offline", "cql"]
    points = [c.get_offsets().tolist() for c in ax.collections]
    assert points == [[[20.0, 1000.0]], [[40.0, 20.0]]]                   # (return, estimate) per seed
    diagonal = ax.get_lines()[0]
    assert list(diagonal.get_xdata()) == list(diagonal.get_ydata()) == [20.0, 1000.0]
    assert ax.get_xscale() == ax.get_yscale() == "symlog" and "Monte-Carlo" in ax.get_xlabel()
    plt.close(fig)
    fig, ax = plt.subplots()
    plots.plot_value_scatter(ax, runs, ["cql"], ["d"], symlog=False)
    assert ax.get_xscale() == ax.get_yscale() == "linear"
    plt.close(fig)


# --- claims against baselines and sweeps ------------------------------------------------------------------------

def test_difference_ci_of_separated_and_overlapping_groups():
    diff, lo, hi = plots.difference_ci([10.0, 11.0, 12.0], [1.0, 2.0, 3.0])
    assert diff == pytest.approx(9.0)
    # every resample of a lies in [10, 12] and of b in [1, 3]: the difference lies in [7, 11]
    assert 7.0 <= lo <= diff <= hi <= 11.0
    assert plots.difference_ci([10.0, 11.0, 12.0], [1.0, 2.0, 3.0]) == (diff, lo, hi)  # deterministic
    _, lo, hi = plots.difference_ci([1.0, 5.0, 9.0], [4.0, 5.0, 6.0])
    assert lo < 0 < hi
    assert plots.difference_ci([3.0], [1.0]) == (2.0, 2.0, 2.0)          # one seed each: no spread at all
    with pytest.raises(ValueError, match="b is empty"):
        plots.difference_ci([1.0], [])


def test_baseline_table_says_above_below_overlap_and_not_run():
    runs = _runs({("bc", "a"): [10.0, 11.0, 12.0], ("10%bc", "a"): [20.0, 30.0, 40.0],
                  ("iql", "a"): [25.0, 26.0, 27.0], ("cql", "a"): [1.0, 2.0, 3.0]})
    lines = plots.baseline_table(runs, ["iql", "cql", "bcq"], ["bc", "10%bc"], ["a"]).splitlines()
    assert lines[0] == ("| dataset | algorithm | score (last 5 evaluations), mean [95% CI] (seeds) | "
                        "minus bc [95% CI] | minus 10%bc [95% CI] |")
    iql, cql, bcq = lines[2:]
    d, lo, hi = plots.difference_ci([25.0, 26.0, 27.0], [10.0, 11.0, 12.0])
    assert f"| {d:+.1f} [{lo:+.1f}, {hi:+.1f}] above |" in iql and iql.endswith(" overlap |")   # 26 vs 30: overlap
    assert cql.split("|")[4].strip().endswith("below")
    assert bcq == "| a | bcq | not run | - | - |"
    only = plots.baseline_table(_runs({("iql", "a"): [1.0]}), ["iql"], ["bc"], ["a"]).splitlines()[2]
    assert only.endswith("| bc not run |")


def test_plot_score_intervals_and_sweep():
    runs = _runs({("bc", "a"): [10.0, 11.0, 12.0], ("iql", "a"): [25.0, 26.0, 27.0], ("cql", "a"): [1.0]})
    fig, ax = plt.subplots()
    assert plots.plot_score_intervals(ax, runs, ["iql", "cql", "bcq"], "a", baselines=["bc"]) == ["iql", "cql"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["iql (3)", "cql (1)"]
    assert "bc: 11.0" in ax.get_legend_handles_labels()[1][0] and "score" in ax.get_xlabel()
    plt.close(fig)
    fig, ax = plt.subplots()
    assert plots.plot_sweep(ax, [0.5, 0.7, 0.9], [[1.0, 3.0], [], [5.0]], name="iql") == [0.5, 0.9]
    bars = ax.containers[0]
    assert list(bars.lines[0].get_ydata()) == [2.0, 5.0]                 # means at the values that ran
    assert "normalised score" in ax.get_ylabel()
    plt.close(fig)


def test_plot_baseline_draws_mean_and_interval_in_either_orientation():
    runs = _runs({("bc", "a"): [10.0, 11.0, 12.0]})
    lo, hi = plots.bootstrap_ci([10.0, 11.0, 12.0])
    for vertical in (False, True):
        fig, ax = plt.subplots()
        assert plots.plot_baseline(ax, runs, "bc", "a", color="k", name="BC", vertical=vertical)
        (line,) = ax.get_lines()
        at = line.get_xdata() if vertical else line.get_ydata()
        assert list(at) == [11.0, 11.0]
        (band,) = ax.patches
        box = band.get_bbox()                                              # in data units along the scores
        assert ((box.x0, box.x1) if vertical else (box.y0, box.y1)) == pytest.approx((lo, hi))
        assert line.get_label() == f"BC: 11.0 [{lo:.1f}, {hi:.1f}] (3 seeds)"
        assert not plots.plot_baseline(ax, runs, "bc", "other")           # no runs there: nothing drawn
        assert len(ax.get_lines()) == 1
        plt.close(fig)


def test_train_log_and_log_series_read_the_train_records(tmp_path):
    runs = []
    for seed, n in [(0, 3), (1, 2)]:                                       # seed 1's log is one record shorter
        d = tmp_path / f"s{seed}"
        d.mkdir()
        rows = [{"kind": "train", "step": 1000 * (k + 1), "alpha_prime": 10.0 * seed + k} for k in range(n)]
        rows.insert(1, {"kind": "eval", "step": 1000, "score_mean": 5.0})
        (d / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append({"label": "cql-lagrange", "dataset": "a", "seed": seed, "path": str(d)})
    assert [r["step"] for r in plots.train_log(runs[0])] == [1000, 2000, 3000]   # the eval record is skipped
    steps, values = plots.log_series(runs, "cql-lagrange", "a", "alpha_prime")
    assert list(steps) == [1000, 2000] and values.tolist() == [[0.0, 1.0], [10.0, 11.0]]
    assert plots.log_series(runs, "cql", "a", "alpha_prime") is None
    with pytest.raises(KeyError, match="'gap' is not logged by .*s0 .*alpha_prime"):
        plots.log_series(runs, "cql-lagrange", "a", "gap")
    assert plots.train_log({"path": str(tmp_path / "none")}) == []


def test_late_scores_average_the_last_evaluations():
    curve = {"step": np.arange(1, 6) * 1000, "score": np.array([10.0, 20.0, 90.0, 100.0, 40.0])}
    runs = [{"label": "bc", "dataset": "a", "seed": 0, "score": 40.0, "curve": curve}]
    (late,) = plots.late_scores(runs, 3)
    assert late["score"] == pytest.approx((90.0 + 100.0 + 40.0) / 3) and runs[0]["score"] == 40.0  # a copy
    assert plots.late_scores(runs, 1)[0]["score"] == 40.0                                        # the final score
    assert plots.ci_summary(plots.late_scores(runs, 5))[("bc", "a")]["mean"] == pytest.approx(52.0)
    with pytest.raises(ValueError, match="evaluations: .* has 5 evaluations, fewer than the 6"):
        plots.late_scores(runs, 6)
    with pytest.raises(ValueError, match="evaluations: expected a positive integer, got 0"):
        plots.late_scores(runs, 0)


def test_update_seconds_from_the_log_or_from_a_one_part_run(tmp_path):
    def run(rows, segments):
        d = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        (d / "log.jsonl").write_text("".join(json.dumps({"kind": "train", **r}) + "\n" for r in rows))
        return {"path": str(d), "segments_s": segments}
    # 1,000 updates at 100/s then 1,000 at 50/s: the running means are 100 and 66.7, the time 30 s (not 1000/100 +
    # 1000/66.7 = 25 s, the sum this function replaces)
    one_part = run([{"step": 1000, "updates_per_s": 100.0}, {"step": 2000, "updates_per_s": 2000 / 30}], [31.0])
    assert plots.update_seconds(one_part) == pytest.approx(30.0)
    logged = run([{"step": 1000, "updates_per_s": 100.0, "update_s": 10.0},
                  {"step": 2000, "updates_per_s": 40.0, "update_s": 42.5}], [20.0, 25.0])
    assert plots.update_seconds(logged) == 42.5                     # recorded: taken as it is, over both parts
    two_parts = run([{"step": 1000, "updates_per_s": 100.0}, {"step": 2000, "updates_per_s": 50.0}], [None, 21.0])
    assert plots.update_seconds(two_parts) is None                  # where the second part began is not known
    assert plots.update_seconds({"path": str(tmp_path / "none"), "segments_s": [1.0]}) is None


def test_published_table_puts_each_budget_final_and_late_beside_the_published_number():
    def runs(cells, n_evals):
        out = []
        for (lab, d), finals in cells.items():
            for i, s in enumerate(finals):
                scores = np.full(n_evals, 10.0 * i)          # a flat curve at 0, 10, 20 ... ending at its final score
                scores[-1] = s
                out.append({"label": lab, "dataset": d, "seed": i, "score": s,
                            "curve": {"step": np.arange(1, n_evals + 1), "score": scores}})
        return out
    short = runs({("bc", "a"): [10.0, 20.0, 30.0], ("cql", "a"): [5.0], ("bc", "z"): [1.0]}, 5)
    long_ = runs({("bc", "a"): [40.0, 50.0]}, 10)
    lines = plots.published_table([("a", "bc"), ("a", "cql"), ("a", "iql")], {("a", "bc"): 52.9},
                                  [("ours, 50k", short, 5, None), ("ours, 1M", long_, 10, ["bc", "iql"])],
                                  names={"bc": "BC"}, published_title="paper").splitlines()
    assert lines[0] == ("| dataset | algorithm | paper | ours, 50k: final | last 5 evaluations | ours, 1M: final | "
                        "last 10 evaluations |")
    bc, cql, iql = lines[2:]
    lo, hi = plots.bootstrap_ci([10.0, 20.0, 30.0])
    # last 5 of seed i: four evaluations at 10 i and the final one: (0 + 10) / 5, (40 + 20) / 5, (80 + 30) / 5
    late_lo, late_hi = plots.bootstrap_ci([2.0, 12.0, 22.0])
    long_lo, long_hi = plots.bootstrap_ci([40.0, 50.0])
    assert bc.startswith(f"| a | BC | 52.9 | 20.0 [{lo:.1f}, {hi:.1f}] (3) | 12.0 [{late_lo:.1f}, {late_hi:.1f}] | "
                         f"45.0 [{long_lo:.1f}, {long_hi:.1f}] (2) |")
    assert cql == "| a | cql | - | 5.0 [5.0, 5.0] (1) | 1.0 [1.0, 1.0] | - | - |"       # not run at 1M: not planned
    assert iql == "| a | iql | - | not run yet | not run yet | not run yet | not run yet |"  # planned, not made
    assert len(lines) == 5                                                 # dataset z is not a row: left out
    with pytest.raises(ValueError, match=r"rows: expected \(dataset, label\) pairs"):
        plots.published_table([("a",)], {}, [])
    with pytest.raises(ValueError, match=r"budgets: expected \(title, runs, labels\)"):
        plots.published_table([("a", "bc")], {}, [("ours", short)])
    with pytest.raises(ValueError, match=r"budgets: expected \(title, runs, labels\)"):
        plots.published_table([("a", "bc")], {}, [("ours", short, 5)])
    with pytest.raises(ValueError, match="evaluations: .* has 5 evaluations, fewer than the 10"):
        plots.published_table([("a", "bc")], {}, [("ours", short, 10, None)])


def test_results_path_finds_the_repositorys_results_from_another_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as a notebook in notebooks/ runs: results/ is not below the current directory
    found = plots.results_path("results/README.md")
    assert found.is_file() and found == Path(plots.__file__).resolve().parent.parent / "results" / "README.md"
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "README.md").write_text("mine")
    assert plots.results_path("results/README.md").read_text() == "mine"  # the current directory comes first
    assert plots.results_path(tmp_path / "absent.json") == tmp_path / "absent.json"


def test_evaluations_and_window_means_name_the_runs_left_out(tmp_path):
    for seed, scores in ((0, [10, 20, 30, 40]), (1, [50, 60, 70])):  # seed 1 still training: no 40k evaluation
        out = tmp_path / f"s{seed}"
        out.mkdir()
        (out / "eval.csv").write_text("step,return_mean,return_std,score_mean,score_std\n" + "".join(
            f"{10_000 * (i + 1)},1,0,{v},0\n" for i, v in enumerate(scores)))
    assert plots.evaluations(tmp_path / "s1") == {10_000: 50.0, 20_000: 60.0, 30_000: 70.0}
    assert plots.evaluations({"path": str(tmp_path / "s0")})[40_000] == 40.0  # a run of load_results
    means, short = plots.window_means([tmp_path / "s0", tmp_path / "s1"], 20_000, 40_000)
    assert means == {"s0": 30.0} and short == [str(tmp_path / "s1")]
    means, short = plots.window_means([tmp_path / "s0", tmp_path / "s1"], 20_000, 30_000)
    assert means == {"s0": 25.0, "s1": 65.0} and short == []


# --- the statistic of record: every table is made from the mean of the last five evaluations --------------------
# Each run below ends on an evaluation far from the mean of its last five: a table made from final evaluations shows
# other numbers and fails these tests.

def _dipping(cells: dict) -> list[dict]:
    """Runs whose last five evaluations are (m, m, m, m, m - 50) plus an earlier 0: the statistic of record is m - 10,
    the final evaluation m - 50."""
    out = []
    for (lab, d), means in cells.items():
        for i, m in enumerate(means):
            scores = np.array([0.0, m, m, m, m, m - 50.0])
            out.append({"label": lab, "dataset": d, "seed": i, "score": float(scores[-1]), "path": f"{lab}/{d}/s{i}",
                        "curve": {"step": np.arange(1, 7) * 5000, "score": scores}})
    return out


def test_the_statistic_of_record_is_the_mean_of_the_last_five_evaluations():
    assert plots.RECORD_K == 5
    (run,) = _dipping({("bc", "a"): [60.0]})
    assert plots.record_score(run) == pytest.approx(50.0)        # (60 * 4 + 10) / 5
    assert plots.record_score(run, None) == 10.0                 # the final evaluation, for the lab pages
    assert plots.record_score(run, 2) == pytest.approx(35.0)
    late = plots.late_scores([run], 3)[0]
    assert plots.record_score(late) == late["score"]             # a summary chosen by the caller is kept
    short = {**run, "curve": {"step": np.arange(3), "score": np.ones(3)}}
    with pytest.raises(ValueError, match="has 3 evaluations, fewer than the 5 of the statistic of record"):
        plots.record_score(short)
    with pytest.raises(ValueError, match="k: expected a positive number"):
        plots.record_score(run, 0)


def test_every_table_of_record_is_made_from_the_last_five_evaluations(tmp_path):
    runs = _dipping({("bc", "a"): [60.0, 70.0, 80.0], ("10%bc", "a"): [90.0, 100.0, 110.0],
                     ("iql", "a"): [110.0, 120.0, 130.0]})
    record = {lab: [50.0, 60.0, 70.0] if lab == "bc" else [80.0, 90.0, 100.0] if lab == "10%bc" else
              [100.0, 110.0, 120.0] for lab in ("bc", "10%bc", "iql")}
    # ci_summary / ci_table
    s = plots.ci_summary(runs)[("iql", "a")]
    assert s["mean"] == pytest.approx(110.0) and (s["lo"], s["hi"]) == plots.bootstrap_ci(record["iql"])
    assert plots.ci_summary(runs, k=None)[("iql", "a")]["mean"] == pytest.approx(70.0)
    table = plots.ci_table(runs, ["bc", "iql"], ["a"], aggregate=False).splitlines()
    lo, hi = plots.bootstrap_ci(record["bc"])
    assert table[0].startswith("| dataset (last 5 evaluations: mean [95% CI] (seeds)) |")
    assert table[2].startswith(f"| a | 60.0 [{lo:.1f}, {hi:.1f}] (3) | 110.0 [")
    assert "final evaluation" in plots.ci_table(runs, ["bc"], ["a"], aggregate=False, k=None).splitlines()[0]
    # the aggregate
    assert plots.aggregate_iqm(runs, "iql", ["a"])["iqm"] == pytest.approx(plots.iqm(record["iql"]))
    # baseline_table: the difference of the statistics of record, and the verdict it gives
    line = plots.baseline_table(runs, ["iql"], ["10%bc"], ["a"]).splitlines()[2]
    d, lo, hi = plots.difference_ci(record["iql"], record["10%bc"])
    assert line.endswith(f"| {d:+.1f} [{lo:+.1f}, {hi:+.1f}] {plots.verdict(lo, hi)} |") and d == pytest.approx(20.0)
    # published_table: one column of the statistic of record per budget, the final one only when asked
    lines = plots.published_table([("a", "iql")], {("a", "iql"): 66.3}, [("ours", runs, None)]).splitlines()
    assert lines[0] == "| dataset | algorithm | published | ours, last 5 evaluations |"
    assert lines[2].startswith("| a | iql | 66.3 | 110.0 [")
    wide = plots.published_table([("a", "iql")], {}, [("ours", runs, None)], final=True).splitlines()
    assert wide[0].endswith("| ours, final evaluation |") and "| 70.0 [" in wide[2]
    # the interval plots
    fig, ax = plt.subplots()
    plots.plot_score_intervals(ax, runs, ["iql"], "a", baselines=["bc"])
    assert "bc: 60.0" in ax.get_legend_handles_labels()[1][0] and "last 5" in ax.get_xlabel()
    assert sorted(ax.get_lines()[-1].get_xdata()) == record["iql"]   # the seeds' dots
    plt.close(fig)
    # the value check: the mean of the last five evaluations of the estimate and of the return
    rows = [(5000 * (i + 1), q, 100.0) for i, q in enumerate([0.0, 10.0, 10.0, 10.0, 10.0, 60.0])]
    _value_run(tmp_path, "cql", "d", 0, rows)
    vc = plots.value_check_table(plots.load_results(tmp_path), ["cql"], ["d"]).splitlines()[2]
    assert vc == "| cql | d | 1 | 20.0 | 100.0 | -80.0 | 6 of 6 |"     # the final estimate is 60: -40.0


def test_final_evaluations_make_other_tables(monkeypatch):
    """The check above has teeth: tables made with the final evaluation (as before the protocol) differ."""
    runs = _dipping({("iql", "a"): [110.0, 120.0, 130.0], ("10%bc", "a"): [90.0, 100.0, 110.0]})
    of_record = plots.baseline_table(runs, ["iql"], ["10%bc"], ["a"])
    monkeypatch.setattr(plots, "RECORD_K", None)
    monkeypatch.setattr(plots, "record_scores", lambda runs, label, dataset, k=None: plots.final_scores(runs, label,
                                                                                                        dataset))
    assert plots.baseline_table(runs, ["iql"], ["10%bc"], ["a"]) != of_record


def test_verdict_table_judges_by_the_last_five_says_provisional_and_flips():
    # iql: last five m - 10, final m - 50; 10%bc: flat, final = last five. By the record iql is above, by the final
    # evaluation below: the verdict is "above" and the flip is said.
    runs = _dipping({("iql", "a"): [110.0, 111.0, 112.0, 113.0, 114.0]})
    runs += _runs({("10%bc", "a"): [90.0, 91.0, 92.0, 93.0, 94.0], ("bc", "a"): [10.0, 11.0, 12.0]})
    lines = plots.verdict_table([("b", "a", "IQL minus 10%BC", runs, "iql", runs, "10%bc"),
                                 ("b", "a", "IQL minus BC", runs, "iql", runs, "bc"),
                                 ("b", "a", "CQL minus BC", runs, "cql", runs, "bc")]).splitlines()
    assert lines[0].startswith("| claim | dataset | comparison | seeds | last 5: difference [95% CI] |")
    d, lo, hi = plots.difference_ci([100.0, 101.0, 102.0, 103.0, 104.0], [90.0, 91.0, 92.0, 93.0, 94.0])
    assert lines[2] == (f"| (b) | a | IQL minus 10%BC | 5 / 5 | {d:+.1f} [{lo:+.1f}, {hi:+.1f}] | -30.0 [-31.8, -28.2] "
                        "| above (final: below, flips) |")
    assert lines[3].endswith("| above (provisional) |")          # three seeds of BC: provisional
    assert lines[4] == "| (b) | a | CQL minus BC | - | not run | | |"
    v = plots.protocol_verdict([1.0, 2.0], [0.0, 0.5], [1.0, 2.0], [0.0, 0.5])
    assert v["provisional"] and not v["flips"] and v["reading"] == "above (provisional)"
    # a comparison that decides no claim (claim None): "-" in the claim column, judged the same way
    untagged = plots.verdict_table([(None, "a", "IQL minus 10%BC", runs, "iql", runs, "10%bc")]).splitlines()[2]
    assert untagged == "| - |" + lines[2].removeprefix("| (b) |")
