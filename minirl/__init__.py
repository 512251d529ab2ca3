"""minirl: offline reinforcement learning, executed.

Reference implementations (one file per algorithm) on a small shared core:
``data`` (OfflineDataset), ``datasets`` (named datasets made locally), ``behavior`` (SAC behaviour policies),
``nets``, ``train`` (the loop), ``runs`` (scales, algorithms by name, runs), ``evaluation`` (episodes, the value
check), ``devices`` (device, threads, precision), ``cli`` (the command line), ``config`` (typed settings), ``tabular``
(finite MDPs), the algorithms (``bc``, ``bcq``, ``cql``, ``iql``) and ``classroom`` (exercise checkers and grader).

``minirl.load_agent(run_dir)`` rebuilds a trained agent from a run directory (see :func:`minirl.runs.load_agent`).
"""
__version__ = "0.1.0"


def versions() -> dict:
    """The versions of what minirl's numbers depend on (recorded in checkpoints, agents and dataset cache keys)."""
    import platform
    from importlib import metadata

    found = {"minirl": __version__, "python": platform.python_version()}
    for package in ("torch", "numpy", "gymnasium", "mujoco"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def __getattr__(name):
    if name == "load_agent":  # imported on first use: `import minirl.tabular` need not load torch and gymnasium
        from .runs import load_agent
        return load_agent
    raise AttributeError(f"module 'minirl' has no attribute {name!r}")
