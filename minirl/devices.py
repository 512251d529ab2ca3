"""Where and how the updates run: the device (a CUDA GPU, Apple's MPS or the CPU), torch's threads, the precision
(float32, or bfloat16 autocast) and ``torch.compile``.

The notebooks train on :func:`default_device` with :func:`default_threads` threads; ``python -m minirl train`` checks
``--device`` with :func:`check_device` and ``--precision`` with :func:`resolve_precision`. :func:`update_context` is
the context :func:`minirl.train.train` runs every update in.
"""
from __future__ import annotations
import contextlib
import os

import torch

from . import nets
from .agent import check_agent, declared
from .config import UserError, at_least, did_you_mean
# --------------------------------------------------------------------------------------------------------------
# Devices and threads
# --------------------------------------------------------------------------------------------------------------

def check_device(device: str) -> str:
    """``device`` if torch can run on it here; a :class:`UserError` saying why not otherwise."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        near = " (did you mean 'cuda'?)" if device.lower().startswith("gpu") else did_you_mean(device, ["cpu", "cuda"])
        raise UserError(f"--device {device!r} is not a device: use cpu, cuda (an NVIDIA GPU), cuda:N or mps{near}")\
            from None
    if dev.type == "cuda":
        if torch.version.cuda is None:
            raise UserError(f"--device {device}: this torch ({torch.__version__}) is built without CUDA; "
                            "use --device cpu or install a CUDA build of torch")
        count = torch.cuda.device_count()
        if count == 0 or (dev.index or 0) >= count:
            raise UserError(f"--device {device}: {count} CUDA GPU(s) visible"
                            + (f" (cuda:0 to cuda:{count - 1})" if count else "; use --device cpu"))
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise UserError(f"--device {device}: Apple's MPS is not available on this machine; use --device cpu")
    elif dev.type != "cpu":
        raise UserError(f"--device {device!r}: minirl runs on cpu, cuda or mps")
    return device


def device_works(device: str) -> bool:
    """Whether one update of a small actor-critic (the layers every algorithm uses) runs on ``device`` and gives
    finite numbers: the check behind :func:`default_device` for Apple's MPS, whose coverage of torch's operators
    varies between torch versions."""
    try:
        gen = torch.Generator().manual_seed(0)
        obs, act = torch.randn(8, 3, generator=gen).to(device), torch.rand(8, 2, generator=gen).to(device) * 2 - 1
        critic = nets.CriticEnsemble(3, 2, (16, 16), 2).to(device)
        actor = nets.TanhGaussianActor(3, 2, (16, 16)).to(device)
        a, logp = actor.sample(obs)
        loss = critic(obs, act).pow(2).mean() + (logp - critic(obs, a).min(0).values).mean()
        loss.backward()
        return bool(torch.isfinite(loss).item())
    except Exception:  # an operator the backend lacks, a driver error: the device does not work for minirl
        return False


def default_device() -> str:
    """The device the notebooks train on: ``$MINIRL_DEVICE`` when set (checked), else the first CUDA GPU, else Apple's
    MPS when :func:`device_works` on it, else the CPU."""
    if os.environ.get("MINIRL_DEVICE"):
        return check_device(os.environ["MINIRL_DEVICE"])
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available() and device_works("mps"):
        return "mps"
    return "cpu"


THREAD_VARIABLES = ("MINIRL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")  # the first one set wins


def default_threads() -> int:
    """The torch threads the notebooks use: ``$MINIRL_THREADS`` when set, else the standard ``$OMP_NUM_THREADS`` (then
    ``$MKL_NUM_THREADS``), else every core this process may run on.

    One process alone on a machine gains from a second thread (CQL 10.1 vs 5.3 updates/s on this project's 2 cores,
    benchmarks/README.md); processes that share the cores should take one thread each (``MINIRL_THREADS=1``):
    a second thread on a busy core made a BC run 57x slower."""
    for variable in THREAD_VARIABLES:
        text = os.environ.get(variable, "").strip()
        if text:
            try:
                return at_least(variable, int(text), 1)
            except ValueError:
                raise UserError(f"{variable} must be a whole number of threads >= 1, got {text!r}") from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# --------------------------------------------------------------------------------------------------------------
# Precision
# --------------------------------------------------------------------------------------------------------------

PRECISIONS = ("auto", "float32", "bf16")


def native_bf16(device: str, cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether ``device`` computes bfloat16 matmuls natively: a CUDA GPU with bfloat16 (Ampere or later), or a CPU
    with AVX-512 BF16 or AMX-BF16 (the flags in ``cpuinfo``, else torch's own CPU checks)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if dev.type != "cpu":
        return False
    try:
        with open(cpuinfo) as f:
            flags = {w for line in f if line.startswith("flags") for w in line.split()}
        return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


class EmulatedBF16Warning(UserWarning):
    """bfloat16 asked for on a CPU that has no bfloat16 arithmetic: it runs, emulated and slowly."""


PRECISION_VARIABLE = "MINIRL_PRECISION"  # what a run that names no precision asks for (the notebooks' runs)


def requested_precision(precision: str | None, amp: bool) -> str:
    """What was asked for: ``amp=True`` (``--amp``, the older flag) is ``"bf16"``; nothing at all is
    ``$MINIRL_PRECISION`` when set (e.g. ``float32`` on a bfloat16 machine, to train as a laptop without it does),
    else ``"auto"``: bfloat16 where the hardware computes it natively, float32 elsewhere (:func:`resolve_precision`)."""
    if amp and precision not in (None, "bf16"):
        raise UserError(f"--amp is --precision bf16: it contradicts --precision {precision}")
    if amp:
        return "bf16"
    if precision is None and os.environ.get(PRECISION_VARIABLE):
        value = os.environ[PRECISION_VARIABLE]
        if value not in PRECISIONS:
            raise UserError(f"${PRECISION_VARIABLE} must be one of {', '.join(PRECISIONS)}, got {value!r}"
                            f"{did_you_mean(value, PRECISIONS)}")
        return value
    return precision or "auto"


def default_precision(device: str) -> str:
    """``"float32"`` or ``"bf16"``: the precision of a run on ``device`` that names none (what the notebooks print)."""
    return resolve_precision(requested_precision(None, False), device)


def resolve_precision(precision: str, device: str) -> str:
    """``"float32"`` or ``"bf16"``: what ``precision`` (``auto``, ``float32``, ``bf16``) means on ``device``.

    ``auto`` is bf16 only where the hardware computes it natively (:func:`native_bf16`), float32 elsewhere.
    ``bf16`` on a GPU without bfloat16 is an error; on a CPU without native bfloat16 it runs, emulated and slowly.
    """
    if precision not in PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}"
                        f"{did_you_mean(precision, PRECISIONS)}")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "float32"
    if precision == "bf16" and torch.device(device).type == "cpu" and not native_bf16(device):
        import warnings
        warnings.warn(EmulatedBF16Warning(
            "--precision bf16 on a CPU without native bfloat16 (no AVX-512 BF16 or AMX): it is emulated, at about a "
            "twentieth of float32's rate on an AVX2 CPU; --precision auto or float32 is faster here"))
    if precision == "bf16" and torch.device(device).type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError(f"--precision bf16 needs bfloat16 support, which {torch.cuda.get_device_name(device)} "
                        "lacks; use --precision float32 (or auto)")
    return precision


def update_context(device: str, precision: str | None = None, amp: bool = False):
    """The context :func:`train` runs every update in: :func:`autocast` with bfloat16 when ``precision`` (or
    ``amp=True``) resolves to bf16 on ``device`` (:func:`requested_precision`, :func:`resolve_precision`)."""
    return autocast(device, resolve_precision(requested_precision(precision, amp), device) == "bf16")


def autocast(device: str, amp: bool):
    """The context an update runs in: bfloat16 autocast on ``device`` when ``amp``, else a no-op.

    bfloat16 rather than float16: it has float32's exponent range, so no loss scaling is needed and no gradient
    underflows. What stays in float32 is listed in :mod:`minirl.nets`. A reusable context (``torch.autocast``
    objects can be entered again after they exit).
    """
    dev = torch.device(device)
    if not amp:
        return contextlib.nullcontext()
    if dev.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"amp=True needs bfloat16 support, which {torch.cuda.get_device_name(dev)} lacks; "
                         "run without amp (--amp)")
    return torch.autocast(dev.type, dtype=torch.bfloat16)


# --------------------------------------------------------------------------------------------------------------
# Compilation
# --------------------------------------------------------------------------------------------------------------

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def compile_agent(agent, backend: str = "inductor", mode: str | None = None) -> list[str]:
    """Compile every network ``agent`` declares (:mod:`minirl.agent`) in place with ``torch.compile``
    (``nn.Module.compile``); returns their names.

    In place, so parameter names, checkpoints and optimisers are unchanged. The fallback: if a graph fails to
    compile, torch runs that piece eagerly instead of stopping (``torch._dynamo.config.suppress_errors``), with a
    warning. Meant for GPUs; on this project's CPU compiled updates ran 0.89x (BCQ) to 1.14x (CQL) the eager rate (see
    benchmarks/README.md).

    ``mode`` is ``torch.compile``'s: ``"reduce-overhead"`` records **CUDA graphs** of the compiled networks on a GPU
    (one replay per call instead of one kernel launch per op), ``"max-autotune"`` also searches matmul kernels. A
    mode needs the default backend, inductor.
    """
    import torch._dynamo
    if mode is not None and mode not in COMPILE_MODES:
        raise ValueError(f"compile mode must be one of {COMPILE_MODES}, got {mode!r}")
    if mode is not None and backend != "inductor":
        raise ValueError(f"a compile mode ({mode!r}) needs the inductor backend, got backend={backend!r}")
    torch._dynamo.config.suppress_errors = True
    names = list(declared(agent, "modules"))
    for module in declared(agent, "modules").values():
        module.compile(backend=backend, **({"mode": mode} if mode is not None else {}))
    if not names:
        raise ValueError(f"{type(agent).__name__} declares no torch.nn.Module attributes to compile (modules = "
                         f"(...), minirl.agent)")
    return names


# --------------------------------------------------------------------------------------------------------------
# CUDA graphs: one training step recorded once, replayed as one launch
# --------------------------------------------------------------------------------------------------------------

def graph_context(device: str, precision: str | None = None, amp: bool = False):
    """What :func:`update_context` gives, as a factory :class:`CapturedStep` can enter: bfloat16 autocast without its
    weight cache (a CUDA graph needs ``cache_enabled=False``), or nothing."""
    if resolve_precision(requested_precision(precision, amp), device) != "bf16":
        return contextlib.nullcontext
    update_context(device, precision, amp)  # the same errors where bfloat16 is missing
    return lambda: torch.autocast(torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False)


def check_capture(device: str) -> None:
    """A one-line :class:`UserError` unless ``device`` is a CUDA device: capturing needs CUDA graphs."""
    if torch.device(device).type != "cuda":
        raise UserError(f"--capture replays each training step as a CUDA graph: it needs --device cuda, not {device}")


def _state_tensors(agent) -> list[torch.Tensor]:
    """Every tensor ``agent`` declares (:mod:`minirl.agent`): its modules' parameters and buffers, its optimisers'
    state, its tensors."""
    tensors = [t for module in declared(agent, "modules").values()
               for t in module.state_dict(keep_vars=True).values() if isinstance(t, torch.Tensor)]
    tensors += [t for opt in _optimizers(agent) for state in opt.state.values() for t in state.values()
                if isinstance(t, torch.Tensor)]
    return tensors + list(declared(agent, "tensors").values())


def _optimizers(agent) -> list[torch.optim.Optimizer]:
    return list(declared(agent, "optimizers").values())


class CapturedStep:
    """``step()`` (sampling a batch on the GPU and updating ``agent``) recorded once as a CUDA graph; each call
    replays the whole step as one launch instead of one launch per operation.

    The update itself is the agent's own ``update()``, unchanged; the agent's pieces are those it declares
    (:mod:`minirl.agent`: its modules, optimisers, tensors and counters, checked by ``check_agent``). What makes it
    capturable:

    * every optimiser of the agent gets ``capturable=True`` (its step count on the GPU);
    * the step is run ``warmup`` times on a side stream before the capture (CUDA's rule: lazy state such as Adam's
      moments is allocated there), then the agent is put back as it was: every tensor it holds is restored, the
      tensors the warm-up created (Adam's moments and step counts) are zeroed, which is a fresh optimiser's state,
      the agent's counters (``agent.step``) are restored, and so is the GPU's random generator. So the first
      replay is the first update, and replays draw the same random numbers as eager updates from the same seed;
    * a counter the update increments in Python is incremented after each replay (the replay runs no Python).

    What a graph cannot follow: Python control flow that depends on the step (``if step % period``, CQL's
    ``bc_steps``) is taken as it was at the capture, and a learning rate set as a Python number inside the update is
    frozen at its captured value. An agent says which of its settings do the first through ``capture_problem()``
    (refused here with its reason); the second is detected during the warm-up and refused. Keep schedules on the
    device (a tensor learning rate, ``minirl.nets.scheduled_lr``) to capture them.

    ``step`` must draw its random numbers from the default generator (``dataset.sample(B, device)`` with no
    generator); ``context`` is entered around it (e.g. bfloat16 autocast, which must have ``cache_enabled=False``).
    The logs returned are the graph's output tensors, overwritten by the next replay: read them before it.
    """

    def __init__(self, step, agent, *, warmup: int = 3, context=None):
        if not torch.cuda.is_available():
            raise RuntimeError("CapturedStep needs a CUDA GPU (CUDA graphs)")
        check_agent(agent)  # what is saved and restored around the warm-up: the pieces the agent declares
        problem = getattr(agent, "capture_problem", lambda: None)()
        if problem:
            raise ValueError(f"{type(agent).__name__}'s update cannot be replayed as a CUDA graph: {problem}")
        self._step, self.agent = step, agent
        context = context if context is not None else contextlib.nullcontext
        for opt in _optimizers(agent):
            for group in opt.param_groups:
                group["capturable"] = True
        before = {id(t): (t, t.detach().clone()) for t in _state_tensors(agent)}
        counters0 = declared(agent, "counters")
        rng = torch.cuda.get_rng_state()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        number_lrs = []  # the learning rates held as Python numbers, after each warm-up step
        with torch.cuda.stream(side):
            for _ in range(max(warmup, 2)):
                with context():
                    step()
                number_lrs.append([g["lr"] for opt in _optimizers(agent) for g in opt.param_groups
                                   if not isinstance(g["lr"], torch.Tensor)])
        torch.cuda.current_stream().wait_stream(side)
        if any(lrs != number_lrs[0] for lrs in number_lrs):
            torch.cuda.set_rng_state(rng)
            raise ValueError(f"{type(agent).__name__}.update() changes a learning rate held as a Python number every "
                             "step (a schedule): a CUDA graph would freeze it at its captured value; hold it as a "
                             "tensor (minirl.nets.scheduled_lr and set_lr)")
        warmup = len(number_lrs)
        counters1 = {k: getattr(agent, k) for k in counters0}
        self.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(self.graph):
                with context():
                    self.logs = step()
        except Exception:
            torch.cuda.set_rng_state(rng)  # a failed capture must not leave the generator mid-capture
            raise
        # the declared counters that one update advanced by one: to keep in step with the replays
        self.counters = [k for k in counters0 if getattr(agent, k) == counters1[k] + 1 == counters0[k] + warmup + 1]
        with torch.no_grad():
            for t in _state_tensors(agent):
                if id(t) in before:
                    t.copy_(before[id(t)][1])
                else:
                    t.zero_()
        for k, v in counters0.items():
            setattr(agent, k, v)
        torch.cuda.set_rng_state(rng)
        torch.cuda.synchronize()

    def __call__(self) -> dict:
        self.graph.replay()
        for k in self.counters:
            setattr(self.agent, k, getattr(self.agent, k) + 1)
        return self.logs
