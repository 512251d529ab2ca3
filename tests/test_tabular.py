"""Unit tests of minirl.tabular: exact vs iterative evaluation, contraction, empirical MDP, validation."""

import numpy as np
import pytest

from minirl import tabular as tab


def random_policy(n_states, n_actions, seed):
    w = np.random.default_rng(seed).random((n_states, n_actions))
    return w / w.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("shape", [(1, 1), (4, 2), (7, 3)])
def test_exact_and_iterative_evaluation_agree(seed, shape):
    mdp = tab.random_mdp(*shape, gamma=0.9, seed=seed, branching=min(3, shape[0]))
    pi = random_policy(*shape, seed)
    Q_exact = tab.evaluate_policy_exact(mdp, pi)
    Q_iter, deltas = tab.evaluate_policy_iterative(mdp, pi, tol=1e-9)
    assert Q_exact.shape == shape
    np.testing.assert_allclose(Q_iter, Q_exact, atol=1e-9)
    # Q^pi is the fixed point of B^pi, and V^pi = pi . Q^pi
    np.testing.assert_allclose(tab.bellman_operator(mdp, Q_exact, pi), Q_exact, atol=1e-10)
    # successive differences shrink at least by gamma (up to round-off)
    assert np.all(deltas[1:] <= mdp.gamma * deltas[:-1] + 1e-12)


def test_iterative_evaluation_fixed_iterations():
    mdp = tab.random_mdp(5, 2, gamma=0.5, seed=1)
    pi = tab.uniform_policy(5, 2)
    Q, deltas = tab.evaluate_policy_iterative(mdp, pi, iters=3)
    assert len(deltas) == 3
    Q_manual = np.zeros((5, 2))
    for _ in range(3):
        Q_manual = tab.bellman_operator(mdp, Q_manual, pi)
    np.testing.assert_allclose(Q, Q_manual)


def test_policy_transition_is_row_stochastic_and_matches_operator():
    mdp = tab.random_mdp(5, 3, gamma=0.8, seed=2)
    pi = random_policy(5, 3, 2)
    P_pi = tab.policy_transition(mdp.P, pi)
    assert P_pi.shape == (15, 15)
    np.testing.assert_allclose(P_pi.sum(axis=1), 1.0)
    Q = np.random.default_rng(0).normal(size=(5, 3))
    vector_form = mdp.R.reshape(-1) + mdp.gamma * P_pi @ Q.reshape(-1)
    np.testing.assert_allclose(tab.bellman_operator(mdp, Q, pi).reshape(-1), vector_form)
    # state-level chain: sum_a pi(a|s) P(s'|s,a)
    np.testing.assert_allclose(tab.state_transition(mdp.P, pi).sum(axis=1), 1.0)


def test_bellman_operator_is_a_gamma_contraction():
    mdp = tab.random_mdp(6, 3, gamma=0.9, seed=3)
    pi = random_policy(6, 3, 3)
    rng = np.random.default_rng(0)
    ratios = []
    for _ in range(500):
        Q1, Q2 = rng.normal(scale=10.0, size=(2, 6, 3))
        out = np.abs(tab.bellman_operator(mdp, Q1, pi) - tab.bellman_operator(mdp, Q2, pi)).max()
        ratios.append(out / np.abs(Q1 - Q2).max())
    assert max(ratios) <= mdp.gamma + 1e-12
    # the bound is tight: constant shifts are contracted by exactly gamma
    shift = tab.bellman_operator(mdp, Q1 + 1.0, pi) - tab.bellman_operator(mdp, Q1, pi)
    np.testing.assert_allclose(shift, mdp.gamma)


def test_value_iteration_satisfies_optimality_equation():
    mdp = tab.random_mdp(8, 4, gamma=0.95, seed=4)
    Q_star = tab.value_iteration(mdp, tol=1e-10)
    np.testing.assert_allclose(tab.optimality_operator(mdp, Q_star), Q_star, atol=1e-9)
    # the greedy policy of Q* is optimal: its exact Q equals Q*, and no deterministic tweak beats it
    pi_star = tab.greedy_policy(Q_star)
    np.testing.assert_allclose(tab.evaluate_policy_exact(mdp, pi_star), Q_star, atol=1e-8)
    assert tab.policy_return(mdp, pi_star) >= tab.policy_return(mdp, tab.uniform_policy(8, 4))


def test_greedy_policy_is_one_hot_with_lowest_index_ties():
    pi = tab.greedy_policy(np.array([[1.0, 2.0, 2.0], [0.0, 0.0, -1.0]]))
    np.testing.assert_array_equal(pi, [[0, 1, 0], [1, 0, 0]])


def test_sample_dataset_format_and_determinism():
    mdp = tab.random_mdp(4, 2, gamma=0.9, seed=5)
    pi_beta = tab.uniform_policy(4, 2)
    d1 = tab.sample_dataset(mdp, pi_beta, 1234, seed=7, horizon=20)
    d2 = tab.sample_dataset(mdp, pi_beta, 1234, seed=7, horizon=20)
    assert set(d1) == {"s", "a", "r", "s_next", "done", "timeout"}
    for key in d1:
        assert d1[key].shape == (1234,)
        np.testing.assert_array_equal(d1[key], d2[key])
    assert d1["s"].dtype == np.int64 and d1["r"].dtype == np.float64 and d1["done"].dtype == bool
    np.testing.assert_allclose(d1["r"], mdp.R[d1["s"], d1["a"]])
    # within an episode, the next state is the next transition's state
    cont = ~(d1["done"] | d1["timeout"])[:-1]
    np.testing.assert_array_equal(d1["s_next"][:-1][cont], d1["s"][1:][cont])
    assert not d1["done"].any()  # random_mdp has no terminal state
    assert d1["timeout"].sum() == int(np.ceil(1234 / 20))


def test_terminal_states_end_episodes_and_have_zero_value():
    # chain 0 -> 1 -> 2 (terminal); action 1 stays put
    P = np.zeros((3, 2, 3))
    P[0, 0, 1] = P[1, 0, 2] = 1.0
    P[0, 1, 0] = P[1, 1, 1] = 1.0
    P[2, :, 2] = 1.0
    R = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    mdp = tab.FiniteMDP(P, R, gamma=0.9, init=np.array([1.0, 0, 0]), terminal=np.array([False, False, True]))
    Q = tab.evaluate_policy_exact(mdp, np.tile([1.0, 0.0], (3, 1)))
    np.testing.assert_allclose(Q[:, 0], [0.9, 1.0, 0.0], atol=1e-12)
    data = tab.sample_dataset(mdp, np.tile([1.0, 0.0], (3, 1)), 10, seed=0, horizon=5)
    np.testing.assert_array_equal(data["s"][:4], [0, 1, 0, 1])
    np.testing.assert_array_equal(data["done"][:4], [False, True, False, True])
    mdp_hat, counts = tab.empirical_mdp(data, 3, 2, gamma=0.9)
    assert mdp_hat.terminal.tolist() == [False, False, True]
    np.testing.assert_allclose(tab.evaluate_policy_exact(mdp_hat, np.tile([1.0, 0.0], (3, 1)))[:, 0], [0.9, 1.0, 0.0])


def test_empirical_mdp_converges_to_true_mdp():
    mdp = tab.random_mdp(5, 2, gamma=0.9, seed=6)
    pi_beta = random_policy(5, 2, 6)
    data = tab.sample_dataset(mdp, pi_beta, 200_000, seed=0, reward_noise=0.1)
    mdp_hat, counts = tab.empirical_mdp(data, 5, 2, gamma=0.9)
    assert counts.sum() == 200_000 and np.all(counts > 0)
    np.testing.assert_allclose(mdp_hat.P, mdp.P, atol=0.02)
    np.testing.assert_allclose(mdp_hat.R, mdp.R, atol=0.01)
    np.testing.assert_allclose(tab.empirical_behavior_policy(data, 5, 2), pi_beta, atol=0.02)
    pi = random_policy(5, 2, 7)
    np.testing.assert_allclose(tab.evaluate_policy_exact(mdp_hat, pi), tab.evaluate_policy_exact(mdp, pi), atol=0.1)


def test_empirical_mdp_unseen_pairs_are_self_loops():
    mdp = tab.random_mdp(3, 2, gamma=0.9, seed=8)
    pi_beta = np.array([[1.0, 0.0], [1.0, 0.0], [0.5, 0.5]])  # never takes action 1 in states 0 and 1
    data = tab.sample_dataset(mdp, pi_beta, 5000, seed=0)
    for unseen_reward in (0.0, 1.0):
        mdp_hat, counts = tab.empirical_mdp(data, 3, 2, gamma=0.9, unseen_reward=unseen_reward)
        assert counts[0, 1] == 0 and counts[1, 1] == 0 and np.all(counts[:, 0] > 0)
        for s in (0, 1):
            np.testing.assert_array_equal(mdp_hat.P[s, 1], np.eye(3)[s])
            assert mdp_hat.R[s, 1] == unseen_reward
        stay = np.tile([0.0, 1.0], (3, 1))
        Q_hat = tab.evaluate_policy_exact(mdp_hat, stay)
        np.testing.assert_allclose(Q_hat[:2, 1], unseen_reward / (1 - 0.9), atol=1e-12)
    # the empirical behaviour policy of an unvisited state is uniform
    only_state_0 = {k: v[data["s"] == 0] for k, v in data.items()}
    pi_hat = tab.empirical_behavior_policy(only_state_0, 3, 2)
    np.testing.assert_allclose(pi_hat, [[1.0, 0.0], [0.5, 0.5], [0.5, 0.5]])


# ------------------------------------------------------------------------------------------------ validation errors


def valid_parts(S=3, A=2):
    P = np.full((S, A, S), 1.0 / S)
    R = np.zeros((S, A))
    return P, R


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda P, R: dict(P=P[:, :, :2]), r"P must have shape \(S, A, S\)"),
        (lambda P, R: dict(P=P[0]), r"P must have shape \(S, A, S\)"),
        (lambda P, R: dict(P=P * 2), r"row-stochastic.*P\[0, 0, :\] sums to 2"),
        (lambda P, R: dict(P=np.where(np.arange(3) == 0, -0.5, 0.75) * np.ones_like(P)), r"negative entries"),
        (lambda P, R: dict(P=np.where(np.arange(3) == 0, np.nan, 0.5) * np.ones_like(P)), r"P has non-finite"),
        (lambda P, R: dict(R=R[:, :1]), r"R must have shape \(S, A\) = \(3, 2\)"),
        (lambda P, R: dict(R=R + np.inf), r"R has non-finite"),
        (lambda P, R: dict(gamma=1.0), r"gamma must be in \[0, 1\)"),
        (lambda P, R: dict(gamma=-0.1), r"gamma must be in \[0, 1\)"),
        (lambda P, R: dict(init=np.ones(2) / 2), r"init must have shape \(S,\) = \(3,\)"),
        (lambda P, R: dict(init=np.ones(3)), r"init must be a probability distribution"),
        (lambda P, R: dict(terminal=np.zeros(3)), r"terminal must be a boolean array"),
        (lambda P, R: dict(terminal=np.array([True, False, False])), r"terminal state 0 must be absorbing"),
    ],
)
def test_finite_mdp_validation(change, match):
    P, R = valid_parts()
    kwargs = dict(P=P, R=R, gamma=0.9)
    kwargs.update(change(P, R))
    with pytest.raises(ValueError, match=match):
        tab.FiniteMDP(**kwargs)


def test_policy_validation():
    mdp = tab.FiniteMDP(*valid_parts(), gamma=0.9)
    with pytest.raises(ValueError, match=r"pi must have shape \(S, A\) = \(3, 2\)"):
        tab.evaluate_policy_exact(mdp, np.ones((2, 2)) / 2)
    with pytest.raises(ValueError, match=r"pi\[1, :\] sums to 2"):
        tab.evaluate_policy_exact(mdp, np.array([[0.5, 0.5], [1.0, 1.0], [0.5, 0.5]]))
    with pytest.raises(ValueError, match=r"non-negative"):
        tab.bellman_operator(mdp, np.zeros((3, 2)), np.array([[1.5, -0.5]] * 3))
    with pytest.raises(ValueError, match=r"Q must have shape \(S, A\) = \(3, 2\)"):
        tab.bellman_operator(mdp, np.zeros(3), tab.uniform_policy(3, 2))
    with pytest.raises(ValueError, match=r"pi_beta must have shape"):
        tab.sample_dataset(mdp, np.ones((3, 3)) / 3, 10)


def test_random_mdp_and_sampling_argument_validation():
    with pytest.raises(ValueError, match=r"branching must be in \[1, n_states\]"):
        tab.random_mdp(3, 2, branching=4)
    with pytest.raises(ValueError, match=r"n_states and n_actions must be >= 1"):
        tab.random_mdp(0, 2)
    mdp = tab.random_mdp(3, 2)
    with pytest.raises(ValueError, match=r"n_transitions must be >= 1"):
        tab.sample_dataset(mdp, tab.uniform_policy(3, 2), 0)
    with pytest.raises(ValueError, match=r"horizon must be >= 1"):
        tab.sample_dataset(mdp, tab.uniform_policy(3, 2), 10, horizon=0)


def test_dataset_validation():
    mdp = tab.random_mdp(3, 2, seed=9)
    data = tab.sample_dataset(mdp, tab.uniform_policy(3, 2), 50, seed=0)
    bad = dict(data)
    del bad["s_next"]
    with pytest.raises(ValueError, match=r"missing key\(s\) \['s_next'\]"):
        tab.empirical_mdp(bad, 3, 2, gamma=0.9)
    with pytest.raises(ValueError, match=r"dataset\['a'\] must be 1-D with the length of dataset\['s'\] \(50\)"):
        tab.empirical_mdp(dict(data, a=data["a"][:10]), 3, 2, gamma=0.9)
    with pytest.raises(ValueError, match=r"dataset\['a'\] must be in \[0, 2\), got 2 at index 3"):
        a = data["a"].copy()
        a[3] = 2
        tab.empirical_mdp(dict(data, a=a), 3, 2, gamma=0.9)
    with pytest.raises(ValueError, match=r"dataset\['s'\] must hold integers"):
        tab.empirical_behavior_policy(dict(data, s=data["s"].astype(float)), 3, 2)
    with pytest.raises(ValueError, match=r"dataset\['r'\] has 1 non-finite values \(first at index 0\)"):
        r = data["r"].copy()
        r[0] = np.nan
        tab.empirical_mdp(dict(data, r=r), 3, 2, gamma=0.9)


def test_constrained_value_iteration_full_support_is_q_star_and_single_action_is_its_policy():
    mdp = tab.random_mdp(6, 3, gamma=0.9, seed=0)
    full = np.ones((6, 3), dtype=bool)
    np.testing.assert_allclose(tab.constrained_value_iteration(mdp, full), tab.value_iteration(mdp), atol=1e-8)
    only_first = np.zeros((6, 3), dtype=bool)
    only_first[:, 0] = True
    pi = np.zeros((6, 3))
    pi[:, 0] = 1.0
    Q = tab.constrained_value_iteration(mdp, only_first)
    np.testing.assert_allclose(Q[:, 0], tab.evaluate_policy_exact(mdp, pi)[:, 0], atol=1e-8)
    assert np.isneginf(Q[:, 1:]).all()


def test_constrained_value_iteration_empty_state_value_and_bad_support():
    mdp = tab.random_mdp(4, 2, gamma=0.5, seed=1)
    support = np.ones((4, 2), dtype=bool)
    support[3] = False  # no action at state 3: it is worth empty_value
    Q0 = tab.constrained_value_iteration(mdp, support, empty_value=0.0)
    Q1 = tab.constrained_value_iteration(mdp, support, empty_value=1.0)
    expected_shift = mdp.gamma * mdp.P[:3, :, 3]  # first-order effect of V(3) going from 0 to 1 is at least this
    assert np.all(Q1[:3] - Q0[:3] >= expected_shift - 1e-12)
    with pytest.raises(ValueError, match="support must be a boolean array"):
        tab.constrained_value_iteration(mdp, np.ones((4, 3), dtype=bool))


# --- CQL beyond Theorems 3.1-3.2: the chi-square divergence, policy updates (3.3), gap expansion (3.4) --------------

def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_chi_square_by_hand_and_support():
    pi_beta = np.array([[0.5, 0.5, 0.0], [0.25, 0.25, 0.5]])
    mu = np.array([[1.0, 0.0, 0.0], [0.25, 0.25, 0.5]])
    # state 0: 1^2 / 0.5 - 1 = 1; state 1: mu = pi_beta, so 0
    np.testing.assert_allclose(tab.chi_square(mu, pi_beta), [1.0, 0.0], atol=1e-15)
    # it is sum (mu - pi_beta)^2 / pi_beta, i.e. E_mu[mu / pi_beta - 1] = E_mu[c^(2)]
    c = tab.cql_penalty_weights(pi_beta, mu, variant=2)
    np.testing.assert_allclose(tab.chi_square(mu, pi_beta), tab.state_values(c, mu), atol=1e-15)
    with pytest.raises(ValueError, match="supp mu inside supp pi_beta"):
        tab.chi_square(np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]), pi_beta)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [0.1, 2.0])
def test_one_cql_update_expands_the_gap_by_alpha_chi_square(seed, alpha):
    """Theorem 3.4: B Q - alpha (mu / pi_beta - 1) prefers the data's actions to mu's by exactly alpha chi^2 more."""
    rng = np.random.default_rng(seed)
    mdp = tab.random_mdp(5, 3, gamma=0.9, seed=seed, branching=3)
    pi, pi_beta, mu = (rng.dirichlet(np.ones(3), size=5) for _ in range(3))
    Q = rng.normal(size=(5, 3))
    plain = tab.bellman_operator(mdp, Q, pi)
    cql = plain - alpha * tab.cql_penalty_weights(pi_beta, mu, variant=2)
    expansion = tab.behavior_gap(cql, pi_beta, mu) - tab.behavior_gap(plain, pi_beta, mu)
    np.testing.assert_allclose(expansion, alpha * tab.chi_square(mu, pi_beta), atol=1e-12)
    assert np.all(expansion > 0)            # mu != pi_beta almost surely: a strict expansion at every state


def test_policy_change_margin_by_hand():
    pi_beta = np.array([[0.5, 0.5]])
    mu = np.array([[0.75, 0.25]])           # chi^2 = 0.75^2/0.5 + 0.25^2/0.5 - 1 = 0.25; max mu/pi_beta = 1.5
    np.testing.assert_allclose(tab.cql_policy_change_margin(mu, mu, pi_beta), [0.25])
    new = np.array([[0.65, 0.35]])          # ||new - mu||_1 = 0.2: 0.25 - 0.2 * 1.5 = -0.05
    np.testing.assert_allclose(tab.cql_policy_change_margin(mu, new, pi_beta), [-0.05])
    with pytest.raises(ValueError, match="supp pi_new inside supp pi_beta"):
        tab.cql_policy_change_margin(mu, new, np.array([[1.0, 0.0]]))


@pytest.mark.parametrize("seed", range(5))
def test_theorem_3_3_value_bound_survives_a_small_policy_update(seed):
    """Penalty built from mu = softmax(Q_k), backup and value with a new policy close to mu: where the margin is
    >= 0 at every state, E_new[Q_hat] <= V^new for every alpha; E_new[c_mu] >= 0 is what the proof uses."""
    rng = np.random.default_rng(seed)
    mdp = tab.random_mdp(6, 3, gamma=0.9, seed=seed, branching=3)
    pi_beta = rng.dirichlet(np.full(3, 2.0), size=6)
    mu = _softmax(rng.normal(size=(6, 3)))
    c_mu = tab.cql_penalty_weights(pi_beta, mu, variant=2)
    for t in (0.0, 0.01, 0.02):             # small steps away from mu
        new = (1 - t) * mu + t * rng.dirichlet(np.ones(3), size=6)
        margin = tab.cql_policy_change_margin(mu, new, pi_beta)
        if np.all(margin >= 0):
            assert np.all(tab.state_values(c_mu, new) >= -1e-12)
            V_new = tab.state_values(tab.evaluate_policy_exact(mdp, new), new)
            for alpha in (0.1, 1.0, 10.0):
                Q_hat = tab.cql_closed_form(mdp, new, pi_beta, alpha, mu=mu, variant=2)
                assert np.all(tab.state_values(Q_hat, new) <= V_new + 1e-10)
    assert np.all(tab.cql_policy_change_margin(mu, mu, pi_beta) >= 0)   # t = 0 always qualifies


def test_theorem_3_3_bound_can_fail_after_a_large_policy_update():
    """With gamma = 0 the value is V^new - alpha E_new[c_mu]: a state where the new policy puts its mass on actions
    mu under-weights (E_new[c_mu] < 0) is overestimated, for every alpha > 0."""
    mdp = tab.random_mdp(1, 2, gamma=0.0, seed=0)
    pi_beta = np.array([[0.5, 0.5]])
    mu = np.array([[0.9, 0.1]])
    new = np.array([[0.0, 1.0]])             # all mass on the action mu neglects
    assert tab.cql_policy_change_margin(mu, new, pi_beta)[0] < 0
    V_new = tab.state_values(tab.evaluate_policy_exact(mdp, new), new)
    V_hat = tab.state_values(tab.cql_closed_form(mdp, new, pi_beta, 1.0, mu=mu, variant=2), new)
    np.testing.assert_allclose(V_hat - V_new, [1.0 * (1 - 0.1 / 0.5)])   # -alpha E_new[c_mu] = -(0.2 - 1) = 0.8
    assert V_hat[0] > V_new[0]
