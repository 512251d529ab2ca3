"""The classroom: exercise notebooks, their checkers, the student copies, a class's release and the grader.

A task in an exercise notebook is an answer cell where the student writes code, then a checker cell, e.g.
``check_expectile_loss(expectile_loss)``, which compares the code with minirl's own and prints one line per task.
Tasks come at three levels: a *function* (a loss, a target), an *agent* (one update of a whole agent) and an
*experiment* (a sweep whose numbers are checked, with a figure and a written answer for the instructor).

The files, in the order they depend on each other (each imports only those above it):

``checks.py``        how a check compares (:class:`~minirl.classroom.checks.Checks`), the function tasks' checkers
``agent_checks.py``  the agent and experiment tasks: small fixed problems, seeded agents, reference sweeps
``stitching_checks.py`` the stitching chapter's tasks (one-step, BCQL's values, IQL's expectile on the gridworld)
``debug_checks.py``   the "find the bug" tasks: IQL's losses (chapter 4) and CQL's critic loss (chapter 3), fixed
``comparison_checks.py`` the comparison chapter's tasks (bootstrap intervals, the IQM, verdicts on the results)
``project_checks.py`` the end-to-end assignment (continuous CQL's update, trained on pendulum-expert, and a sweep)
``release.py``       from the reference notebooks (``notebooks/exercises/solutions/``): the student copies, the checks
                     file the grader runs, the book's exercises page, a class's release without solutions
``sandbox.py``       the child process that runs one submission (audit hook, limits; ``python -m
                     minirl.classroom.sandbox worker`` where fork is unavailable)
``grader.py``        grading a folder or one notebook against the reference: one row per student and task
``course.py``        a course folder outside the package (``$MINIRL_COURSE`` or ``--course DIR``): an instructor's own
                     reference notebooks and checker modules, graded as the built-in exercises are
``cli.py``           ``python -m minirl.classroom make-student | check | grade | class-release``
``nbval_plugin.py``  ``pytest --nbval SUBMISSION.ipynb``: a pytest plugin (minirl's ``pytest11`` entry point) that
                     grades a book exercise notebook with the grader, one test per task

Notebooks import the checkers and the exercise problems from here: ``from minirl.classroom import
check_expectile_loss``; where ``$MINIRL_COURSE`` names a course folder, its checkers too.
"""
# What the exercise notebooks import (``from minirl.classroom import check_expectile_loss``), loaded on first use
# (PEP 562): ``import minirl.classroom.nbval_plugin``, which pytest imports at startup through minirl's ``pytest11``
# entry point, must not import torch.
_EXPORTS = {
    "agent_checks": ("ALPHAS", "EXPECTILES", "THRESHOLDS", "check_alpha_sweep", "check_discrete_bcq_update",
                     "check_discrete_cql_update", "check_expectile_sweep", "check_iql_update", "check_threshold_sweep",
                     "continuous_exercise", "greedy_return", "make_discrete_bcq", "make_discrete_cql", "make_iql",
                     "tabular_exercise"),
    "checks": ("check_awr_weights", "check_bcq_action_mask", "check_critic_target", "check_cql_penalty",
               "check_discrete_cql_penalty", "check_empirical_mdp", "check_evaluate_policy",
               "check_expectile_experiment", "check_expectile_loss", "check_lagrange_loss", "check_optimism_experiment",
               "check_policy_transition", "check_q_target", "check_soft_clipped_double_q", "check_vae_loss"),
    "debug_checks": ("check_cql_critic_loss", "check_iql_losses"),
    "comparison_checks": ("COMPARISONS", "RECORD", "SEED_DESIGN", "check_bootstrap_ci", "check_compare", "check_iqm",
                          "check_record_verdicts", "check_seed_design", "check_stratified_iqm_ci"),
    "project_checks": ("PROJECT_ALPHAS", "check_cql_update", "check_penalty_sweep", "make_cql", "make_exercise_cql",
                       "train_and_score"),
    "stitching_checks": ("DESIGN", "STITCH_TAUS", "check_bcql_values", "check_one_step_policy",
                         "check_stitching_design", "check_stitching_sweep", "check_stitching_threshold",
                         "design_methods", "segments_dataset", "stitching_exercise"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
CHECKER_MODULES = tuple(_EXPORTS)  # the modules whose check_* functions the notebooks call (the grader's list too)


def __getattr__(name):
    if name not in _WHERE and name.startswith("check_"):  # a checker of the course folder in $MINIRL_COURSE
        from .course import current
        active = current()
        checker = active.checkers().get(name) if active is not None else None
        if checker is not None:
            return checker  # not kept here: another course may be set later in this process
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
