"""How long each chapter notebook takes to run, top to bottom, on a first run and on a cached one.

Runs the chapter notebooks in the book's order in ``--repo`` (a fresh clone, so nothing is cached there), each as
``jupyter nbconvert --execute`` in a child process, with ``MINIRL_DATA`` pointing at ``--data`` (empty at the start of
a first run: the notebooks make their datasets). ``--passes 2`` runs the list twice: the second pass reads every
dataset from the cache. Wall time and the CPU time of the child and its kernel are measured per notebook; the table
is printed and written to ``--json``.

    python benchmarks/notebook_times.py --repo /tmp/fresh --data /tmp/fresh-data --passes 2 --json times.json
    MINIRL_PRECISION=float32 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \\
        python benchmarks/notebook_times.py ...   # as a CPU without AVX-512 (and so without native bfloat16) does

The environment is passed on: ``MINIRL_SCALE`` (default ``cpu``), the thread variables (``OMP_NUM_THREADS=1`` is set
unless a thread variable is) and the precision and instruction-set variables above.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

CHAPTERS = ["01_offline_rl", "02_bcq", "02b_bcq_recommendation", "03_cql", "04_iql", "04b_stitching",
            "05_comparison"]
PASSED_ON = ("MINIRL_SCALE", "MINIRL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MINIRL_PRECISION",
             "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_notebook(repo: Path, name: str, env: dict, out_dir: Path, timeout: int) -> dict:
    """Execute ``notebooks/<name>.ipynb`` of ``repo`` into ``out_dir``; its wall and CPU seconds and exit status."""
    cpu0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                           f"--ExecutePreprocessor.timeout={timeout}", "--output-dir", str(out_dir),
                           str(repo / "notebooks" / f"{name}.ipynb")],
                          cwd=repo, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    return {"notebook": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "returncode": proc.returncode,
            "error": proc.stderr[-2000:] if proc.returncode else ""}


def machine() -> dict:
    import torch
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    flags = next((line.split() for line in open("/proc/cpuinfo") if line.startswith("flags")), [])
    return {"cpu": cpu, "cores": os.cpu_count(), "avx512_bf16": "avx512_bf16" in flags,
            "torch": torch.__version__, "load_at_start": os.getloadavg()[0]}


def minutes(seconds: float) -> str:
    """The intro's way of writing a time: seconds under two minutes, else minutes to one decimal."""
    return f"{seconds:.0f}&nbsp;s" if seconds < 120 else f"{seconds / 60:.1f}&nbsp;min"


def times_of(record: dict, kind: str) -> dict[str, float]:
    """Notebook -> CPU seconds of its first run of ``kind`` (``first`` or ``cached``) in a record."""
    out = {}
    for row in record["runs"]:
        if row["kind"] == kind and row["returncode"] == 0 and row["notebook"] not in out:
            out[row["notebook"]] = row["cpu_s"]
    return out


def table(records: list[dict]) -> str:
    """The intro's table: per notebook, the CPU time of a first and of a cached run in each record."""
    head = ["notebook"] + [f"{r['label']} {kind}" for r in records for kind in ("first run", "cached")]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for name in CHAPTERS:
        cells = []
        for r in records:
            for kind in ("first", "cached"):
                t = times_of(r, kind).get(name)
                cells.append(minutes(t) if t is not None else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


RECORDS = Path(__file__).resolve().parent.parent / "results" / "notebook_times"  # the committed measurements


def intro_rows(smoke: dict, bf16: dict, float32: dict) -> list[str]:
    """The intro's table rows, from the committed records: each notebook's CPU time at the smoke scale, then at the
    cpu scale in bfloat16 and in float32 (a first run in the book's order; notebook 01's cached run beside it)."""
    def cell(record, name):
        first, cached = times_of(record, "first").get(name), times_of(record, "cached").get(name)
        text = minutes(first) if first is not None else "not measured"
        return text + (f" (cached: {minutes(cached)})" if cached is not None else "")
    return [f"| {{doc}}`../notebooks/{name}` | {cell(smoke, name)} | {cell(bf16, name)} | {cell(float32, name)} |"
            for name in CHAPTERS]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--repo", type=Path, help="a fresh clone of this repository")
    p.add_argument("--data", type=Path, help="MINIRL_DATA for the runs (empty for a first run)")
    p.add_argument("--table", nargs="+", metavar="JSON", help="print the table of these records and stop")
    p.add_argument("--passes", type=int, default=2, help="1: a first run; 2: then a cached run (default)")
    p.add_argument("--notebooks", nargs="*", default=CHAPTERS)
    p.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--label", default="")
    a = p.parse_args(argv)
    if a.table:
        print(table([json.loads(Path(f).read_text()) for f in a.table]))
        return
    if a.repo is None or a.data is None:
        p.error("--repo and --data are required (or --table JSON ...)")
    env = {k: v for k, v in os.environ.items()}
    env["MINIRL_DATA"] = str(a.data)
    env.setdefault("MINIRL_SCALE", "cpu")
    if not any(k in env for k in ("MINIRL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")):
        env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    record = {"label": a.label, "machine": machine(), "settings": {k: env[k] for k in PASSED_ON if k in env},
              "data_cached_at_start": any(a.data.glob("*.npz")) if a.data.exists() else False, "runs": []}
    from minirl.devices import default_precision
    os.environ.update({k: env[k] for k in PASSED_ON if k in env})
    record["precision"] = default_precision("cpu")
    print(f"{a.label or 'notebooks'}: {record['machine']['cpu']}, precision {record['precision']}, "
          f"settings {record['settings']}", flush=True)
    for n in range(1, a.passes + 1):
        kind = "first" if n == 1 and not record["data_cached_at_start"] else "cached"
        out_dir = a.repo / f".executed-{n}"
        out_dir.mkdir(exist_ok=True)
        for name in a.notebooks:
            row = {"pass": n, "kind": kind, "load_before": round(os.getloadavg()[0], 2),
                   **run_notebook(a.repo, name, env, out_dir, a.timeout)}
            record["runs"].append(row)
            print(f"pass {n} ({kind:6s}) {name:24s} wall {row['wall_s']:7.1f} s  cpu {row['cpu_s']:7.1f} s  "
                  f"load {row['load_before']:4.1f}  exit {row['returncode']}", flush=True)
            if row["returncode"]:
                print(row["error"], flush=True)
            if a.json:
                a.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
