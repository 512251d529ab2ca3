"""pytest configuration shared by the unit tests and nbval.

Notebook kernels inherit this process's environment, so setting MINIRL_SCALE here makes `pytest` run every
notebook at the `smoke` scale (seconds) unless the caller chose another scale explicitly.
"""
import os

os.environ.setdefault("MINIRL_SCALE", "smoke")
# Tests and notebook cells run small batches, where extra torch threads only add synchronisation; one thread per
# process also lets `pytest -n 2` use both cores of a 2-core machine without oversubscription.
os.environ.setdefault("OMP_NUM_THREADS", "1")


import pytest  # noqa: E402


@pytest.fixture
def cli(capsys):
    """``cli(*args)`` runs ``python -m minirl ARGS`` in this process: ``(exit status, stdout, stderr)`` (the command
    line's tests: tests/test_cli.py, test_run_folder.py, test_own_data.py)."""
    from minirl.cli import main

    def run(*args):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return code, out, err
    return run


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def cached(monkeypatch, data_dir):
    """A dataset cache shared by a test module's training runs (test_cli.py, test_config_file.py), so that each
    module makes its data once."""
    monkeypatch.setenv("MINIRL_DATA", str(data_dir))
