"""minirl: offline reinforcement learning, executed.

Reference implementations (one file per algorithm) on a small shared core:
``data`` (OfflineDataset), ``datasets`` (named datasets made locally), ``behavior`` (SAC behaviour policies),
``nets``, ``train`` (the loop, scales and CLI), ``tabular`` (finite MDPs) and ``bc``.
"""
__version__ = "0.1.0"
