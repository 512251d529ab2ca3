"""pytest configuration shared by the unit tests and nbval.

Notebook kernels inherit this process's environment, so setting MINIRL_SCALE here makes `pytest` run every
notebook at the `smoke` scale (seconds) unless the caller chose another scale explicitly.
"""
import os

os.environ.setdefault("MINIRL_SCALE", "smoke")
