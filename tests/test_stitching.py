"""The stitching chapter's claims, checked to float precision on minirl.stitching's gridworld.

Each test states a relation the chapter proves (a closed form, an inequality, a limit) and computes both sides
independently: the left with minirl.tabular's solvers on the dataset, the right by hand.
"""

import numpy as np
import pytest

from minirl import stitching as st
from minirl import tabular as tab

G = 0.9  # gamma of the default gridworld
START, J1, J2, GOAL, DECOY, PIT = (4, 0), (4, 2), (2, 2), (0, 6), (4, 6), (2, 6)
UP, RIGHT, DOWN, LEFT = range(4)
STITCHED = [(4, 0), (4, 1), (4, 2), (3, 2), (2, 2), (1, 2), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6)]
TO_DECOY = [(4, c) for c in range(7)]

# (n_a, n_b, n_c, decoy reward): the chapter's data first; the others move p, q and r around.
CASES = [(90, 5, 5, 0.5), (60, 3, 4, 0.45), (40, 10, 2, 0.3), (95, 2, 3, 0.6), (30, 5, 1, 0.2), (60, 1, 4, 0.3)]


def setup(n_a=90, n_b=5, n_c=5, r=0.5, seed=0):
    grid = st.gridworld(decoy_reward=r, gamma=G)
    data = st.make_dataset(grid, n_a, n_b, n_c, seed=seed)
    S, A = grid.mdp.n_states, grid.mdp.n_actions
    mdp_hat, counts = tab.empirical_mdp(data, S, A, G)
    pi_hat = tab.empirical_behavior_policy(data, S, A)
    return grid, data, mdp_hat, counts > 0, pi_hat


def value_at_start(grid, pi):
    return tab.state_values(tab.evaluate_policy_exact(grid.mdp, pi), pi)[grid.start]


def path_cells(grid, pi):
    return [grid.cell(s) for s in st.greedy_path(grid.mdp, pi, grid.start)]


# --- the world and its data ------------------------------------------------------------------------------------


def test_gridworld_is_deterministic_with_three_exits():
    grid = st.gridworld(decoy_reward=0.5)
    mdp = grid.mdp
    assert np.all(mdp.P.max(axis=2) == 1.0)  # deterministic
    exits = {grid.cell(s) for s in np.flatnonzero(mdp.terminal)}
    assert exits == {GOAL, DECOY, PIT}
    # entering the goal pays 1, the decoy 0.5, anything else 0
    assert mdp.R[grid.state((1, 6)), UP] == 1.0 and mdp.R[grid.state((0, 5)), RIGHT] == 1.0
    assert mdp.R[grid.state((4, 5)), RIGHT] == 0.5 and mdp.R[grid.state((3, 6)), DOWN] == 0.5
    assert mdp.R[grid.state((2, 5)), RIGHT] == 0.0
    assert np.count_nonzero(mdp.R) == 4
    assert mdp.P[grid.state((0, 0)), UP, grid.state((0, 0))] == 1.0  # the border: stay
    assert mdp.init[grid.start] == 1.0 and grid.cell(grid.start) == START
    with pytest.raises(ValueError, match="decoy_reward"):
        st.gridworld(decoy_reward=1.5)


def test_dataset_holds_short_segments_none_from_start_to_goal():
    grid, data, _mdp_hat, support, _ = setup()
    returns = st.segment_returns(data)
    assert len(returns) == 100 and len(data["s"]) == 90 * 6 + 5 * 6 + 5 * 8
    first = {e: data["s"][np.flatnonzero(data["episode"] == e)[0]] for e in range(100)}
    from_start = [e for e, s in first.items() if s == grid.start]
    assert len(from_start) == 90
    assert all(returns[e] == 0.5 for e in from_start)  # every segment through S ends at the decoy
    assert sorted(np.unique(returns).tolist()) == [0.0, 0.5, 1.0]
    assert data["done"].sum() == 100 and not data["timeout"].any()
    # the junctions are the only states with two data actions
    assert {grid.cell(s) for s in np.flatnonzero(support.sum(axis=1) > 1)} == {J1, J2}
    # the seed only shuffles the segments
    other = st.make_dataset(grid, seed=1)
    assert not np.array_equal(other["family"], data["family"])
    np.testing.assert_array_equal(st.support_mask(other, 35, 4), support)


def test_empirical_mdp_is_exact_on_the_data_pairs():
    grid, _data, mdp_hat, support, _ = setup()
    np.testing.assert_array_equal(mdp_hat.P[support], grid.mdp.P[support])
    np.testing.assert_array_equal(mdp_hat.R[support], grid.mdp.R[support])


# --- imitation ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_a,n_b,n_c,r", CASES)
def test_bc_value_and_goal_probability_closed_forms(n_a, n_b, n_c, r):
    grid, _data, _, _, pi_hat = setup(n_a, n_b, n_c, r)
    p, q = n_c / (n_b + n_c), n_a / (n_a + n_b)
    assert value_at_start(grid, pi_hat) == pytest.approx(q * G ** 5 * r + (1 - q) * p * G ** 9, abs=1e-12)
    reach = st.reach_probability(grid.mdp, pi_hat, grid.state(GOAL))[grid.start]
    assert reach == pytest.approx((1 - q) * p, abs=1e-12)
    assert st.closed_forms(grid, n_a, n_b, n_c)["bc"] == pytest.approx(value_at_start(grid, pi_hat), abs=1e-12)


@pytest.mark.parametrize("n_a,n_b,n_c,r", CASES)
def test_ten_percent_bc_copies_the_best_segments_through_the_start_to_the_decoy(n_a, n_b, n_c, r):
    grid, data, _, _, _ = setup(n_a, n_b, n_c, r)
    top = st.top_fraction(data, 0.1)
    k = int(0.1 * (n_a + n_b + n_c))
    assert len(np.unique(top["episode"])) == k
    families = np.bincount(top["family"][np.r_[True, np.diff(top["episode"]) != 0]], minlength=3)
    assert families.tolist() == [k - n_c, 0, n_c]  # all of C, then A (return r) before B (return 0)
    pi = tab.empirical_behavior_policy(top, 35, 4)
    assert value_at_start(grid, pi) == pytest.approx(G ** 5 * r, abs=1e-12)
    assert st.reach_probability(grid.mdp, pi, grid.state(GOAL))[grid.start] == 0.0
    assert path_cells(grid, pi) == TO_DECOY


def test_top_fraction_breaks_ties_by_the_later_segment():
    data = {"episode": np.array([0, 1, 2, 3]), "r": np.array([1.0, 2.0, 2.0, 0.0]), "s": np.arange(4)}
    assert st.top_fraction(data, 0.25)["s"].tolist() == [2]
    assert st.top_fraction(data, 0.5)["s"].tolist() == [1, 2]


# --- one step of improvement -------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_a,n_b,n_c,r", CASES)
def test_one_step_improves_on_bc_and_takes_the_decoy_iff_r_exceeds_p_gamma4(n_a, n_b, n_c, r):
    grid, _data, mdp_hat, support, pi_hat = setup(n_a, n_b, n_c, r)
    p = n_c / (n_b + n_c)
    pi1, Q_beta = st.one_step_policy(mdp_hat, pi_hat, support)
    # Q^beta in closed form at the first junction
    assert Q_beta[grid.state(J1), RIGHT] == pytest.approx(G ** 3 * r, abs=1e-12)
    assert Q_beta[grid.state(J1), UP] == pytest.approx(p * G ** 7, abs=1e-12)
    # the policy improvement theorem: at least BC's value at every state with data, in the true MDP
    V1 = tab.state_values(tab.evaluate_policy_exact(grid.mdp, pi1), pi1)
    Vb = tab.state_values(tab.evaluate_policy_exact(grid.mdp, pi_hat), pi_hat)
    assert np.all(V1[support.any(1)] >= Vb[support.any(1)] - 1e-12)
    if r > p * G ** 4:
        assert value_at_start(grid, pi1) == pytest.approx(G ** 5 * r, abs=1e-12)
        assert path_cells(grid, pi1) == TO_DECOY
    else:
        assert value_at_start(grid, pi1) == pytest.approx(G ** 9, abs=1e-12)
        assert path_cells(grid, pi1) == STITCHED


def test_both_sides_of_the_one_step_condition_are_exercised():
    sides = {r > (n_c / (n_b + n_c)) * G ** 4 for n_a, n_b, n_c, r in CASES}
    assert sides == {True, False}


def test_one_step_is_iql_at_tau_one_half():
    _grid, _data, mdp_hat, support, pi_hat = setup()
    _, Q_beta = st.one_step_policy(mdp_hat, pi_hat, support)
    Q_half, _V_half = tab.expectile_value_iteration(mdp_hat, pi_hat, 0.5, support=support)
    np.testing.assert_allclose(Q_half[support], Q_beta[support], atol=1e-10)


def test_one_step_policy_validates_and_keeps_behaviour_where_there_is_no_data():
    _grid, _data, mdp_hat, support, pi_hat = setup()
    pi1, _ = st.one_step_policy(mdp_hat, pi_hat, support)
    tab.check_policy(pi1, 35, 4)
    assert np.all(pi1[support.any(1)].max(1) == 1.0)
    assert np.all(pi1[~support.any(1)] == 0.25)
    has = support.any(1)
    assert np.all(pi1[has][~support[has]] == 0.0)  # never an action outside the data where there is data


# --- dynamic programming stitches --------------------------------------------------------------------------------


@pytest.mark.parametrize("n_a,n_b,n_c,r", CASES)
def test_bcql_and_iql_at_tau_one_reach_the_batch_constrained_optimum(n_a, n_b, n_c, r):
    grid, data, mdp_hat, support, pi_hat = setup(n_a, n_b, n_c, r)
    Q_d = tab.constrained_value_iteration(mdp_hat, support)
    Q_bcql = tab.offline_q_iteration(data, 35, 4, G, constrained=True)
    Q_one, _V_one = tab.expectile_value_iteration(mdp_hat, pi_hat, 1.0, support=support)
    np.testing.assert_allclose(Q_bcql[support], Q_d[support], atol=1e-10)
    np.testing.assert_allclose(Q_one[support], Q_d[support], atol=1e-10)
    V_d = Q_d[grid.start][support[grid.start]].max()
    assert V_d == pytest.approx(G ** 9, abs=1e-12)  # r < gamma^4 in every case: the stitched path wins
    pi = st.greedy_in_support(Q_bcql, support, pi_hat)
    assert path_cells(grid, pi) == STITCHED
    assert value_at_start(grid, pi) == pytest.approx(G ** 9, abs=1e-12)
    # here the stitched path is also the true optimum (10 moves, the Manhattan distance)
    assert tab.value_iteration(grid.mdp)[grid.start].max() == pytest.approx(G ** 9, abs=1e-9)


def test_sample_based_bcql_converges_to_the_same_path():
    grid, data, mdp_hat, support, pi_hat = setup()
    Q = tab.bcql(data, 35, 4, G, sweeps=30, seed=0)
    Q_d = tab.constrained_value_iteration(mdp_hat, support)
    assert np.abs(Q[support] - Q_d[support]).max() < 1e-3
    assert path_cells(grid, st.greedy_in_support(Q, support, pi_hat)) == STITCHED


def test_pessimistic_empirical_optimum_is_the_batch_constrained_one_and_optimism_leaves_the_data():
    grid, data, mdp_hat, support, _pi_hat = setup()
    Q_d = tab.constrained_value_iteration(mdp_hat, support)
    V_d = np.where(support.any(1), np.where(support, Q_d, -np.inf).max(1), 0.0)
    np.testing.assert_allclose(tab.value_iteration(mdp_hat).max(1), V_d, atol=1e-9)
    optimistic, _ = tab.empirical_mdp(data, 35, 4, G, unseen_reward=1.0)
    pi = tab.greedy_policy(tab.value_iteration(optimistic))
    assert not support[grid.start, pi[grid.start].argmax()]  # an action the data never took
    assert value_at_start(grid, pi) == 0.0


# --- IQL between the two -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_a,n_b,n_c,r", CASES)
def test_iql_start_value_equals_its_closed_form_and_stitches_iff_tau_exceeds_tau_c(n_a, n_b, n_c, r):
    grid, _data, mdp_hat, support, pi_hat = setup(n_a, n_b, n_c, r)
    taus = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999)
    cf = st.closed_forms(grid, n_a, n_b, n_c, taus=taus)
    for tau in taus:
        pi, _Q, V = st.iql_policy(mdp_hat, pi_hat, support, tau)
        assert V[grid.start] == pytest.approx(cf["iql"][tau]["V_start"], abs=1e-10)
        assert value_at_start(grid, pi) == pytest.approx(cf["iql"][tau]["return"], abs=1e-12)
    tau_c = cf["tau_c"]
    stitches = lambda tau: path_cells(grid, st.iql_policy(mdp_hat, pi_hat, support, tau)[0]) == STITCHED
    if 0.5 < tau_c < 1.0:
        assert not stitches(tau_c - 1e-6) and stitches(tau_c + 1e-6)
        assert st.threshold(lambda t: not stitches(t), 0.5, 0.999999) == pytest.approx(tau_c, abs=1e-9)
    else:  # tau_c <= 1/2: one-step already stitches
        assert stitches(0.5)


def test_iql_value_is_monotone_in_tau_below_the_optimum_within_the_theorem_bound():
    grid, _data, mdp_hat, support, pi_hat = setup()
    Q_d = tab.constrained_value_iteration(mdp_hat, support)
    has = support.any(1)
    V_d = np.where(has, np.where(support, Q_d, -np.inf).max(1), 0.0)
    # the bound's constant: max over states of (spread of Q*_D over data actions) / (behaviour mass on the best)
    spread = np.where(has, V_d - np.where(support, Q_d, np.inf).min(1), 0.0)
    best = np.where(support & np.isclose(Q_d, V_d[:, None]), pi_hat, 0.0).sum(1)
    C = max(spread[s] / best[s] for s in np.flatnonzero(has))
    previous = None
    for tau in np.linspace(0.5, 0.999, 60):
        _, V = tab.expectile_value_iteration(mdp_hat, pi_hat, tau, support=support)
        assert np.all(V <= V_d + 1e-10)
        assert np.abs(V_d - V).max() <= (1 - tau) / (tau * (1 - G)) * C + 1e-10
        if previous is not None:
            assert np.all(V >= previous - 1e-10)
        previous = V
    assert V[grid.start] < V_d[grid.start]  # strictly below at tau < 1 (a junction on the way)


def test_iql_sweep_of_the_chapter():
    grid, _data, _mdp_hat, _support, _pi_hat = setup()
    cf = st.closed_forms(grid)
    assert cf["tau_c"] == pytest.approx(0.5 / G ** 4, abs=1e-15)  # p = 1/2: tau_c = r / gamma^4
    assert [cf["iql"][t]["return"] == G ** 9 for t in (0.5, 0.7, 0.9, 0.99)] == [False, False, True, True]


# --- tabular CQL ---------------------------------------------------------------------------------------------------


def softmax_in_support(Q, support):
    """softmax of Q over the data's actions at each state; uniform at states without data."""
    z = np.where(support, Q, -np.inf)
    z[~support.any(1)] = 0.0
    z = np.exp(z - z.max(1, keepdims=True))
    return z / z.sum(1, keepdims=True)


@pytest.mark.parametrize("alpha", [0.001, 0.0123, 0.1, 1.0, 10.0])
def test_cql_fixed_point_is_the_penalised_backup(alpha):
    _grid, _data, mdp_hat, support, pi_hat = setup()
    Q = st.cql_fixed_point(mdp_hat, pi_hat, support, alpha)
    has = support.any(1)
    V = np.where(has, np.where(support, Q, -np.inf).max(1), 0.0)
    y = mdp_hat.R + G * mdp_hat.P @ V
    mu = np.where(has[:, None], softmax_in_support(Q, support), pi_hat)
    c = tab.cql_penalty_weights(pi_hat, mu, variant=2)
    np.testing.assert_allclose(Q[support], (y - alpha * c)[support], atol=1e-9)
    assert np.all(np.isneginf(Q[~support]))


def test_cql_with_alpha_zero_is_bcql():
    _grid, _data, mdp_hat, support, pi_hat = setup()
    np.testing.assert_allclose(st.cql_fixed_point(mdp_hat, pi_hat, support, 0.0)[support],
                               tab.constrained_value_iteration(mdp_hat, support)[support], atol=1e-10)


@pytest.mark.parametrize("alpha", [0.01, 1.0])
def test_cql_update_is_a_gamma_contraction(alpha):
    _grid, _data, mdp_hat, support, pi_hat = setup()
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(50):
        Q1, Q2 = (np.where(support, rng.normal(scale=2.0, size=support.shape), -np.inf) for _ in range(2))
        T1, T2 = (st.cql_operator(mdp_hat, pi_hat, support, alpha, Q)[support] for Q in (Q1, Q2))
        worst = max(worst, np.abs(T1 - T2).max() / np.abs(Q1[support] - Q2[support]).max())
    assert worst <= G + 1e-9


def test_cql_per_state_minimiser_is_monotone_and_shift_equivariant():
    rng = np.random.default_rng(1)
    for _ in range(20):
        k = int(rng.integers(2, 5))
        pi = rng.dirichlet(np.ones(k))
        y, alpha = rng.normal(size=k), float(rng.uniform(0.01, 5.0))
        Q = st._cql_state(y, pi, alpha, y.copy())
        np.testing.assert_allclose(st._cql_state(y + 3.0, pi, alpha, y.copy()), Q + 3.0, atol=1e-10)
        jac = np.stack([(st._cql_state(y + 1e-6 * e, pi, alpha, Q.copy()) - Q) / 1e-6 for e in np.eye(k)], axis=1)
        assert jac.min() > -1e-6  # nonnegative entries
        np.testing.assert_allclose(jac.sum(1), 1.0, atol=1e-5)  # rows sum to one


def test_cql_stitches_for_small_alpha_and_copies_the_frequent_action_for_large_alpha():
    grid, _data, mdp_hat, support, pi_hat = setup()
    stitches = lambda a: path_cells(grid, st.greedy_in_support(
        st.cql_fixed_point(mdp_hat, pi_hat, support, a), support, pi_hat)) == STITCHED
    assert stitches(0.001) and stitches(0.01)
    assert not stitches(0.1) and not stitches(1.0) and not stitches(100.0)
    alpha_c = st.threshold(stitches, 0.001, 0.1)
    Q = st.cql_fixed_point(mdp_hat, pi_hat, support, alpha_c)
    j1 = grid.state(J1)
    assert Q[j1, UP] == pytest.approx(Q[j1, RIGHT], abs=1e-9)  # at alpha_c the junction's two values tie
    # and then softmax = (1/2, 1/2) in the stationarity condition: alpha_c = 2 (y_up - y_right) / (1/pi_up - 1/pi_right)
    V = np.where(support.any(1), np.where(support, Q, -np.inf).max(1), 0.0)
    y = mdp_hat.R + G * mdp_hat.P @ V
    tie = 2 * (y[j1, UP] - y[j1, RIGHT]) / (1 / pi_hat[j1, UP] - 1 / pi_hat[j1, RIGHT])
    assert tie == pytest.approx(alpha_c, abs=1e-8)
    assert alpha_c == pytest.approx(0.012366, abs=1e-6)
    # large alpha: softmax of Q approaches pi_hat_beta at the junctions (KL -> 0)
    kls = []
    for a in (1.0, 10.0, 100.0):
        sigma = softmax_in_support(st.cql_fixed_point(mdp_hat, pi_hat, support, a), support)
        kls.append(max(np.sum(pi_hat[s][support[s]] * np.log(pi_hat[s][support[s]] / sigma[s][support[s]]))
                       for s in (j1, grid.state(J2))))
    assert kls[0] > kls[1] > kls[2] and kls[2] < 1e-4


# --- the table ----------------------------------------------------------------------------------------------------


def test_compare_methods_matches_the_closed_forms():
    grid, data, *_ = setup()
    cf = st.closed_forms(grid)
    res = st.compare_methods(grid, data)
    assert res["BC"]["return"] == pytest.approx(cf["bc"], abs=1e-12)
    assert res["BC"]["reach_goal"] == pytest.approx(1 / 38, abs=1e-12)
    assert res["10%BC"]["return"] == pytest.approx(cf["10%bc"], abs=1e-12)
    assert res["one-step"]["return"] == pytest.approx(cf["one_step"], abs=1e-12)
    assert res["one-step"]["estimate"] == pytest.approx(cf["bc"], abs=1e-12)  # Q^beta(S, .) is BC's value
    for name in ("BCQL", "empirical MDP optimum, unseen pairs pay 0", "optimum (true MDP)"):
        assert res[name]["return"] == pytest.approx(G ** 9, abs=1e-12)
        assert res[name]["estimate"] == pytest.approx(G ** 9, abs=1e-9)
    assert res["empirical MDP optimum, unseen pairs pay 1"]["return"] == 0.0
    for tau in (0.5, 0.7, 0.9, 0.99):
        assert res[f"IQL tau={tau:g}"]["estimate"] == pytest.approx(cf["iql"][tau]["V_start"], abs=1e-10)
        assert res[f"IQL tau={tau:g}"]["return"] == pytest.approx(cf["iql"][tau]["return"], abs=1e-12)
    assert [res[f"CQL alpha={a:g}"]["reach_goal"] for a in (0.001, 0.01, 0.1, 1.0)] == [1.0, 1.0, 0.0, 0.0]
    assert all(v["reach_goal"] in (0.0, 1.0) for k, v in res.items() if k != "BC")
