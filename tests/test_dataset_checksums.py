"""Datasets that are the same everywhere: a stale cache is never read, and a dataset made again either reproduces the
recorded checksum bit for bit or says that it differs and by how much."""
import json
import warnings

import numpy as np
import pytest

from minirl import datasets
from minirl.data import FIELDS, OfflineDataset
from minirl.datasets import DatasetDriftWarning, cache_path, checksum, load_dataset, make_dataset


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "cache"))
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    return tmp_path / "cache"


@pytest.fixture
def reference(tmp_path, monkeypatch):
    """A checksums table of the test's own, in place of minirl/assets/checksums.json."""
    path = tmp_path / "checksums.json"
    monkeypatch.setattr(datasets, "CHECKSUMS", path)
    datasets._reference_checksums.cache_clear()
    yield path
    datasets._reference_checksums.cache_clear()


def test_a_minari_dataset_made_again_under_the_same_id_is_not_read_from_the_old_cache():
    """Issue 73.1: the same id re-made with every reward 1.0 kept its cache key (id, environment, scores, sizes)."""
    minari = pytest.importorskip("minari")
    from minirl.minari_io import to_minari
    ds = make_dataset("pendulum-random", 400, progress=False)
    refs = {"ref_min_score": -1200.0, "ref_max_score": -150.0}
    to_minari(ds, "byo/pendulum/random-v0", "Pendulum-v1", **refs)
    name = "minari:byo/pendulum/random-v0"
    first = load_dataset(name, progress=False)
    assert np.array_equal(first.rewards, ds.rewards) and cache_path(name).exists()
    minari.delete_dataset("byo/pendulum/random-v0")
    to_minari(OfflineDataset(**{**ds.as_dict(), "rewards": np.ones(len(ds), np.float32)}),
              "byo/pendulum/random-v0", "Pendulum-v1", **refs)
    again = load_dataset(name, progress=False)
    assert np.all(again.rewards == 1.0)


def test_the_cache_keeps_the_checksum_of_its_arrays(data_dir):
    ds = load_dataset("pendulum-random", 300, progress=False)
    record = json.loads(cache_path("pendulum-random", 300).with_suffix(".json").read_text())
    assert record["sha256"] == ds.fingerprint() and record["transitions"] == 300
    assert record["episodes"] == len(ds.episode_bounds()) and "made_on" in record


def test_a_dataset_made_as_recorded_is_silent(reference):
    ds = make_dataset("pendulum-random", 300, progress=False)
    reference.write_text(json.dumps({"pendulum-random|n300": checksum(ds)}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(load_dataset("pendulum-random", 300, progress=False).rewards, ds.rewards)
    assert datasets.check_against_reference("pendulum-random", checksum(ds)) == "same"


def test_a_dataset_that_differs_from_the_record_warns_with_its_name_and_the_largest_difference(reference):
    """Issue 69.5: made on another machine, a dataset either reproduces the recorded one bit for bit or says that it
    differs and by how much, never silently."""
    ds = make_dataset("pendulum-random", 300, progress=False)
    rewards = ds.rewards.copy()
    rewards[7] += 0.5  # as if this machine's rollout had drifted at one step
    other = OfflineDataset(**{**ds.as_dict(), "rewards": rewards})
    reference.write_text(json.dumps({"pendulum-random|n300": {**checksum(other), "made_on": "the reference CPU"}}))
    with pytest.warns(DatasetDriftWarning) as caught:
        load_dataset("pendulum-random", 300, progress=False)
    [w] = caught
    message = str(w.message)
    assert "\n" not in message
    assert message.startswith("dataset pendulum-random (300 transitions) as made here differs")
    assert "the reference CPU" in message and "mean episode return" in message
    assert f"largest difference: rewards absmax[0]" in message or "largest difference: rewards mean[0]" in message
    # read from the cache again, it still says so
    with pytest.warns(DatasetDriftWarning, match="pendulum-random"):
        load_dataset("pendulum-random", 300, progress=False)


def test_checksum_difference_names_the_largest_statistic():
    ds = make_dataset("pendulum-random", 300, progress=False)
    obs = ds.observations.copy()
    obs[:, 2] += 0.25
    diff = datasets.checksum_difference(checksum(ds._replace(observations=obs)), checksum(ds))
    assert "largest difference: observations" in diff and "[2]" in diff and "by 0.25" in diff
    assert datasets.checksum_difference(checksum(ds), checksum(ds)) is None


@pytest.mark.parametrize("key", ["pendulum-random|n5000", "hopper-medium-replay|n5000"])
def test_the_recorded_checksums_reproduce_here(key):
    """Two datasets whose recipe is the same on every CPU (numpy's random actions in Pendulum's numpy dynamics; a
    shipped buffer): made here, they are the recorded ones bit for bit."""
    ref = json.loads(datasets.CHECKSUMS.read_text())[key]
    name, n = key.split("|n")
    ds = make_dataset(name, int(n), progress=False)
    assert datasets.checksum_difference(checksum(ds), ref) is None


def test_every_named_dataset_has_a_recorded_checksum_at_the_smoke_size():
    table = json.loads(datasets.CHECKSUMS.read_text())
    names = [n for n in datasets.dataset_names() if not datasets.maze.is_maze_name(n)]
    missing = [n for n in names if f"{n}|n5000" not in table]
    assert not missing, missing
    for record in table.values():
        assert set(record) >= {"sha256", "transitions", "episodes", "return_mean", "fields", "made_on"}
        assert set(record["fields"]) == set(FIELDS)


def test_dataset_info_says_whether_the_dataset_is_the_recorded_one():
    from minirl.datasets import dataset_info
    info = dataset_info("pendulum-random", 5000, progress=False)
    assert info["recorded_checksum"] == "same" and len(info["sha256"]) == 64
    assert dataset_info("pendulum-random", 300, progress=False)["recorded_checksum"] is None  # none recorded
