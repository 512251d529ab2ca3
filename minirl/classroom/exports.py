"""What the exercise notebooks import from ``minirl.classroom`` (the names of each checker module, loaded on first
use by the package's ``__getattr__``) and the checker modules themselves; its own module so that ``course.py`` can read
the list without importing the package it extends."""
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
    "predict_checks": ("COVERAGE_EPS", "GAP_THRESHOLDS", "check_coverage_experiment", "check_coverage_prediction",
                       "check_gap_prediction", "check_unseen_gap_sweep", "coverage_behaviour"),
    "stitching_checks": ("DESIGN", "STITCH_TAUS", "check_bcql_values", "check_one_step_policy",
                         "check_stitching_design", "check_stitching_sweep", "check_stitching_threshold",
                         "design_methods", "segments_dataset", "stitching_exercise"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
CHECKER_MODULES = tuple(_EXPORTS)  # the modules whose check_* functions the notebooks call (the grader's list too)
