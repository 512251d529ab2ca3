"""benchmarks/batched_seeds.py times K seeds stacked in one update (minirl.seeds): its check must be the plain update's."""

import pytest
import torch

import batched_seeds
from speed import synthetic_dataset


@pytest.fixture(scope="module")
def data():
    return synthetic_dataset(n=2_000, obs_dim=5, act_dim=2)


@pytest.mark.parametrize("algo", ["iql", "bc", "cql", "bcq"])
def test_batched_update_equals_the_plain_updates_seed_by_seed(data, algo):
    assert batched_seeds.check_same_as_plain(data, k=3, steps=3, batch_size=32, algo=algo) < 1e-4


def test_the_check_sees_a_batched_update_that_is_not_the_plain_one(data, monkeypatch):
    # the stacked agent's expectile differs from the plain agents': the check must report it
    original = batched_seeds.seeds.stack

    def wrong(agents):
        stacked = original(agents)
        stacked.cfg = type(stacked.cfg)(**{**vars(stacked.cfg), "expectile": 0.9})
        return stacked
    monkeypatch.setattr(batched_seeds.seeds, "stack", wrong)
    assert batched_seeds.check_same_as_plain(data, k=2, steps=2, batch_size=32) > 1e-3


def test_update_gemms_records_the_products_of_one_update(data):
    agent = batched_seeds.make_agents(data, 1)[0]
    gen = torch.Generator().manual_seed(0)
    gemms = batched_seeds.update_gemms(lambda: agent.update(data.sample(16, "cpu", gen)))
    # V (3 layers), the actor (3) and the critic ensemble (3) forward; their backward products; the target critics
    assert len(gemms) > 9 and all(op in batched_seeds._GEMMS.values() for op, _ in gemms)
    assert ([16, 5], [5, 256]) in [tuple(map(list, shapes[1:])) for op, shapes in gemms if op is torch.addmm]
