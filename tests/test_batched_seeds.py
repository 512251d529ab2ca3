"""benchmarks/batched_seeds.py measures K seeds of IQL in one vmapped update: it must be the plain update, batched."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import batched_seeds  # noqa: E402
from speed import synthetic_dataset  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return synthetic_dataset(n=2_000, obs_dim=5, act_dim=2)


def test_batched_update_equals_the_plain_updates_seed_by_seed(data):
    assert batched_seeds.check_same_as_plain(data, k=3, steps=3, batch_size=32) < 1e-4


def test_the_check_sees_a_batched_update_that_is_not_the_plain_one(data, monkeypatch):
    # the batched agents' expectile differs from the plain agents': the check must report it
    original = batched_seeds.BatchedIQL.__init__

    def wrong(self, agents):
        original(self, agents)
        self.cfg = type(self.cfg)(**{**vars(self.cfg), "expectile": 0.9})
    monkeypatch.setattr(batched_seeds.BatchedIQL, "__init__", wrong)
    assert batched_seeds.check_same_as_plain(data, k=2, steps=2, batch_size=32) > 1e-3


def test_update_gemms_records_the_products_of_one_update(data):
    agent = batched_seeds.make_agents(data, 1)[0]
    gen = torch.Generator().manual_seed(0)
    gemms = batched_seeds.update_gemms(lambda: agent.update(data.sample(16, "cpu", gen)))
    # V (3 layers), the actor (3) and the critic ensemble (3) forward; their backward products; the target critics
    assert len(gemms) > 9 and all(op in batched_seeds._GEMMS.values() for op, _ in gemms)
    assert ([16, 5], [5, 256]) in [tuple(map(list, shapes[1:])) for op, shapes in gemms if op is torch.addmm]
