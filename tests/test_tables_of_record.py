"""The tables of record are made from the statistic of record (the protocol, book/claims.md): each run's mean over
its last 5 evaluations, never its final evaluation. These tests recompute, from the committed runs under results/,
the tables that book/comparison.md, notebook 05 and results/*/table.md show, and compare them cell by cell. A table
made from final evaluations fails them (checked by making minirl.plots.record_score return the final evaluation).
book/lab/cql.md is checked the same way, its prose numbers phrase by phrase, those it marks "(final evaluation, lab)"
by the final evaluation."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

from minirl import plots

ROOT = Path(__file__).resolve().parent.parent
MIXED = ["hopper-medium-replay", "hopper-medium-expert"]
NAMES = {"BC": "bc", "10%BC": "10%bc", "BCQ": "bcq", "CQL": "cql", "CQL-Lagrange": "cql-lagrange", "IQL": "iql",
         "offline SAC": "sac-offline", "TD3+BC": "td3+bc"}
CELL = re.compile(r"^-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]$")


@pytest.fixture(scope="module")
def record():
    if not (ROOT / "results" / "record").is_dir():
        pytest.skip("results/record is not in this checkout")
    return plots.load_results(ROOT / "results" / "record")


def _chapter_table(dataset: str) -> dict[str, list[str]]:
    """book/comparison.md's table whose header names ``dataset``: {method: [cells]}."""
    text = (ROOT / "book" / "comparison.md").read_text()
    block = text.split(f"| `{dataset}` | score | minus 10%BC |", 1)[1].split("\n\n", 1)[0]
    rows = [line.strip("|").split("|") for line in block.strip().splitlines()[1:]]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows}


@pytest.mark.parametrize("dataset", MIXED)
def test_the_chapters_mixed_tier_tables_are_last_five_means(record, dataset):
    table = _chapter_table(dataset)
    assert set(table) == set(NAMES), f"rows of the {dataset} table: {sorted(table)}"
    summary = plots.ci_summary(record, list(NAMES.values()), [dataset])
    for name, (score, minus) in table.items():
        label = NAMES[name]
        assert CELL.match(score), f"{dataset}, {name}: {score!r} is not 'mean [lo, hi]'"
        assert score == plots.ci_cell(summary[(label, dataset)], seeds=False), f"{dataset}, {name}"
        if minus:
            d, lo, hi = plots.difference_ci(plots.record_scores(record, label, dataset),
                                            plots.record_scores(record, "10%bc", dataset))
            assert minus == f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]", f"{dataset}, {name} minus 10%BC"


def _notebook_outputs(name: str) -> list[str]:
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    out = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            text = o.get("data", {}).get("text/markdown") or o.get("text")
            if text:
                out.append("".join(text))
    return out


def test_notebook_05_shows_the_tables_the_code_makes_from_the_last_five(record):
    outputs = _notebook_outputs("05_comparison.ipynb")
    algos = list(NAMES.values())
    hopper = ["hopper-medium", "hopper-expert", *MIXED]
    main = plots.ci_table(record, algos, hopper).replace("| " + " | ".join(algos) + " |",
                                                        "| " + " | ".join(NAMES) + " |")
    assert main in outputs, "the stored main table is not plots.ci_table of results/record by the statistic of record"
    assert plots.baseline_table(record, ["bcq", "cql", "cql-lagrange", "iql", "td3+bc"], ["bc", "10%bc"], MIXED) in outputs



def test_notebooks_02_and_04_show_their_tables_and_verdicts_by_the_last_five(record):
    """The BCQ and IQL notebooks' tables of results/record are the code's by the statistic of record, each verdict
    with the final evaluation's beside it in a column marked (lab) and its flips said (they showed final evaluations
    until 2026-12-02); no stored table is headed by final evaluations without "(lab)"."""
    tiers = ["hopper-medium", "hopper-expert", *MIXED]
    for notebook, method, labels in (("02_bcq.ipynb", "bcq", ["bcq", "bc", "10%bc", "sac-offline"]),
                                     ("04_iql.ipynb", "iql", ["iql", "bc", "10%bc"])):
        outputs = _notebook_outputs(notebook)
        assert plots.ci_table(record, labels, tiers) in outputs, f"{notebook}: its score table"
        name = {"bc": "BC", "10%bc": "10%BC"}
        verdicts = plots.verdict_table([("b" if d in MIXED else None, d, f"{method.upper()} − {name[b]}", record, method,
                                         record, b) for d in tiers for b in ("bc", "10%bc")])
        assert verdicts in outputs, f"{notebook}: its verdicts against BC and 10%BC"
        assert "flips" in verdicts  # BCQ - BC on hopper-medium-expert, IQL - 10%BC on hopper-medium-replay
        for text in outputs:
            header = text.lstrip().splitlines()[0] if text.lstrip().startswith("|") else ""
            assert "final" not in header or "(lab)" in header, f"{notebook}: a table of final evaluations: {header}"

def test_the_stitching_tables_of_record_are_made_by_the_script(monkeypatch):
    import stitching_table
    for root in ("stitching", "stitching-budget"):
        folder = ROOT / "results" / root
        if not (folder / "table.md").exists():
            continue
        text = stitching_table.render(*stitching_table.collect(folder))
        assert (folder / "table.md").read_text().endswith(text), f"results/{root}/table.md is not the script's table"
        assert "last 5 evaluations, mean [95% CI]" in text.splitlines()[0]


INTERVAL = re.compile(r"[-+]?\d+\.\d \[[-+]?\d+\.\d, [-+]?\d+\.\d\]")
CHAPTERS = ["comparison", "bcq", "cql", "iql", "claims"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_interval_a_chapter_quotes_is_printed_by_the_code_of_record(chapter):
    """Each "mean [lo, hi]" of these chapters is in a stored output of notebook 05 (which computes every table by the
    statistic of record) or in a results/*/table.md (experiments/stitching_table.py): a number copied from a
    notebook executed before the protocol, or typed, fails."""
    printed = "\n".join(_notebook_outputs("05_comparison.ipynb"))
    printed += "\n".join(p.read_text() for p in (ROOT / "results").glob("*/table.md"))
    text = (ROOT / "book" / f"{chapter}.md").read_text()
    missing = sorted({m for m in INTERVAL.findall(text) if m not in printed and m.lstrip("+") not in printed})
    assert not missing, f"book/{chapter}.md quotes intervals no code of record prints: {missing}"


# book/lab/cql.md, the laboratory of the CQL chapter: its tables are notebook 03's (plots.value_check_table and
# plots.ci_table by the statistic of record), its prose numbers are computed here from the same runs, and a number the
# page marks "(final evaluation, lab)" is recomputed by the final evaluation (k=None). Each fails on the page as it
# stood at commit ff7a499, which still quoted the notebook's earlier final evaluations "from notebook section 5.2".
LAB_CQL = ROOT / "book" / "lab" / "cql.md"
HOPPER = ["hopper-medium", "hopper-expert", *MIXED]
CRITICS = {"CQL": "cql", "CQL-Lagrange": "cql-lagrange", "offline SAC": "sac-offline"}
GAP_LABEL = "cql-lagrange-target_action_gap=4.08"                              # results/record-cql-lagrange-gap
PAPERS_LABEL = "cql-actor_hidden=256,256,256-critic_hidden=256,256,256-n_actions=10"  # results/record-papers-sizes


def _runs(folder: str, label: str, dataset: str) -> list[dict]:
    if not (ROOT / "results" / folder).is_dir():
        pytest.skip(f"results/{folder} is not in this checkout")
    return sorted(plots.select(plots.load_results(ROOT / "results" / folder), label, dataset), key=lambda r: r["seed"])


def _table(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the Markdown table whose header line starts with ``header``."""
    lines = text.split("\n" + header, 1)[1].split("\n\n", 1)[0].splitlines()  # the header's rest, the rule, rows
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[2:]]


def _prose(text: str) -> str:
    return " ".join(text.split())


def _one(x: float) -> str:
    return f"{x:,.1f}"


def _signed(x: float) -> str:
    """As the value check tables write an error: +1,234.5, or +9.3M from 100,000 on."""
    return f"{x / 1e6:+.1f}M" if abs(x) >= 1e5 else f"{x:+,.1f}"


def _error(run: dict, k: int | None = plots.RECORD_K) -> float:
    return plots._late_value(run, "q_start", k) - plots._late_value(run, "mc_discounted", k)


def _difference(a, b) -> str:
    d, lo, hi = plots.difference_ci(a, b)
    return f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def _printed_value_checks(runs: list[dict], labels, k: int | None = plots.RECORD_K) -> dict:
    """(label, dataset) -> the row plots.value_check_table prints: seeds, estimate, return, errors, below."""
    rows = plots.value_check_table(runs, labels, HOPPER, k=k).splitlines()[2:]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    return {(c[0], c[1]): c[2:] for c in cells}


def test_lab_cql_value_check_table_is_notebook_03s_by_the_last_five(record):
    printed = _printed_value_checks(record, list(CRITICS.values()))
    rows = _table(LAB_CQL.read_text(), "| algorithm, dataset (seeds) |")
    assert len(rows) == len(printed) == 12
    for name, errors, below, first_last in rows:
        m = re.fullmatch(r"(.+), `(.+)` \((\d+)\)", name)
        label, dataset = CRITICS[m[1]], m[2]
        seeds, _, _, per_seed, evaluations_below = printed[(label, dataset)]
        assert (m[3], errors, below) == (seeds, per_seed, evaluations_below), name
        sel = _runs("record", label, dataset)
        n = min(len(r["curve"]["step"]) for r in sel)
        gap = np.mean([r["curve"]["q_start"][:n] - r["curve"]["mc_discounted"][:n] for r in sel], axis=0)
        assert first_last == f"{_signed(gap[0])} -> {_signed(gap[-1])}", name


def test_lab_cql_score_table_is_notebook_03s_by_the_last_five(record):
    names = {"BC": "bc", "10%BC": "10%bc", **CRITICS}
    header = "| dataset | BC | 10%BC | CQL | CQL-Lagrange | offline SAC |"
    rows = _table(LAB_CQL.read_text(), header)
    summary = plots.ci_summary(record, list(names.values()), HOPPER)
    assert [r[0] for r in rows] == [f"`{d}`" for d in HOPPER]
    for row in rows:
        dataset = row[0].strip("`")
        expected = [plots.ci_cell(summary[(label, dataset)]) for label in names.values()]
        assert row[1:] == expected, dataset


def test_lab_cql_alpha_table_marks_and_recomputes_its_final_evaluations(record):
    text = LAB_CQL.read_text()
    header = "| dataset (hopper-) | kappa, seed |"
    head = text.split("\n" + header, 1)[1].split("\n", 1)[0]
    assert "final estimate - return (lab) | final score (lab) |" in head  # the final evaluation, marked
    for row in _table(text, header):
        kappa, seed = row[1].split(", s")
        folder, label = ("record", "cql-lagrange") if kappa == "5" else ("record-cql-lagrange-gap", GAP_LABEL)
        (run,) = [r for r in _runs(folder, label, f"hopper-{row[0]}") if r["seed"] == int(seed)]
        assert row[-2:] == [_signed(_error(run, None)), _one(run["score"])], row[:2]


def _lab_cql_numbers(record) -> list[str]:
    """The phrases of book/lab/cql.md that carry numbers, made from the runs."""
    def late(label, dataset, key):
        return float(np.mean([plots._late_value(r, key, plots.RECORD_K) for r in plots.select(record, label, dataset)]))

    def scores(label, dataset, k=plots.RECORD_K):
        return plots.record_scores(record, label, dataset, k)

    q = {(a, d): late(a, d, "q_start") for a in CRITICS.values() for d in HOPPER}
    mc = {(a, d): late(a, d, "mc_discounted") for a in CRITICS.values() for d in HOPPER}
    lagrange = [q[("cql-lagrange", d)] for d in HOPPER]
    cql = [q[("cql", d)] for d in HOPPER]
    returns = ", ".join(_one(mc[("cql-lagrange", d)]) for d in ["hopper-medium", "hopper-expert"])
    returns += f" and {_one(mc[('cql-lagrange', 'hopper-medium-expert')])} against "
    returns += ", ".join(_one(mc[("cql", d)]) for d in ["hopper-medium", "hopper-expert"])
    returns += f" and {_one(mc[('cql', 'hopper-medium-expert')])} on"
    mr = "hopper-medium-replay"
    kappa5 = [_error(r) for r in _runs("record", "cql-lagrange", mr)]
    gap = _runs("record-cql-lagrange-gap", GAP_LABEL, mr)
    gap_final = [_error(r, None) for r in gap]
    kappa5_final = [_error(r, None) for r in _runs("record", "cql-lagrange", mr)]
    lagrange_seeds = [_one(plots.record_score(r)) for r in _runs("record", "cql-lagrange", mr)]
    (paper,) = [r for r in _runs("record-papers-sizes", PAPERS_LABEL, mr) if r["seed"] == 0]
    cpu = _runs("record", "cql", mr)
    (cpu0,) = [r for r in cpu if r["seed"] == 0]
    cpu_errors, cpu_final = [_error(r) for r in cpu], [_error(r, None) for r in cpu]
    me = "hopper-medium-expert"
    me_cql = _difference(scores("cql", me), scores("10%bc", me))
    return [
        f"(mean returns {_one(mc[('sac-offline', 'hopper-medium')])} and {_one(mc[('sac-offline', 'hopper-expert')])} "
        "on the narrow tiers)",
        f"its mean estimates, {_one(min(lagrange))} to {_one(max(lagrange))}, are in the hundreds, above CQL's "
        f"({_one(min(cql))} to {_one(max(cql))})",
        returns,
        f"higher on `hopper-medium-replay` ({_one(mc[('cql-lagrange', mr)])} against {_one(mc[('cql', mr)])})",
        "Over the last 5 evaluations the estimate sits near the return ("
        + ", ".join(_signed(_error(r)) for r in gap[:-1]) + f" and {_signed(_error(gap[-1]))}, against "
        f"{_signed(min(kappa5))} to {_signed(max(kappa5))} with $\\kappa = 5$)",
        f"({_signed(min(gap_final))} to {_signed(max(gap_final))}, against {_signed(min(kappa5_final))} to "
        f"{_signed(max(kappa5_final))}; final evaluation, lab)",
        f"{-float(me_cql.split()[0]):.1f} points below 10%BC ({me_cql}, overlap)",
        f"({_difference(scores('cql', me, None), scores('10%bc', me, None))}, final evaluation, lab)",
        f"above BC ({_difference(scores('cql', mr), scores('bc', mr))}) and below 10%BC "
        f"({_difference(scores('cql', mr), scores('10%bc', mr))})",
        f"the seeds are far apart ({', '.join(lagrange_seeds[:-1])} and {lagrange_seeds[-1]} over their last 5 "
        "evaluations)",
        f"**Score**: {_one(plots.record_score(paper))} over its last 5 evaluations ({_one(paper['score'])} at the "
        f"final evaluation, lab), below the lowest of the five `cpu`-sized seeds ({_one(min(scores('cql', mr)))}; mean "
        f"{plots.ci_cell(plots.ci_summary(record, ['cql'], [mr])[('cql', mr)], seeds=False)}) and far below 10%BC's "
        f"{_one(scores('10%bc', mr).mean())}; the same seed at the `cpu` sizes scores {_one(plots.record_score(cpu0))} "
        f"({_one(cpu0['score'])} at the final evaluation)",
        f"**Value check**: over the last 5 evaluations estimate {_one(plots._late_value(paper, 'q_start', 5))} against "
        f"a return of {_one(plots._late_value(paper, 'mc_discounted', 5))} ({_signed(_error(paper))}), above the "
        f"`cpu`-sized seeds' range ({_signed(min(cpu_errors))} to {_signed(max(cpu_errors))}); at the final "
        f"evaluation (lab) {_one(paper['q_start'])} against {_one(paper['mc_discounted'])} "
        f"({_signed(_error(paper, None))}), against {_signed(min(cpu_final))} to {_signed(max(cpu_final))}, the same "
        f"seed at the `cpu` sizes {_one(cpu0['q_start'])} against {_one(cpu0['mc_discounted'])} "
        f"({_signed(_error(cpu0, None))})",
    ]


def test_lab_cql_prose_numbers_are_recomputed_from_the_runs(record):
    text = _prose(LAB_CQL.read_text())
    missing = [phrase for phrase in _lab_cql_numbers(record) if phrase not in text]
    assert not missing, f"book/lab/cql.md lacks these phrases, made from results/: {missing}"


def test_the_cql_chapter_reads_kappa_4_08_by_the_last_five():
    """book/cql.md's reading of CQL-Lagrange with kappa = 4.08 (results/record-cql-lagrange-gap): each seed's estimate
    minus return over its last 5 evaluations, and the final evaluation's verdict beside it; book/lab/comparison.md's
    count of the seeds below by the last 5 beside its final evaluations."""
    gap = _runs("record-cql-lagrange-gap", GAP_LABEL, "hopper-medium-replay")
    assert all(_error(r, None) > 0 for r in gap), "the pages say: above the return in all seeds at the final evaluation"
    phrase = f"ends near the return ({', '.join(_signed(_error(r)) for r in gap)}; final: all above, flips;"
    assert phrase in _prose((ROOT / "book" / "cql.md").read_text()), phrase
    below = ["none", "one", "two", "three"][sum(_error(r) < 0 for r in gap)]
    phrase = f"over the last 5 evaluations {below} of the three seeds are below"
    assert phrase in _prose((ROOT / "book" / "lab" / "comparison.md").read_text()), phrase


def test_the_cql_chapter_counts_its_value_check_by_the_last_five(record):
    """book/cql.md's claim (c): CQL's estimate below its return in every seed by the statistic of record, counted over
    the last 5 evaluations only (not the early ones, before the values propagate); the seeds above at the final
    evaluation named as a flip; and how much the estimate still rises over those evaluations (steps 30,000 to 50,000)."""
    runs = [r for d in HOPPER for r in _runs("record", "cql", d)]
    q = [np.asarray(r["curve"]["q_start"], dtype=float) for r in runs]
    mc = [np.asarray(r["curve"]["mc_discounted"], dtype=float) for r in runs]
    k = plots.RECORD_K
    assert all(_error(r) < 0 for r in runs), "the page says: below in every seed by the last 5"
    below = sum(int((a[-k:] < b[-k:]).sum()) for a, b in zip(q, mc))
    above_final = [r for r in runs if _error(r, None) > 0]
    assert len(above_final) == 1, "the page names one seed above at the final evaluation"
    (seed,) = above_final
    rise = min((a[-1] - a[-k]) / abs(a[-k]) for a in q)
    text = _prose((ROOT / "book" / "cql.md").read_text())
    for phrase in [f"in every seed over the last 5 evaluations ({below} of those {k * len(runs)})",
                   f"by the final evaluation one seed is above ({_signed(_error(seed, None))} on `{seed['dataset']}`)",
                   f"The estimate still rises by {int(100 * rise)}% or more over the last 20,000 steps",
                   f"| {len(runs)} of {len(runs)} seeds (final: {len(runs) - 1}, flips); {below} of the last "
                   f"{k * len(runs)} evaluations |"]:
        assert phrase in text, phrase


def test_the_iql_chapter_says_its_critic_still_rises(record):
    """book/iql.md's value check: IQL's estimate below its return at every evaluation, and how much it still rises over
    the last 5 evaluations (steps 30,000 to 50,000), recomputed from results/record."""
    runs = [r for d in HOPPER for r in _runs("record", "iql", d)]
    q = [np.asarray(r["curve"]["q_start"], dtype=float) for r in runs]
    mc = [np.asarray(r["curve"]["mc_discounted"], dtype=float) for r in runs]
    assert all((a < b).all() for a, b in zip(q, mc)), "the page says: below its return at every evaluation"
    k = plots.RECORD_K
    rise = min((a[-1] - a[-k]) / abs(a[-k]) for a in q)
    phrase = f"below its return at every evaluation, though still rising (by {int(100 * rise)}% or more over the last"
    assert phrase in _prose((ROOT / "book" / "iql.md").read_text()), phrase
