"""pytest configuration shared by the unit tests and nbval.

Notebook kernels inherit this process's environment, so setting MINIRL_SCALE here makes `pytest` run every
notebook at the `smoke` scale (seconds) unless the caller chose another scale explicitly.
"""
import os

os.environ.setdefault("MINIRL_SCALE", "smoke")
# Tests and notebook cells run small batches, where extra torch threads only add synchronisation; one thread per
# process also lets `pytest -n 2` use both cores of a 2-core machine without oversubscription.
os.environ.setdefault("OMP_NUM_THREADS", "1")
