import numpy as np
import torch

from minirl.behavior import SACConfig, evaluate_policy, load_actor, rollout, train_sac


def small_sac():
    return SACConfig(hidden=(32, 32), batch_size=32, start_steps=50, update_after=50)


def test_sac_checkpoint_resume_continues_where_it_stopped(tmp_path):
    kw = dict(seed=0, config=small_sac(), snapshot_every=50, eval_every=100, eval_episodes=1, checkpoint_every=100,
              progress=False)
    first = train_sac("Pendulum-v1", 100, tmp_path, **kw)
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert ck["step"] == 100 and ck["buffer"]["n"] == 100
    saved_actor = {k: v.clone() for k, v in ck["agent"]["actor"].items()}
    history = train_sac("Pendulum-v1", 200, tmp_path, **kw)  # resumes from step 100, does not start over
    assert [h["step"] for h in first] == [100] and [h["step"] for h in history] == [100, 200]
    ck2 = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert ck2["step"] == 200 and ck2["buffer"]["n"] == 200
    assert not all(torch.equal(saved_actor[k], ck2["agent"]["actor"][k]) for k in saved_actor)  # it trained on
    snaps = sorted(p.name for p in (tmp_path / "snapshots").glob("*.pt"))
    assert snaps == [f"step_{s:07d}.pt" for s in (50, 100, 150, 200)]
    actor = load_actor(tmp_path / "snapshots" / "step_0000200.pt")
    assert len(evaluate_policy(actor, "Pendulum-v1", 2, seed=0)) == 2


def test_rollout_format_and_determinism(tmp_path):
    train_sac("Pendulum-v1", 50, tmp_path, config=small_sac(), snapshot_every=50, eval_every=50, eval_episodes=1,
              progress=False)
    actor = load_actor(tmp_path / "snapshots" / "step_0000050.pt")
    a = rollout("Pendulum-v1", 450, 3, actor, progress=False)
    b = rollout("Pendulum-v1", 450, 3, actor, progress=False)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert a["observations"].shape == (450, 3) and a["actions"].dtype == np.float32
    assert a["timeouts"].sum() == 3 and a["timeouts"][[199, 399, 449]].all()  # two limits, one cut
    c = rollout("Pendulum-v1", 450, 4, actor, progress=False)
    assert not np.array_equal(a["actions"], c["actions"])  # another seed, other data
    det = rollout("Pendulum-v1", 200, 3, actor, deterministic=True, progress=False)
    with torch.no_grad():
        expected = actor.action(torch.as_tensor(det["observations"][:5])).numpy()
    assert np.allclose(det["actions"][:5], expected, atol=1e-6)
