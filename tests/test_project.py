"""The end-to-end assignment (notebooks/exercises/06_project.ipynb, issue 44): its reference distribution and the
broken updates on record, the cells the student runs and the grader does not, the notebook's own time limit, and the
training loop's ``update`` hook it trains a student's update with. Grading whole 06 submissions (right, wrong,
untouched, a broken update): tests/test_grading.py."""
import json

import numpy as np
import torch
import pytest

from minirl.classroom import grader, project_checks as pc, release

BROKEN = pc.REFERENCE_FILE.parent / "broken.json"


def _spec() -> dict:
    return release.notebook_spec(json.loads((release.SOLUTIONS / "06_project.ipynb").read_text()), "06_project")


def test_the_reference_distribution_is_the_grading_setting():
    ref = pc.reference_distribution()
    assert len(ref["scores"]) == len(set(ref["seeds"])) >= 20
    assert pc.passing_score(ref) == pytest.approx(min(ref["scores"]) - pc.TOLERANCE)
    assert ref["grading_seed_score"] >= pc.passing_score(ref)  # the reference itself passes at the grading seed


def test_a_stale_reference_file_is_refused(tmp_path):
    ref = json.loads(pc.REFERENCE_FILE.read_text()) | {"steps": pc.GRADING["steps"] + 1}
    path = tmp_path / "reference.json"
    path.write_text(json.dumps(ref))
    with pytest.raises(ValueError, match="rerun the experiment"):
        pc.reference_distribution(path)
    with pytest.raises(FileNotFoundError, match="assignment_reference.py"):
        pc.reference_distribution(tmp_path / "absent.json")


def test_every_broken_update_on_record_falls_below_the_passing_score():
    """The tolerance is useful only if the broken updates of experiments/assignment_reference.py fail on every seed
    they were run at; rerunning the reference (or changing TOLERANCE) must keep it so."""
    broken = json.loads(BROKEN.read_text())
    floor = pc.passing_score()
    assert set(broken["updates"]) == {"no_penalty", "wrong_sign", "frozen_actor"}
    for name, b in broken["updates"].items():
        assert len(b["scores"]) == 5
        assert max(b["scores"]) < floor, f"{name} scored {max(b['scores']):.1f}, above the passing score {floor:.1f}"


def test_student_run_cells_are_known_to_the_grader_but_not_run():
    spec = _spec()
    runs = [c for c in spec["cells"] if c["kind"] == "student-run"]
    assert len(runs) == 2 and runs[0]["minutes"] >= 1
    nb = json.loads((release.SOLUTIONS / "06_project.ipynb").read_text())
    steps, found = grader.build_program(spec, nb)
    sources = {s["source"] for s in steps}
    assert not any(r["source"] in sources for r in runs)
    assert found["ignored"] == 0  # the student's sweep cells are not "extra cells"
    student = release.student_notebook(nb, "06_project")
    kept = [c for c in student["cells"] if "student-run" in c["metadata"].get("tags", [])]
    assert len(kept) == 2 and all(c["outputs"] == [] for c in kept)


def test_the_notebook_s_own_time_limit_reaches_its_job_unless_the_command_line_sets_one():
    spec = _spec()
    assert spec["time_limit"] == 300
    assert grader.prepare("s", "06_project", None, spec).time_limit == 300
    assert grader.prepare("s", "06_project", None, spec, time_limit=50).time_limit == 50
    assert grader.prepare("s", "01_offline_rl", None, {"cells": []}).time_limit == grader.DEFAULT_TIME_LIMIT
    nb = json.loads((release.SOLUTIONS / "06_project.ipynb").read_text())
    nb["metadata"]["minirl_time_limit"] = -1
    with pytest.raises(ValueError, match="minirl_time_limit is -1"):
        release.notebook_spec(nb, "06_project")


def test_train_calls_the_given_update_and_names_a_bad_return(tmp_path):
    import torch

    from minirl.classroom import continuous_exercise
    from minirl.data import OfflineDataset
    from minirl.train import train
    b = continuous_exercise(64)
    data = OfflineDataset(b["obs"].numpy(), b["act"].numpy(), b["rew"].numpy(), b["next_obs"].numpy(),
                          b["done"].numpy().astype(bool), np.zeros(64, dtype=bool))
    agent = pc.make_exercise_cql()
    calls = []

    def mine(agent, batch):
        calls.append(batch["obs"].shape)
        return agent.update(batch)

    out = train(agent, data, 5, batch_size=16, progress=False, log_every=5, precision="float32", update=mine)
    assert calls == [torch.Size([16, 2])] * 5 and agent.step == 5 and "critic_loss" in out["train"][-1]
    with pytest.raises(TypeError, match="the update returned a NoneType, expected a dict"):
        train(pc.make_exercise_cql(), data, 2, batch_size=16, progress=False, precision="float32",
              update=lambda agent, batch: None)


def test_the_written_row_says_whether_the_sweep_s_figure_was_saved():
    """The grader does not rerun the student's sweep; the written answer's row tells the instructor whether the
    submission holds its figure."""
    spec = _spec()
    executed = json.loads((release.SOLUTIONS / "06_project.ipynb").read_text())
    _, found = grader.build_program(spec, executed)
    assert found["student_run"] == {"cells": 2, "with_output": 2, "figures": 1}
    assert "1 figure saved" in grader._student_run_note(found["student_run"])
    _, found = grader.build_program(spec, release.student_notebook(executed, "06_project"))
    assert found["student_run"] == {"cells": 2, "with_output": 0, "figures": 0}
    assert "no output saved" in grader._student_run_note(found["student_run"])
    _, found = grader.build_program(_spec_of("01_offline_rl"), json.loads(
        (release.SOLUTIONS / "01_offline_rl.ipynb").read_text()))
    assert "student_run" not in found


def _spec_of(name: str) -> dict:
    return release.notebook_spec(json.loads((release.SOLUTIONS / f"{name}.ipynb").read_text()), name)


@pytest.mark.parametrize("key,value,message", [("minirl_minutes", -1, "minirl_minutes is -1"),
                                               ("minirl_points", 0, "minirl_points of a agent cell is 0"),
                                               ("minirl_points", True, "minirl_points of a agent cell is True")])
def test_a_bad_points_or_minutes_entry_names_the_cell_s_metadata(key, value, message):
    nb = json.loads((release.SOLUTIONS / "06_project.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "agent" in c["metadata"].get("tags", []))
    cell["metadata"][key] = value
    with pytest.raises(ValueError, match=f"06_project: {message}; expected a positive integer"):
        release.notebook_spec(nb, "06_project")


def _verdict_of(monkeypatch, sweep, steps=None):
    """The penalty_sweep check run in this process on ``sweep``: its verdict record and the printed output."""
    import contextlib
    import io

    from minirl.classroom import checks
    if steps is not None:
        monkeypatch.setitem(pc.GRADING, "steps", steps)
    checks._VERDICTS.clear()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        pc.check_penalty_sweep(sweep)
    return checks._VERDICTS[-1], out.getvalue()


def test_the_sweep_s_reported_score_is_never_the_verdict(monkeypatch):
    """Before, the check compared the number the student's sweep returned with the passing score: a sweep that
    returned 100 without training, or trained 20 times too briefly and reported 100, passed. Now the check scores the
    policy the run trained, from its actor's weights."""
    forged = lambda update, alphas, seeds, steps: np.full((len(alphas), len(seeds)), 100.0)  # noqa: E731
    verdict, out = _verdict_of(monkeypatch, forged)
    assert verdict["passed"] == 0 and "never called the update" in out

    def brief(update, alphas, seeds, steps):
        pc.train_and_score(update, alphas[0], seeds[0], steps // 20)
        return np.full((1, 1), 100.0)
    verdict, out = _verdict_of(monkeypatch, brief)
    assert verdict["passed"] == 0 and "made 200 updates, expected 4,000" in out, out

    def swapped(update, alphas, seeds, steps):  # trains the right number of updates, then reports another policy's
        kept = {}

        def keeping(agent, batch):
            kept["agent"] = agent
            return update(agent, batch)
        for a in alphas:
            for s in seeds:
                pc.train_and_score(keeping, a, s, steps)
        with torch.no_grad():
            for p in kept["agent"].actor.parameters():
                p.zero_()
        return np.full((len(alphas), len(seeds)), 100.0)
    monkeypatch.setattr(pc, "reference_distribution", lambda path=None: {"scores": [60.0]})
    verdict, out = _verdict_of(monkeypatch, swapped, steps=30)
    assert verdict["passed"] == 0 and "your sweep reported 100.0" in out, out


def test_the_check_s_own_score_of_the_trained_actor_is_the_run_s_final_evaluation(monkeypatch):
    """score_of_actor evaluates the weights on the episodes train_and_score evaluates: an honest sweep's reported
    score and the check's own agree exactly (a short run, and a pass mark every run reaches)."""
    monkeypatch.setattr(pc, "reference_distribution", lambda path=None: {"scores": [-1000.0]})
    kept = {}

    def sweep(update, alphas, seeds, steps):
        def keeping(agent, batch):
            kept["agent"] = agent
            return update(agent, batch)
        return np.array([[pc.train_and_score(keeping, a, s, steps) for s in seeds] for a in alphas])
    verdict, _ = _verdict_of(monkeypatch, sweep, steps=30)
    assert verdict["passed"] == verdict["n"] == 2
    weights = {k: v.numpy() for k, v in kept["agent"].actor.state_dict().items()}
    reported = pc.train_and_score(lambda agent, batch: agent.update(batch), pc.GRADING["cql_alpha"],
                                  pc.GRADING["seed"], 30)
    assert pc.score_of_actor(weights, pc.GRADING["cql_alpha"], pc.GRADING["seed"]) == reported
    with pytest.raises(ValueError, match="the actor's weights name"):
        pc.score_of_actor({"w": np.zeros(3)}, 5.0, 100)


def _checks_of(verdict) -> dict:
    return {description.split(" with ")[0].split(":")[0]: problem for description, problem in verdict["checks"]}


def test_the_small_sweep_is_judged_by_the_grader_s_own_run_of_it_on_fresh_inputs(monkeypatch):
    """The first check: the scores of a small sweep on inputs drawn per grading run must equal the grader's own run
    of that sweep. Before, a sweep that trained as asked once, at the public grading setting, and returned anything
    elsewhere (constants, shorter runs, another policy's scores) passed; now it fails, and the inputs change with the
    draw."""
    from minirl.classroom import checks
    public = pc.replay_setting()
    with checks.grading_inputs(12345):
        drawn = pc.replay_setting()
    assert public != drawn and len(drawn[0]) == 2 and len(drawn[1]) == 1 and 20 <= drawn[2] <= 60
    assert set(drawn[0]) <= set(pc.PROJECT_ALPHAS)
    monkeypatch.setattr(pc, "reference_distribution", lambda path=None: {"scores": [-1000.0]})

    def honest(update, alphas, seeds, steps):  # written here, not minirl's reference (unavailable while it runs)
        return np.array([[pc.train_and_score(update, a, s, steps) for s in seeds] for a in alphas])
    verdict, out = _verdict_of(monkeypatch, honest, steps=30)
    assert verdict["passed"] == verdict["n"] == 2, out

    def special_cased(update, alphas, seeds, steps):  # honest only at the grading setting it was told
        if (alphas, seeds, steps) == ((pc.GRADING["cql_alpha"],), (pc.GRADING["seed"],), pc.GRADING["steps"]):
            return honest(update, alphas, seeds, steps)
        return honest(update, alphas, seeds, max(1, steps // 2))
    verdict, out = _verdict_of(monkeypatch, special_cased, steps=30)
    assert verdict["passed"] == 1 and verdict["n"] == 2, out
    problem = next(p for d, p in verdict["checks"] if d.startswith("penalty_sweep(update, alphas="))
    assert problem is not None and "expected" in problem, verdict["checks"]


def test_minirl_s_other_learners_cannot_train_the_sweep_s_policy(monkeypatch):
    """While the sweep runs, BC's (and IQL's, TD3+BC's, BCQ's, SAC's) updates are stubs that raise: a sweep that
    trains minirl's BC gets "uses the reference implementation", whatever it returns. Before, BC.update ran."""
    from minirl import bc
    from minirl.classroom import checks
    monkeypatch.setattr(pc, "reference_distribution", lambda path=None: {"scores": [-1000.0]})
    alias = bc.BC.update  # kept before the check: the stub replaces the code every alias shares

    def with_bc(update, alphas, seeds, steps):
        data, _ = pc.project_data()
        agent = bc.BC(data.obs_dim, data.act_dim, data.action_low, data.action_high)
        alias(agent, data.sample(8))
        return np.array([[pc.train_and_score(update, a, s, steps) for s in seeds] for a in alphas])
    verdict, out = _verdict_of(monkeypatch, with_bc, steps=30)
    assert verdict["uses_reference"] == ["minirl.bc.BC.update"], (verdict, out)
    assert "uses the reference implementation (minirl.bc.BC.update)" in out
    data, _ = pc.project_data()
    assert "actor_loss" in bc.BC(data.obs_dim, data.act_dim).update(data.sample(8))
    assert checks.references_of(pc.check_penalty_sweep, "penalty_sweep")[1:] == pc.other_learners()


def test_the_project_s_dataset_is_read_from_the_cache_and_never_written_by_a_grading_process(monkeypatch, tmp_path):
    """``project_data`` reads the dataset's cache where it is there (a rollout of 100,000 steps, about 6 s of CPU,
    which it once paid again in every process: the grader's and every child's); without a cache it makes the dataset
    without writing one (a grading child may write only in its own folder)."""
    from minirl import datasets
    made = []
    real_make = datasets.make_dataset
    monkeypatch.setattr(datasets, "make_dataset", lambda *a, **k: made.append(a) or real_make(*a, **k))
    monkeypatch.setattr(pc, "_DATA", {})
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path))
    data, _ = pc.project_data()
    assert len(made) == 1 and list(tmp_path.iterdir()) == []  # made, nothing cached
    datasets.load_dataset(pc.DATASET, progress=False)  # what the grader does before it forks (sandbox.warm)
    assert len(made) == 2 and datasets.cache_path(pc.DATASET).exists()
    monkeypatch.setattr(pc, "_DATA", {})
    cached, _ = pc.project_data()
    assert len(made) == 2  # read, not made again
    assert np.array_equal(cached.observations, data.observations) and np.array_equal(cached.actions, data.actions)
