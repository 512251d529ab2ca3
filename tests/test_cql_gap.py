"""experiments/cql_gap.py: the gap's floor is CQL's own penalty at a flat Q, and the multiplier's climb is read right."""
import json
import math

import pytest
import torch

import cql_gap

from minirl.cql import cql_penalty


def test_the_floor_is_the_penalty_of_a_q_flat_in_the_action():
    g = torch.Generator().manual_seed(0)
    log_density = torch.cat([torch.full((5, 4), math.log(0.25)), torch.randn(5, 8, generator=g)], -1)
    q_data = torch.randn(5, generator=g) * 100
    flat = q_data.unsqueeze(-1).expand(5, 12)
    assert torch.allclose(cql_penalty(q_data, flat, log_density), cql_gap.flat_floor(log_density), atol=1e-5)
    # four uniform actions on a 2-D box alone: log(4 x 4) = 2.77
    assert cql_gap.flat_floor(torch.full((4,), math.log(0.25))).item() == pytest.approx(math.log(16))


def test_the_climb_reads_log_alpha_prime_per_step_until_the_clamp(tmp_path):
    lr = 3e-4
    rows = [{"kind": "train", "step": s, "alpha_prime": min(math.exp(lr * s), 1e6), "cql_gap": 1.0}
            for s in range(1000, 60001, 1000)]
    rows.insert(3, {"kind": "eval", "step": 3000, "success_rate": 0.0})
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(map(json.dumps, rows)) + "\n")
    c = cql_gap.climb(log, lr)
    assert c["log_alpha_prime_per_step"] == pytest.approx(lr)
    assert c["first_step_at_clamp"] == 47000                      # ln(1e6) / 3e-4 = 46,052
    assert c["steps_to_clamp_at_lr"] == pytest.approx(46051.7, abs=0.1)
