"""The classroom exercises: the generated files stay in sync and hold no solution, plausible wrong answers fail with
a readable message at every level (function, agent, experiment), the book's exercises page with and without its
solutions, and the command line. Grading whole submissions: tests/test_grading.py."""
import ast
import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minirl import classroom
from minirl.classroom import checks, release

SOLUTIONS = sorted(release.SOLUTIONS.glob("*.ipynb"))

# One plausible wrong answer per task: (notebook, function, text in its solution cell, replacement).
WRONG = [
    ("01_offline_rl", "policy_transition", "* pi[None, None, :, :]", "* np.ones_like(pi)[None, None, :, :]"),
    ("01_offline_rl", "evaluate_policy", "gamma * policy_transition(P, pi)", "gamma * policy_transition(P, pi).T"),
    ("01_offline_rl", "empirical_mdp", "T_hat[unseen_s, unseen_a, unseen_s] = 1.0", "pass"),
    ("01_offline_rl", "optimism_experiment", "unseen_reward=unseen_reward)", "unseen_reward=0.0)"),
    ("02_bcq", "soft_clipped_double_q", "lmbda * torch.minimum(q1, q2) + (1 - lmbda) * torch.maximum(q1, q2)",
     "lmbda * torch.maximum(q1, q2) + (1 - lmbda) * torch.minimum(q1, q2)"),
    ("02_bcq", "critic_target", ".max(dim=1).values", ".mean(dim=1)"),
    ("02_bcq", "vae_loss", "torch.log(std ** 2)", "torch.log(std)"),
    ("02_bcq", "bcq_action_mask", "log_ratio = log_probs - log_probs.max(dim=-1, keepdim=True).values",
     "log_ratio = log_probs"),
    ("03_cql", "discrete_cql_penalty", "torch.logsumexp(q_all, dim=-1)", "q_all.max(dim=-1).values"),
    ("03_cql", "cql_penalty", "q_sampled / temperature - log_density", "q_sampled / temperature"),
    ("03_cql", "lagrange_loss", "penalty.detach()", "penalty"),
    ("03_cql", "cql_critic_loss", "act_dim * math.log(0.5)", "math.log(0.5)"),  # the colleague's bug 1 left in
    ("04_iql", "expectile_loss", "weight * diff ** 2", "0.5 * diff ** 2"),
    ("04_iql", "q_target", "gamma * (1.0 - done) * next_v", "gamma * next_v"),
    ("04_iql", "awr_weights", "torch.exp(beta * adv.detach()).clamp(max=max_weight)", "torch.exp(beta * adv.detach())"),
    ("04_iql", "expectile_experiment", "(p * expectile_loss(q - m, tau)).sum()", "expectile_loss(q - m, tau).mean()"),
    ("04_iql", "iql_losses", "adv = q_min - v.detach()", "adv = q_min - v"),  # the colleague's bug 3 left in
    ("04b_stitching", "one_step_policy", "tab.greedy_policy(np.where(support, Q_beta, -np.inf))",
     "tab.greedy_policy(Q_beta)"),  # greedy over every action, not only the data's
    ("04b_stitching", "bcql_values", "Q_next = np.where(support, mdp_hat.R + mdp_hat.gamma * (mdp_hat.P @ V), -np.inf)",
     "Q_next = mdp_hat.R + mdp_hat.gamma * (mdp_hat.P @ V)"),  # value iteration over every action
    ("04b_stitching", "stitching_threshold", "for _ in range(30):", "for _ in range(3):"),
    ("04b_stitching", "stitching_design", 'return [("start", "RRRRRR")]', 'return [("start", "RRRRRR")] * 3'),
    # three A against two B at J1: the move up rarer, CQL's penalty on it above the margin, CQL takes the decoy too
    ("05_comparison", "bootstrap_ci", "np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])",
     "np.quantile(means, [1 - confidence, confidence])"),  # both tails cut at 5%: a 90% interval
    ("05_comparison", "iqm", "None) / 0.5", "None)"),  # the weights sum to 1/2
    ("05_comparison", "stratified_iqm_ci", "stats = np.array([iqm(row) for row in samples])",
     "stats = samples.mean(axis=1)"),  # the mean, not the IQM
    ("05_comparison", "seed_design", "low_high = [10.0, 12.0, 14.0, 80.0, 84.0]",
     "low_high = [36.0, 38.0, 40.0, 42.0, 44.0]"),  # the gap without the split seeds: pair 1's verdict is above
    ("05_comparison", "compare", 'verdict = "above" if lo > 0 else "below" if hi < 0 else "overlap"',
     'verdict = "above" if a.mean() > b.mean() else "below"'),  # the verdict read off the means
    ("06_project", "cql_update", "critic_loss = td_loss + cfg.cql_alpha * gap.sum()",
     "critic_loss = td_loss - cfg.cql_alpha * gap.sum()"),  # the penalty's sign flipped
    ("06_project", "penalty_sweep", "train_and_score(update, alpha, seed, steps)",
     "train_and_score(update, alpha, seed, steps // 20)"),  # every run 20 times shorter than asked
    # agent level: one update of a whole agent
    ("02_bcq", "discrete_bcq_update", "agent.q(next_obs).masked_fill(~allowed, float(\"-inf\"))", "agent.q(next_obs)"),
    ("03_cql", "discrete_cql_update", "loss = td_loss + cfg.cql_alpha * gap", "loss = td_loss + gap"),
    ("04_iql", "iql_update", "agent.critic_target(obs, act).min(dim=0).values", "agent.critic(obs, act).min(dim=0).values"),
    # experiment level: a sweep whose numbers are checked
    ("02_bcq", "threshold_sweep", "returns.append(greedy_return(agent, problem))",
     "returns.append(greedy_return(make_discrete_bcq(threshold), problem))"),
    ("03_cql", "alpha_sweep", "gaps.append(q[:, 2:].mean() - q[:, :2].mean())", "gaps.append(q[:, 2:].mean())"),
    ("04_iql", "expectile_sweep", "for _ in range(steps):", "for _ in range(steps // 2):"),
    ("04b_stitching", "stitching_sweep", "values.append(tab.policy_return(mdp, pi))", "values.append(V[start])"),
    ("05_comparison", "record_verdicts", "compare(plots.final_scores(runs, method, dataset), plots.final_scores(runs, "
     "baseline, dataset))", "compare(plots.final_scores(runs, baseline, dataset), plots.final_scores(runs, method, "
     "dataset))"),  # baseline - method
    ("01_offline_rl", "coverage_experiment", ", reward_noise=0.5)", ")"),  # the observed rewards' noise left out
    ("02_bcq", "unseen_gap_sweep", "q = agent.q(states).numpy()", "q = agent.q_target(states).numpy()"),  # the target
]


def _solution_source(notebook: str, function: str) -> str:
    nb = json.loads((release.SOLUTIONS / f"{notebook}.ipynb").read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "solution" in cell["metadata"].get("tags", []) and f"def {function}(" in src:
            return src
    raise AssertionError(f"no solution cell defines {function} in {notebook}")


def _run_setup_and(notebook: str, source: str) -> dict:
    """Execute the notebook's code cells before ``source``'s solution cell (checker cells skipped), then ``source`` in
    place of that cell; returns the namespace, with the function under ``__fn__``."""
    nb = json.loads((release.SOLUTIONS / f"{notebook}.ipynb").read_text())
    fn_name = next(line.split("(")[0][4:] for line in source.splitlines() if line.startswith("def "))
    ns: dict = {}
    skipped: set[str] = set()  # what the skipped checker cells would have assigned (a sweep's values, to plot)
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code":
            continue
        if release.checker_task(src):
            skipped.update(t.id for node in ast.parse(src).body if isinstance(node, ast.Assign)
                           for t in node.targets if isinstance(t, ast.Name))
            continue
        if f"def {fn_name}(" in src:
            break
        try:
            exec(compile(src, notebook, "exec"), ns)  # noqa: S102 - our own notebooks
        except NameError as e:  # a figure of a skipped checker's values: not needed by the tasks after it
            if e.name not in skipped:
                raise
    exec(compile(source, notebook, "exec"), ns)  # noqa: S102
    return ns | {"__fn__": ns[fn_name]}


@pytest.mark.parametrize("notebook,function,old,new", WRONG, ids=[w[1] for w in WRONG])
def test_a_plausible_wrong_answer_fails_with_a_readable_message(notebook, function, old, new):
    src = _solution_source(notebook, function)
    assert old in src, f"the wrong-answer edit no longer applies to {function}"
    checker = getattr(classroom, f"check_{function}")
    for source, should_pass in ((src, True), (src.replace(old, new), False)):
        ns = _run_setup_and(notebook, source)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            checker(ns["__fn__"])
        text = out.getvalue()
        last = text.strip().splitlines()[-1]
        k, n = (int(x) for x in last.split(": ")[1].split(" ")[0].split("/"))
        if should_pass:
            assert k == n and "FAILED" not in text, text
        else:
            assert k < n, text
            assert "check FAILED: " in text and any(w in text for w in ("expected", "raised", "detach")), text


def test_generated_files_are_up_to_date():
    """``make-student --check``: the student copies, checks.json and book/exercises.md match the reference notebooks."""
    assert release.make_student(check=True) == [], "run python -m minirl.classroom make-student"


def test_minirl_classroom_offers_every_checker():
    """The notebooks import the checkers from the package (``from minirl.classroom import check_...``), loaded on first
    use (so that the nbval plugin's import does not load torch)."""
    import importlib
    modules = [importlib.import_module(f"minirl.classroom.{m}") for m in classroom.CHECKER_MODULES]
    defined = {name: m for m in modules for name in vars(m) if name.startswith("check_")}
    assert defined and set(defined) <= set(dir(classroom)), sorted(set(defined) - set(dir(classroom)))
    assert all(getattr(classroom, name) is getattr(m, name) for name, m in defined.items())


def test_stub_source_keeps_signature_docstring_and_imports():
    src = ('import numpy as np\n\n# helper comment\ndef f(x, y=1):\n    """Doc."""\n    z = x + y\n    return z\n\n'
           'def g():\n    return 3\nanswer = 42\n')
    stub = release.stub_source(src)
    assert stub == ('import numpy as np\n\n# helper comment\ndef f(x, y=1):\n    """Doc."""\n'
                    '    raise NotImplementedError("f: your code here: replace this line")\n\n'
                    'def g():\n    raise NotImplementedError("g: your code here: replace this line")\n'
                    'answer = None  # your answer\n')
    with pytest.raises(ValueError, match="line 1 is a For"):
        release.stub_source("for i in range(3):\n    pass\n")


def test_mismatch_messages():
    assert checks.mismatch(np.ones(3), np.ones(3)) is None
    assert checks.mismatch(np.ones(3), np.ones((3, 1))) == "shape (3,), expected shape (3, 1)"
    msg = checks.mismatch(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
    assert msg.startswith("1 of 2 values differ at index (1,): got 2, expected 2.5")
    assert checks.mismatch(np.array([-np.inf]), np.array([-np.inf])) is None
    assert "not an array" in checks.mismatch("abc", np.ones(1))


def test_book_page_with_and_without_solutions():
    public = release.book_page(SOLUTIONS)
    hidden = release.book_page(SOLUTIONS, hide_solutions=True)
    n_tasks = sum(c["kind"] in ("check", "written") for spec in json.loads(release.CHECKS_FILE.read_text())["notebooks"]
                  .values() for c in spec["cells"])
    assert public.count("{exercise}") == hidden.count("{exercise}") == n_tasks
    assert public.count("{solution}") == n_tasks and "{solution}" not in hidden
    assert not [ln for ln in release.solution_lines() if ln in hidden]
    assert "return rew + gamma * (1.0 - done) * next_v" in public


def test_strip_solutions_removes_every_fence_style():
    text = ("# Title\n\n````{exercise} E\n:label: e\n\nTask.\n````\n\n````{solution} e\n:class: dropdown\n\n"
            "```python\nsecret()\n```\n````\n\n```{solution} e\nsecret two\n```\n\n:::{solution} e\nsecret three\n:::\n"
            "After.\n")
    out = release.strip_solutions(text)
    assert "secret" not in out and "{exercise} E" in out and "Task." in out and "After." in out


def test_cli_errors_are_one_line_with_status_2(tmp_path):
    for args, expected in ((["grade", str(tmp_path / "missing_dir")], "missing_dir: no such folder"),
                           (["grade", str(tmp_path)], "no student folders"),
                           (["check", str(tmp_path / "nope.ipynb")], "nope.ipynb: no such notebook"),
                           (["check", str(release.EXERCISES / "01_offline_rl.ipynb"), "--time-limit", "-3"],
                            "--time-limit must be a positive number of seconds, got -3"),
                           (["grade", str(tmp_path), "--parallel", "0"], "--parallel must be at least 1")):
        r = subprocess.run([sys.executable, "-m", "minirl.classroom", *args], capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and expected in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


# --------------------------------------------------------------------------------------------------------------
# The two builds of the book: public (solutions in dropdowns) and a class's release (no solution text anywhere)
# --------------------------------------------------------------------------------------------------------------

PAGES = ["book/bcq", "book/exercises", "book/instructors"]  # a chapter with its own solutions, the exercises, this


def _solution_marks(html: Path) -> tuple[int, int]:
    """(solution blocks, solution lines) found in the built pages."""
    raw = "".join(p.read_text(errors="replace") for p in html.rglob("*.html"))
    text = "".join(release.readable_text(p) for p in html.rglob("*.html"))
    return raw.count('class="solution'), sum(ln in text for ln in release.solution_lines())


def test_public_build_shows_the_solutions(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("_config.yml",):
        (src / name).write_text((release.REPO / name).read_text())
    shutil.copytree(release.REPO / "book", src / "book")
    (src / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                  + "".join(f"  - file: {f}\n" for f in PAGES))
    r = subprocess.run(["jupyter-book", "build", "--path-output", str(tmp_path / "out"), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    blocks, lines = _solution_marks(tmp_path / "out" / "_build" / "html")
    assert blocks >= 15 and lines > 50, (blocks, lines)


def test_class_release_has_no_solution_text(tmp_path):
    """The release as ``class-release OUT`` makes it: the whole book (the real table of contents), no solution text."""
    out = tmp_path / "class"
    assert release.class_release(out) == []
    html = out / "book" / "_build" / "html"
    for page in ("book/exercises.html", "book/bcq.html", "notebooks/01_offline_rl.html",
                 "notebooks/04b_stitching.html"):
        assert (html / page).exists(), page
    assert _solution_marks(html) == (0, 0)
    exercises_page = (html / "book" / "exercises.html").read_text()
    assert exercises_page.count('class="admonition exercise') >= 15 or "exercise" in exercises_page
    assert sorted(p.name for p in (out / "notebooks" / "exercises").iterdir()) == \
        sorted([p.name for p in SOLUTIONS] + ["checks.json"])
    with pytest.raises(FileExistsError, match="not empty"):
        release.class_release(out, build=False)


def test_generic_lines_are_not_solution_text():
    for line in ("for j, seed in enumerate(seeds):", "for threshold in thresholds:", "for g in groups.values():",
                 "for i, (a, b) in enumerate(zip(xs, ys)):", "else:"):
        assert release.generic_line(line), line
    for line in ("pi, _, V = st.iql_policy(mdp_hat, pi_hat, support, tau)", "for _ in range(steps // 2):",
                 "return weight * diff ** 2", "for k in (\"obs\", \"act\"):"):
        assert not release.generic_line(line), line
    needles = release.solution_lines()
    assert "for j, seed in enumerate(seeds):" not in needles and "return weight * diff ** 2" in needles


def test_the_release_sources_hold_no_solution_and_a_pasted_one_is_found(tmp_path):
    """What the release builds, from the real table of contents: the chapters' notebooks 01 and 04b share a generic
    loop and one line of a solution with the exercises (the chapter teaches it: public, listed, not a leak); a
    solution line or a whole solution put into a chapter is found."""
    src = tmp_path / "src"
    release.release_sources(src)
    assert (src / "_toc.yml").read_text() == (release.REPO / "_toc.yml").read_text()
    assert release.leaks_in(src) == [] and release.whole_solutions_in_chapters(src) == []
    shared = release.shared_with_chapters()
    assert shared == {"pi, _, V = st.iql_policy(mdp_hat, pi_hat, support, tau)": ["notebooks/04b_stitching.ipynb"]}
    chapter = src / "notebooks" / "01_offline_rl.ipynb"
    nb = json.loads(chapter.read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": "    return weight * diff ** 2\n"})
    chapter.write_text(json.dumps(nb))
    assert release.leaks_in(src) == ["notebooks/01_offline_rl.ipynb"]
    iql_update = _solution_source("04_iql", "iql_update")
    nb["cells"][-1]["source"] = iql_update
    chapter.write_text(json.dumps(nb))
    found = release.whole_solutions_in_chapters(src)
    assert len(found) == 1 and found[0].startswith("notebooks/01_offline_rl.ipynb (holds") and "iql_update" in found[0]
