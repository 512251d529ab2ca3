"""The tables of record are made from the statistic of record (the protocol, book/claims.md): each run's mean over
its last 5 evaluations, never its final evaluation. These tests recompute, from the committed runs under results/,
the tables that book/comparison.md, notebook 05 and results/*/table.md show, and compare them cell by cell. A table
made from final evaluations fails them (checked by making minirl.plots.record_score return the final evaluation)."""
import json
import re
from pathlib import Path

import pytest

from minirl import plots

ROOT = Path(__file__).resolve().parent.parent
MIXED = ["hopper-medium-replay", "hopper-medium-expert"]
NAMES = {"BC": "bc", "10%BC": "10%bc", "BCQ": "bcq", "CQL": "cql", "CQL-Lagrange": "cql-lagrange", "IQL": "iql",
         "offline SAC": "sac-offline"}
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
    assert plots.baseline_table(record, ["bcq", "cql", "cql-lagrange", "iql"], ["bc", "10%bc"], MIXED) in outputs


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
