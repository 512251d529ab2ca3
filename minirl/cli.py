"""The command line: ``python -m minirl train | evaluate | dataset`` (or the ``minirl`` console script).

Every command checks its arguments before any work and ends a user's mistake with one line and exit status 2
(:func:`user_errors`); the work itself is :func:`minirl.runs.run`, :func:`minirl.runs.load_agent` and
:mod:`minirl.datasets`.
"""
from __future__ import annotations
import contextlib
import json
import os
import sys

from .config import UserError, at_least, did_you_mean, field_docs, field_types, read_settings_file
from .devices import COMPILE_MODES, PRECISIONS, check_device
from .evaluation import check_video, record_video
from .runs import ALGORITHMS, check_algo, check_dataset, config_class, load_agent, make_config, parse_overrides, run
def _parser_class():
    """argparse's parser, but a usage mistake raises :class:`UserError` (one line, exit status 2) instead of
    printing the usage block."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("allow_abbrev", False)  # --step is not --steps: an option is spelled out or unknown
            super().__init__(*args, **kwargs)

        def error(self, message):
            raise UserError(f"{message} (see {self.prog} --help)")
    return Parser


def _train_epilog() -> str:
    """``train --help``'s list of datasets and of every algorithm's config fields with their comments."""
    from . import datasets
    try:
        names = ", ".join(datasets.dataset_names())
    except (OSError, ValueError) as e:
        names = f"(none: {e})"
    lines = [f"datasets: {names}",
             "  or minari:<id>, a Minari dataset stored locally (pip install 'minari>=0.5.4,<0.6'), e.g. "
             "minari:mujoco/hopper/medium-v0", "",
             "config fields (--set NAME=VALUE, quoted in zsh: --set 'hidden=[128,128]'; or NAME = VALUE lines in a "
             "--config TOML file):"]
    seen = {}
    for algo, entry in ALGORITHMS.items():
        cls = entry.config
        config_name = cls.__name__
        if config_name in seen:
            preset_text = ", ".join(f"{k}={v}" for k, v in entry.preset.items())
            lines.append(f"\n  {algo}: {seen[config_name]}'s fields with {preset_text}")
            continue
        seen[config_name] = algo
        lines.append(f"\n  {algo} ({config_name}):")
        for name, type_name, default, comment in field_docs(cls):
            default = list(default) if isinstance(default, tuple) else default
            lines.append(f"    {name:22s} {type_name:24s} {str(default):16s} {comment}")
    return "\n".join(lines)


def build_parser(prog: str = "minirl"):
    import argparse
    Parser = _parser_class()
    p = Parser(prog=prog, description="minirl: offline RL, executed.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    t = sub.add_parser("train", help="train an agent on a named dataset", epilog=_train_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--algo", required=True, help=f"one of {', '.join(ALGORITHMS)}".replace("%", "%%"))  # argparse formats help with %
    t.add_argument("--dataset", required=True, help="e.g. pendulum-medium, hopper-medium-replay (listed below), or a "
                   "file of your own: PATH.npz (the six D4RL arrays) or a D4RL PATH.hdf5, with --env")
    t.add_argument("--env", default=None, metavar="ENV_ID",
                   help="with --dataset PATH: the gymnasium environment to evaluate in (e.g. Pendulum-v1); its action "
                        "bounds are the data's when the file stores none; returns stay raw (no normalised score)")
    t.add_argument("--raw-returns", action="store_true",
                   help="train and evaluate with raw returns, no normalised score (for a Minari dataset without "
                        "ref_min_score / ref_max_score)")
    t.add_argument("--scale", default=None, help="smoke | cpu | full (default: $MINIRL_SCALE or cpu)")
    t.add_argument("--steps", type=int, default=None, help="gradient steps (default: the scale's)")
    t.add_argument("--seed", type=int, default=None, help="(default 0)")
    t.add_argument("--seeds", type=int, nargs="+", default=None, metavar="SEED",
                   help="several seeds trained together as one batch (BC, BCQ, CQL, IQL): each into <out>/s<seed> "
                        "(default: runs/<algo>-<dataset>-s<seed>), as its own run would be")
    t.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")
    t.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: one run per core; several runs side by side need no more)")
    t.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="auto (default, or $MINIRL_PRECISION when set): bf16 where the hardware computes it natively (AVX-512 BF16 / AMX CPUs, "
                        "Ampere+ GPUs), float32 elsewhere; bf16: updates under bfloat16 autocast; float32")
    t.add_argument("--amp", action="store_true", help="the same as --precision bf16")
    t.add_argument("--out", default=None, help="run directory (default: runs/<algo>-<dataset>-s<seed>)")
    t.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    t.add_argument("--batch-size", type=int, default=None, help="(default: the scale's, 256)")
    t.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: the scale's)")
    t.add_argument("--eval-episodes", type=int, default=None, help="episodes per evaluation (default: the scale's)")
    t.add_argument("--no-eval", action="store_true", help="no evaluation at all")
    t.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints (default: none; "
                   "Ctrl-C saves one anyway)")
    t.add_argument("--log-every", type=int, default=None, metavar="N",
                   help="steps between two training entries of log.jsonl, each the mean of its steps' losses "
                        "(default 1000)")
    t.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint.pt (same settings)")
    t.add_argument("--override", nargs="+", default=[], metavar="NAME",
                   help="with --resume: settings the resumed run may change (config fields, or dataset, "
                        "transitions, seed, batch_size, precision)")
    t.add_argument("--compile", nargs="?", const=True, default=False, choices=[True, *COMPILE_MODES],
                   metavar="MODE", help="torch.compile the networks (for GPUs; falls back to eager where a graph "
                   "fails); MODE reduce-overhead also records CUDA graphs, max-autotune tunes matmuls")
    t.add_argument("--capture", action=argparse.BooleanOptionalAction, default=None,
                   help="record each training step as a CUDA graph and replay it (--device cuda; the same updates, "
                   "4-9x faster on an H100); by default on at --scale full on a CUDA device where the update allows "
                   "it, off elsewhere; --no-capture for eager updates")
    t.add_argument("--tensorboard", action="store_true",
                   help="also write the logs as TensorBoard event files in --out (pip install -e '.[tensorboard]')")
    t.add_argument("--lagrange", action="store_true", help="CQL only: learn alpha' (same as --algo cql-lagrange)")
    t.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="config fields, parsed by their type (listed below); may be repeated; over --config's")
    t.add_argument("--config", default=None, metavar="FILE",
                   help="a TOML file of config fields, one 'NAME = VALUE' a line (hidden = [256, 256], "
                        "normalize_states = false, reward_scale = \"none\"); --set overrides it")
    e = sub.add_parser("evaluate", help="evaluate a trained run (and film one episode)")
    e.add_argument("run_dir", help="a run directory written by train (config.json + agent.pt)")
    e.add_argument("--episodes", type=int, default=10)
    e.add_argument("--seed", type=int, default=0, help="episodes reset with seeds seed, seed + 1, ...")
    e.add_argument("--device", default="cpu")
    e.add_argument("--video", default=None, metavar="FILE", help="film one episode into FILE.gif (or .mp4, which "
                   "needs imageio-ffmpeg)")
    d = sub.add_parser("dataset", help="make, list or describe the named datasets")
    d.add_argument("action", choices=["make", "list", "info"])
    d.add_argument("names", nargs="*", help="dataset names (make/info); 'all' for every dataset")
    d.add_argument("--size", type=int, default=None, help="transitions (default: the full dataset)")
    return p, {"train": t, "evaluate": e, "dataset": d}


def main(argv: list[str] | None = None, prog: str = "minirl") -> int:
    """The command line (see :func:`user_errors` for how it ends)."""
    with user_errors(prog), one_line_warnings(prog):
        code = _main(argv, prog)
        sys.stdout.flush()  # here, where a closed pipe is caught, rather than at exit
        return code


@contextlib.contextmanager
def one_line_warnings(prog: str):
    """Inside the block a warning (a dataset that differs from its record, emulated bfloat16, degenerate episode
    flags) prints as one line, ``<prog>: warning: ...``, on stderr, once, without Python's file and line."""
    import warnings

    shown = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = f"{prog}: warning: {' '.join(str(message).split())}"
        if text not in shown:  # once, though the run's checks and its training both meet it
            shown.add(text)
            print(text, file=sys.stderr)
    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def user_errors(prog: str):
    """How a command ends: a :class:`UserError` prints one line and exits with status 2; Ctrl-C prints one line
    (training saved a checkpoint) and exits with status 130; a closed pipe (``minirl dataset list | head``) ends
    quietly with status 1. Anything else is a bug and keeps its traceback."""
    try:
        yield
    except UserError as e:
        print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt as e:
        print(f"{prog}: {e or 'interrupted'}", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:  # the reader stopped reading: not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that Python's exit does not fail flushing stdout again
        raise SystemExit(1) from None


def _main(argv, prog) -> int:
    parser, commands = build_parser(prog)
    a, unknown = parser.parse_known_args(argv)
    if unknown:
        options = [o for action in commands[a.command]._actions for o in action.option_strings]
        first = next((u for u in unknown if u.startswith("-")), unknown[0])
        raise UserError(f"unrecognized arguments: {' '.join(unknown)}{did_you_mean(first.split('=')[0], options)} "
                        f"(see {prog} {a.command} --help)")
    if a.command == "dataset":
        return _dataset_command(a)
    if a.command == "evaluate":
        return _evaluate_command(a)
    check_algo(a.algo)
    overrides = parse_overrides(a.algo, a.set)
    if a.config is not None:  # the file's fields, then --set over them
        overrides = _config_file(a.algo, a.config) | overrides
    if a.lagrange:
        if "lagrange" not in field_types(config_class(a.algo)):  # the CQL algorithms' field
            raise UserError(f"--lagrange is for the CQL algorithms (--algo cql), not {a.algo}")
        overrides.setdefault("lagrange", True)
    seed, out = 0 if a.seed is None else a.seed, a.out
    if a.seeds is not None:
        if a.seed is not None:
            raise UserError("--seed and --seeds: give one seed with --seed or a batch of seeds with --seeds")
        for s in a.seeds:
            at_least("--seeds", s, 0)
        seed = a.seeds
        out = None if a.out is None else [os.path.join(a.out, f"s{s}") for s in a.seeds]
    run(a.algo, a.dataset, env=a.env, raw_returns=a.raw_returns, scale=a.scale, steps=a.steps, seed=seed, device=a.device, out=out,
        overrides=overrides, batch_size=a.batch_size, eval_every=a.eval_every, eval_episodes=a.eval_episodes,
        evaluate=not a.no_eval, checkpoint_every=a.checkpoint_every, log_every=a.log_every, resume=a.resume,
        overwrite=a.overwrite,
        override=a.override, compile=a.compile, precision=a.precision, amp=a.amp, threads=a.threads,
        tensorboard=a.tensorboard, capture=a.capture)
    return 0


def _config_file(algo: str, path: str) -> dict:
    """``train --config FILE``: the file's config fields for ``algo``, each checked by its declared type and all of
    them by the config's rules (a mistake names the file)."""
    values = read_settings_file(config_class(algo), path)
    try:
        make_config(algo, values)
    except UserError as e:
        raise UserError(f"--config {path}: {e}") from None
    return values


def _dataset_command(a) -> int:
    from . import datasets
    names = datasets.dataset_names()
    wanted = names if a.names == ["all"] else a.names
    if a.action != "list" and not wanted:
        raise UserError(f"dataset {a.action} needs at least one dataset name (see `minirl dataset list`)")
    for name in wanted:
        check_dataset(name)
        if a.size is not None and not 1 <= a.size <= datasets.full_size(name):
            raise UserError(f"--size must be between 1 and {datasets.full_size(name)} for {name}, got {a.size}")
    if a.action == "list":
        for name in names:
            if a.size is not None and a.size > datasets.full_size(name):
                continue
            cached = datasets.cache_path(name, a.size).exists()
            print(f"{name:42s} {datasets.full_size(name):>9d} transitions  {'cached' if cached else ''}")
        return 0
    for name in wanted:
        if a.action == "make":
            datasets.load_dataset(name, a.size)
            print(f"{name}: {datasets.cache_path(name, a.size)}")
        else:
            print(json.dumps(datasets.dataset_info(name, a.size)))
    return 0


def _evaluate_command(a) -> int:
    at_least("--episodes", a.episodes, 1)
    at_least("--seed", a.seed, 0)
    check_device(a.device)
    video = check_video(a.video) if a.video else None
    loaded = load_agent(a.run_dir, a.device)
    if video is not None:  # first, so that a machine that cannot render says so before the evaluation
        n = record_video(loaded, video, seed=a.seed)
        print(f"video: {video} ({n} frames, the episode of seed {a.seed})")
    result = loaded.evaluate(a.episodes, a.seed)
    r, s = result["returns"], result["scores"]
    score = "" if s is None else f", normalised score {s.mean():.1f}"
    print(f"{a.run_dir}: {loaded.settings['algo']} on {loaded.settings['dataset']}, step {loaded.step}: return "
          f"{r.mean():.1f} +- {r.std():.1f}{score} over {a.episodes} episode(s) "
          f"(seeds {a.seed}-{a.seed + a.episodes - 1})")
    return 0
