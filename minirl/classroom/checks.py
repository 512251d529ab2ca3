"""The checkers that exercise notebooks call: how a check compares, and the function tasks.

A task in an exercise notebook is an answer cell (tagged ``solution`` in the reference notebook) where the student
writes code, then a checker cell::

    check_expectile_loss(expectile_loss)

A checker compares the student's code with minirl's own on fixed and random inputs (edge cases included) and prints
one line per task, e.g. ``expectile_loss: 5/5 checks passed``, after each failed check with its input, the expected
and the obtained values; code that still raises ``NotImplementedError`` prints ``not implemented yet``.

While grading, a checker runs twice: in the grading child (``probe``: it calls the answer and records what it
returned as plain data, :func:`encode`) and in the grader (``judge``: it replays those values, :func:`decode`, against
references computed there). While a task's answer runs, the task's reference cannot (:class:`Unavailable`); its
random inputs are drawn per student and task while grading (:func:`fresh`).

This file holds the *function* tasks (a loss, a target: chapter 1's tabular functions and its optimism experiment,
the losses of BCQ, CQL and IQL). The *agent* and *experiment* tasks are in :mod:`minirl.classroom.agent_checks`.
"""
from __future__ import annotations

import dis

import numpy as np


# ---------------------------------------------------------------------------------------------------------------
# Comparing a student's answer with the reference
# ---------------------------------------------------------------------------------------------------------------

def _as_array(x):
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=float)


def _fmt(x) -> str:
    a = np.round(_as_array(x), 6) + 0.0  # + 0.0 turns -0 into 0
    return " ".join(np.array2string(a, precision=6, separator=", ", threshold=12, max_line_width=10_000).split())


def mismatch(got, want, atol: float = 1e-6, rtol: float = 1e-6) -> str | None:
    """``None`` if ``got`` matches ``want`` (same shape, close values), else a readable description."""
    try:
        g = _as_array(got)
    except (TypeError, ValueError) as e:
        return f"got a {type(got).__name__} that is not an array of numbers ({e})"
    w = _as_array(want)
    if g.shape != w.shape:
        return f"shape {g.shape}, expected shape {w.shape}"
    same_inf = np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w))
    bad = ~(np.isclose(g, w, atol=atol, rtol=rtol) | same_inf)
    if not bad.any():
        return None
    i = np.unravel_index(int(np.flatnonzero(bad)[0]), g.shape) if g.shape else ()
    where = f" at index {tuple(int(k) for k in i)}" if g.shape else ""
    return (f"{int(bad.sum())} of {bad.size} values differ{where}: got {float(g[i]):.6g}, expected {float(w[i]):.6g}"
            f"\n    got      {_fmt(g)}\n    expected {_fmt(w)}")


_VERDICTS: list[dict] = []  # every report() appends its verdict here (the student's own run, and the grader's judge)


# ---------------------------------------------------------------------------------------------------------------
# Where a check runs: all in one process (a student's notebook), or split between the grading child and the grader
# ---------------------------------------------------------------------------------------------------------------
# ``local``: a student's own run of a notebook: the answer is called and compared here, the verdict printed.
# ``probe``: the grading child (minirl.classroom.sandbox): the answer is called and what it returned is recorded as
#            plain data (:func:`encode`: numbers, arrays, text; never an object) in ``_PROBES``; no reference is
#            computed and no verdict given there.
# ``judge``: the grader's own process (minirl.classroom.grader): the same checker runs again, but instead of calling
#            the answer each check takes the next value the child recorded (:func:`decode`) and compares it with the
#            reference computed here. Nothing the child prints, patches or exits with reaches this comparison.
# ``discover``: the grading child, before a task's answer runs: the checker stops at its ``Checks(...)`` and says which
#            references the task has (:func:`references_of`), so they can be disabled for the whole task's process.
_MODE = "local"
_PROBES: list[dict] = []          # probe: one entry per checker run, {"task", "results", "uses_reference"}
_REPLAY: dict[str, list] = {}     # judge: task -> the child's recorded results, in order
MAX_ELEMENTS = 1_000_000          # numbers one recorded value may hold


_FRESH: int | None = None        # while grading: the draw of this student's task (grader.fresh_draw); None: public


def fresh(seed: int) -> int:
    """The seed of a check's random input: ``seed`` itself for the public inputs (a student's own run, the
    self-check), and while grading one derived from the draw of the instructor's key, the student and the task, the
    same in the child and in the judge. A constant read off the self-check fails the graded run."""
    if _FRESH is None:
        return seed
    import hashlib
    return int.from_bytes(hashlib.sha256(f"{_FRESH}:{seed}".encode()).digest()[:4], "little")


class grading_inputs:
    """``with checks.grading_inputs(draw): check_...(answer)``: run a check, in your own notebook, on the inputs a
    grading run drew for it (the draw its feedback names) instead of the self-check's public ones, so that a check
    that failed in the grading can be seen failing, with its inputs printed, and fixed."""

    def __init__(self, draw: int):
        if isinstance(draw, bool) or not isinstance(draw, int) or draw < 0:
            raise ValueError(f"draw must be the whole number a grading's feedback names, got {draw!r}")
        self.draw = draw

    def __enter__(self):
        global _FRESH
        self.previous, _FRESH = _FRESH, self.draw
        return self

    def __exit__(self, *exc):
        global _FRESH
        _FRESH = self.previous
        return False


class Ref:
    """A reference value computed only where verdicts are computed (``local`` or ``judge``), never in the child:
    ``c.compare(description, call, Ref(lambda: reference(x)))``."""

    def __init__(self, thunk):
        self.thunk = thunk


def encode(x, depth: int = 0):
    """What an answer returned, as JSON-able plain data: ``{"a": flat numbers, "s": shape, "k": kind}`` for an array
    or tensor, ``{"v": x}`` for a number, bool, text or None, ``{"l": [...]}`` for a list or tuple, ``{"d": {...}}`` for
    a dict with text keys, ``{"t": type name}`` for anything else."""
    if depth > 6:
        return {"t": "nested too deep"}
    if x is None or isinstance(x, (bool, int, float, str)):
        if isinstance(x, str):
            x = x[:10_000]
        return {"v": x}
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor
        x = x.detach().cpu().numpy()
    if isinstance(x, (np.ndarray, np.generic)):
        a = np.asarray(x)
        if a.size > MAX_ELEMENTS:
            return {"t": f"array of {a.size} values (more than {MAX_ELEMENTS})"}
        kind = {"b": "b", "i": "i", "u": "i", "f": "f"}.get(a.dtype.kind)
        if kind is None:
            return {"t": f"array of {a.dtype}"}
        return {"a": a.astype(float if kind == "f" else int if kind == "i" else bool).reshape(-1).tolist(),
                "s": list(a.shape), "k": kind}
    if isinstance(x, (list, tuple)):
        return {"l": [encode(v, depth + 1) for v in x[:10_000]]}
    if isinstance(x, dict) and all(isinstance(k, str) for k in x):
        return {"d": {k: encode(v, depth + 1) for k, v in list(x.items())[:1000]}}
    return {"t": type(x).__name__}


class Unreadable:
    """A value the child returned that is not numbers or text (decoded from ``{"t": ...}``)."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self):
        return f"<{self.what}>"


def decode(data, depth: int = 0):
    """The inverse of :func:`encode`, in the grader: builds only numbers, NumPy arrays of numbers, text, lists and
    dicts (a malformed record raises ``ValueError``)."""
    if depth > 7 or not isinstance(data, dict) or len(data) not in (1, 3):
        raise ValueError("malformed value")
    if "v" in data:
        v = data["v"]
        if v is not None and not isinstance(v, (bool, int, float, str)):
            raise ValueError("malformed value")
        return v
    if "a" in data:
        values, shape, kind = data["a"], data.get("s"), data.get("k")
        if (not isinstance(values, list) or not isinstance(shape, list) or kind not in ("f", "i", "b")
                or not all(isinstance(n, int) and n >= 0 for n in shape) or len(values) > MAX_ELEMENTS
                or int(np.prod(shape)) != len(values)
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool)
                           for v in values)):
            raise ValueError("malformed array")
        dtype = {"f": float, "i": np.int64, "b": bool}[kind]
        return np.array(values, dtype=dtype).reshape(shape)
    if "l" in data and isinstance(data["l"], list):
        return [decode(v, depth + 1) for v in data["l"]]
    if "d" in data and isinstance(data["d"], dict):
        return {str(k): decode(v, depth + 1) for k, v in data["d"].items()}
    if "t" in data:
        return Unreadable(str(data["t"])[:100])
    raise ValueError("malformed value")


# ---------------------------------------------------------------------------------------------------------------
# Noticing an answer that hands its task to minirl's own implementation
# ---------------------------------------------------------------------------------------------------------------

def _signature(code) -> tuple:
    """A cheap first look: a copy has its original's arguments and local names."""
    return code.co_argcount, code.co_kwonlyargcount, code.co_varnames


_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
# Python 3.11 compiles ``np.f()`` with either op, by whether ``np`` is imported in the same file
_SAME_OP = {"LOAD_METHOD": "LOAD_ATTR"}


def _fingerprint(code) -> tuple:
    """What a copy of a function keeps whatever its name, file or line: its instructions with their names and
    constants (the docstring among them) and its arguments. Two functions written independently differ in it (their
    docstrings, their local names); a function re-made from another's code or source (``types.FunctionType(
    f.__code__, ...)``, ``exec`` of ``inspect.getsource(f)``) does not."""
    ops = []
    for ins in dis.get_instructions(code):
        # a jump's distance, and the EXTENDED_ARG prefix that carries its high bits, depend on the size of the code
        # between, which _SAME_OP's two ops change (their inline caches differ): left out
        arg = None if ins.opcode in _JUMPS or ins.opname == "EXTENDED_ARG" else ins.argval
        if hasattr(arg, "co_code"):
            arg = _fingerprint(arg)
        elif arg is not None and not isinstance(arg, (str, int, float, bool, bytes, tuple, frozenset)):
            arg = repr(arg)
        ops.append((_SAME_OP.get(ins.opname, ins.opname), arg))
    docstring = code.co_consts[0] if code.co_consts and isinstance(code.co_consts[0], str) else None
    return _signature(code), docstring, tuple(ops)


def _reference_name(function) -> str:
    return f"{function.__module__}.{function.__qualname__}"


class ReferenceWatch:
    """Notices when the code it watches runs a task's reference implementation, by whatever route it got there.

    ``with watch: fn(...)`` installs a trace function (:func:`sys.settrace`, also for threads the code starts) that
    looks at every Python function call: one that enters the reference's code object (an import, an alias, an
    attribute lookup, the agent's own ``update``, a method called through ``super()``, a copy taken at import time:
    every route ends in that code) or a copy of it (the same bytecode, constants and names, e.g. re-made from its
    code or its source) is recorded in :attr:`used`. Everything else ``minirl`` offers (its networks, datasets,
    the agent the task hands out, the other tasks' functions) runs unremarked. A tracer already installed (a
    debugger, coverage) keeps receiving its events.

    What it cannot see: a reference retyped or pasted with edits (other names, another docstring), a reference
    compiled out of Python (``torch.jit.script``), and another function that computes the same thing under another
    name. Those are for reading the answer, as any copying is."""

    def __init__(self, references):
        self.names: dict[int, tuple] = {}        # id(code) -> (code, name): the references' own code objects
        self.prints: dict[tuple, dict] = {}     # signature -> {fingerprint: name}: their copies
        for ref in references:
            function = getattr(ref, "__func__", ref)
            code = getattr(function, "__code__", None)
            if code is None:
                raise TypeError(f"reference {ref!r} is not a Python function")
            # the function's own code only: its inner comprehensions and lambdas are short and common enough for a
            # student's own code to share their fingerprint, and running them means running the function
            self.names[id(code)] = (code, _reference_name(function))
            self.prints.setdefault(_signature(code), {})[_fingerprint(code)] = _reference_name(function)
        self.seen: dict[int, tuple] = {}         # id(code) -> (code, name or None), every code object met once
        self.used: list[str] = []
        self._previous = []

    def _lookup(self, code):
        entry = self.seen.get(id(code))
        if entry is None or entry[0] is not code:
            known = self.names.get(id(code))
            if known is not None and known[0] is code:
                name = known[1]
            else:  # a copy? (its fingerprint is computed only for code with a reference's arguments and locals)
                copies = self.prints.get(_signature(code))
                name = copies.get(_fingerprint(code)) if copies else None
            entry = self.seen[id(code)] = (code, name)
        return entry[1]

    def _trace(self, frame, event, arg):
        if event == "call":
            name = self._lookup(frame.f_code)
            if name is not None and name not in self.used:
                self.used.append(name)
        previous = self._previous[-1][0] if self._previous else None
        return previous(frame, event, arg) if previous is not None else None

    def __enter__(self):
        import sys
        import threading
        self._previous.append((sys.gettrace(), threading.gettrace()))
        sys.settrace(self._trace)
        threading.settrace(self._trace)
        return self

    def __exit__(self, *exc):
        import sys
        import threading
        previous, previous_threads = self._previous.pop()
        sys.settrace(previous)
        threading.settrace(previous_threads)
        return False


class _Discovered(Exception):
    def __init__(self, task: str, references: tuple):
        super().__init__(task)
        self.task, self.references = task, references


def references_of(checker, task: str) -> tuple | None:
    """The references a task's ``checker`` names in its ``Checks(task, reference=...)``, without running a check;
    ``None`` if the checker could not get that far."""
    global _MODE
    previous, _MODE = _MODE, "discover"
    try:
        checker(lambda *a, **k: None)
    except _Discovered as d:
        return d.references if d.task == task else None
    except Exception:  # noqa: BLE001 - a checker that needs more before its Checks: watched per call only
        return None
    finally:
        _MODE = previous
    return None


def disable(references) -> list[str]:
    """Swap each reference's code for the stub's, for good (the process that calls this is thrown away after one
    task): no copy of the reference's code object is kept, so nothing run afterwards can save or call it. Returns the
    names of the references that could not be disabled (a function with closure cells whose stub cannot be built)."""
    kept = Unavailable(references)
    for function, _, stub in kept.functions:
        function.__code__ = stub
    named = {id(f) for f, _, _ in kept.functions}
    kept.functions.clear()
    return [_reference_name(getattr(r, "__func__", r)) for r in references if id(getattr(r, "__func__", r)) not in named]


class Unavailable:
    """``with Unavailable(references):`` the references cannot run: each one's code is swapped for code that raises
    ``ReferenceError("minirl grader: ...")`` (so every alias, import, bound method, ``super()`` call or copy of the function
    object reaches the stub), and put back on exit. What is called is recorded in :attr:`used`.

    It closes the routes the trace of :class:`ReferenceWatch` can be switched off for (``sys.settrace(None)`` in the
    answer). What stays open: the reference's code object itself, kept by the answer before the check (``c =
    f.__code__``) and run as a new function; a function with closure cells whose stub cannot be built (watched only)."""

    def __init__(self, references):
        self.functions, self.used = [], []
        for ref in references:
            function = getattr(ref, "__func__", ref)
            code = getattr(function, "__code__", None)
            if code is not None:
                stub = self._stub(code, _reference_name(function))
                if stub is not None:
                    self.functions.append((function, code, stub))

    def _stub(self, code, name: str):
        free = code.co_freevars
        lines = ["def _outer():"] + [f"    {v} = None" for v in free] + [
            f"    def {code.co_name}(*args, **kwargs):"]
        if free:
            lines.append(f"        ({', '.join(free)},)")
        # the stub runs with the reference's own globals: only builtins and constants in it
        message = (f"{self.MARK}{name} is not available while this task is graded: write the task's code yourself "
                   "(minirl's other pieces are yours to use)")
        lines += [f"        raise ReferenceError({message!r})", f"    return {code.co_name}"]
        scope: dict = {}
        try:
            exec(compile("\n".join(lines), f"<unavailable {name}>", "exec"), scope)  # noqa: S102 - our own text
            stub = scope["_outer"]().__code__
        except SyntaxError:
            return None
        return stub if stub.co_freevars == free else None

    MARK = "minirl grader: "

    def noticed(self, error: BaseException) -> bool:
        """Whether ``error`` is a stub's (the answer ran the reference); its name is then recorded in :attr:`used`."""
        text = str(error)
        if not (isinstance(error, ReferenceError) and text.startswith(self.MARK)):
            return False
        name = text[len(self.MARK):].split(" is not available", 1)[0]
        if name not in self.used:
            self.used.append(name)
        return True

    def __enter__(self):
        for function, _, stub in self.functions:
            function.__code__ = stub
        return self

    def __exit__(self, *exc):
        for function, code, _ in self.functions:
            function.__code__ = code
        return False


class Checks:
    """Run a task's checks, print failures with their inputs, then one summary line ``<task>: k/n checks passed``.

    ``reference`` names minirl's own implementation of the task (a function, a method, a tuple of them, or ``None``
    for a task that composes the library's pieces and has none): the student's code runs under a
    :class:`ReferenceWatch` of it, and an answer that runs it gets ``<task>: uses the reference implementation``
    instead of a score. A new checker must say it: there is no default.

    ``report()`` also records the verdict (task, checks passed, checks run, not implemented, references used) for
    the grader, which takes a task's grade from this record of the reference checker, never from what a notebook
    stores or prints."""

    def __init__(self, task: str, *, reference, unavailable: tuple = ()):
        self.task, self.n, self.passed, self.not_implemented = task, 0, 0, None
        references = () if reference is None else reference if isinstance(reference, (tuple, list)) else (reference,)
        references = (*references, *unavailable)  # ``unavailable``: more of minirl the answer may not run (not the
        if _MODE == "discover":                      # task's reference: no route to them is asked of a checker)
            raise _Discovered(task, tuple(references))
        self.watch = ReferenceWatch(references) if references and _MODE != "judge" else None
        self.unavailable = Unavailable(references) if references and _MODE != "judge" else None
        if self.unavailable is not None:  # a call of a stub (say, in a thread the answer starts) is a use too
            for function, _, stub in self.unavailable.functions:
                self.watch.names[id(stub)] = (stub, _reference_name(function))
        self.recorded: list[dict] = []                       # probe: what the answer returned, check by check
        self.log: list[tuple[str, str | None]] = []          # judge, local: (description, what is wrong or None)
        self.replay = list(_REPLAY.get(task, [])) if _MODE == "judge" else None

    def _call(self, call):
        """``("value", got)``, ``("ni", message)`` or ``("raised", message)``: the answer called (not in the judge)."""
        try:
            if self.watch is None:
                got = call()
            else:
                with self.unavailable, self.watch:
                    got = call()
        except NotImplementedError as e:
            return "ni", str(e) or "NotImplementedError"
        except Exception as e:  # noqa: BLE001 - any error is reported to the student with its input
            if self.unavailable is not None and self.unavailable.noticed(e):
                return "raised", f"it ran the task's reference implementation ({e})"
            return "raised", f"{type(e).__name__}: {e}"
        return "value", got

    def _replayed(self):
        """The next result the child recorded, decoded: as :meth:`_call`, or ``("missing", why)``."""
        if not self.replay:
            return "missing", "no value came back from the notebook's process for this check"
        rec = self.replay.pop(0)
        if not isinstance(rec, dict) or len(rec) != 1:
            return "missing", "the record of this check is malformed"
        (kind, value), = rec.items()
        if kind in ("ni", "raised"):
            return kind, str(value)[:500]
        if kind != "value":
            return "missing", "the record of this check is malformed"
        try:
            return "value", decode(value)
        except (ValueError, TypeError, OverflowError) as e:
            return "missing", f"the value recorded for this check cannot be read ({e})"

    def compare(self, description: str, call, want, atol: float = 1e-6, rtol: float = 1e-6) -> None:
        """Call ``call()`` (the student's function on one input) and compare with ``want`` (a value, a
        :class:`Ref`, or a function of the answer's value that returns ``None`` or what is wrong)."""
        self.n += 1
        if self.not_implemented is not None:
            return
        kind, got = self._replayed() if _MODE == "judge" else self._call(call)
        if _MODE == "probe":
            if kind == "value":
                try:
                    rec = {"value": encode(got)}
                except Exception as e:  # noqa: BLE001 - a value whose conversion fails is the answer's problem
                    rec = {"raised": f"the value returned cannot be recorded ({type(e).__name__}: {e})"}
            else:
                rec = {kind: got[:500]}
            self.recorded.append(rec)
            if kind == "ni":
                self.not_implemented = got
            return
        if kind == "ni":
            self.not_implemented = got
            return
        if kind in ("raised", "missing"):
            print(f"check FAILED: {description}\n    {'raised ' if kind == 'raised' else ''}{got}")
            self.log.append((description, f"{'raised ' if kind == 'raised' else ''}{got}"[:500]))
            return
        if isinstance(want, Ref):
            want = want.thunk()
        try:
            problem = mismatch(got, want, atol, rtol) if not callable(want) else want(got)
        except Exception as e:  # noqa: BLE001 - an answer's value the comparison cannot use
            problem = f"the value returned cannot be compared ({type(e).__name__}: {e})"
        self.log.append((description, None if problem is None else str(problem)[:500]))
        if problem is None:
            self.passed += 1
        else:
            print(f"check FAILED: {description}\n    {problem}")

    def report(self) -> None:
        used = list(self.watch.used) if self.watch is not None else []
        used += [u for u in (self.unavailable.used if self.unavailable is not None else []) if u not in used]
        if _MODE == "probe":
            _PROBES.append({"task": self.task, "results": self.recorded, "uses_reference": used})
            print(f"{self.task}: {len(self.recorded)} answers recorded for the grader")
            return
        _VERDICTS.append({"task": self.task, "passed": self.passed, "n": self.n,
                          "not_implemented": self.not_implemented, "uses_reference": used,
                          "checks": [list(c) for c in self.log]})
        if self.not_implemented is not None:
            print(f"{self.task}: not implemented yet (NotImplementedError: {self.not_implemented})")
        elif used:
            print(f"{self.task}: uses the reference implementation ({', '.join(used)}): no checks counted; write "
                  "the task's code yourself (minirl's other pieces are yours to use)")
        else:
            print(f"{self.task}: {self.passed}/{self.n} checks passed")


# ---------------------------------------------------------------------------------------------------------------
# Chapter 1: finite MDPs, exact policy evaluation, the empirical MDP
# ---------------------------------------------------------------------------------------------------------------

def _random_policy(S: int, A: int, seed: int) -> np.ndarray:
    w = np.random.default_rng(fresh(seed)).random((S, A)) + 0.05
    return w / w.sum(axis=1, keepdims=True)


def _two_state_mdp():
    """A hand-checkable MDP: action 0 stays, action 1 switches state; reward 1 for being in state 1."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0
    P[0, 1, 1] = P[1, 1, 0] = 1.0
    R = np.array([[0.0, 0.0], [1.0, 1.0]])
    return P, R


def check_policy_transition(fn) -> None:
    """Task: ``policy_transition(P, pi)`` returns ``P^pi[(s,a),(s',a')] = P(s'|s,a) pi(a'|s')``, shape (SA, SA)."""
    from .. import tabular as tab
    c = Checks("policy_transition", reference=tab.policy_transition)
    P, _ = _two_state_mdp()
    always_switch = np.array([[0.0, 1.0], [0.0, 1.0]])
    c.compare("two-state MDP, pi = always switch", lambda: fn(P, always_switch),
              Ref(lambda: tab.policy_transition(P, always_switch)))
    c.compare("two-state MDP, uniform pi", lambda: fn(P, np.full((2, 2), 0.5)),
              Ref(lambda: tab.policy_transition(P, np.full((2, 2), 0.5))))
    one = np.ones((1, 1, 1))
    c.compare("one state, one action", lambda: fn(one, np.ones((1, 1))), np.ones((1, 1)))
    for seed, (S, A) in [(0, (4, 3)), (1, (6, 2))]:
        m = tab.random_mdp(S, A, seed=fresh(seed))
        pi = _random_policy(S, A, seed + 100)
        c.compare(f"random MDP S={S} A={A} seed={seed}, random pi", lambda: fn(m.P, pi),
                  Ref(lambda m=m, pi=pi: tab.policy_transition(m.P, pi)))
    return c.report()


def check_evaluate_policy(fn) -> None:
    """Task: ``evaluate_policy(P, R, gamma, pi)`` returns ``Q^pi = (I - gamma P^pi)^-1 R`` as an (S, A) table."""
    from .. import tabular as tab
    c = Checks("evaluate_policy", reference=(tab.evaluate_policy_exact, tab.evaluate_policy_iterative))
    P, R = _two_state_mdp()
    stay = np.array([[1.0, 0.0], [1.0, 0.0]])
    # by hand: staying in state 1 earns 1 forever (10 at gamma 0.9); in state 0 nothing; switching from 0 reaches 1
    c.compare("two-state MDP, gamma=0.9, pi = always stay", lambda: fn(P, R, 0.9, stay),
              np.array([[0.0, 9.0], [10.0, 1.0]]))
    c.compare("two-state MDP, gamma=0 (Q = R)", lambda: fn(P, R, 0.0, stay), R)
    for seed, (S, A, gamma) in [(0, (4, 3, 0.9)), (1, (6, 2, 0.5)), (2, (5, 4, 0.99))]:
        m = tab.random_mdp(S, A, gamma=gamma, seed=fresh(seed))
        pi = _random_policy(S, A, seed + 100)
        c.compare(f"random MDP S={S} A={A} gamma={gamma} seed={seed}", lambda: fn(m.P, m.R, gamma, pi),
                  Ref(lambda m=m, pi=pi: tab.evaluate_policy_exact(m, pi)), atol=1e-5)
    return c.report()


def check_empirical_mdp(fn) -> None:
    """Task: ``empirical_mdp(s, a, r, s_next, S, A)`` returns ``(T_hat, r_hat, counts)``; unseen pairs loop with r 0."""
    from .. import tabular as tab
    c = Checks("empirical_mdp", reference=tab.empirical_mdp)

    def reference(s, a, r, s_next, S, A):
        data = {"s": np.asarray(s), "a": np.asarray(a), "r": np.asarray(r, dtype=float),
                "s_next": np.asarray(s_next), "done": np.zeros(len(s), dtype=bool)}
        m, counts = tab.empirical_mdp(data, S, A, gamma=0.9)
        return m.P, m.R, counts

    def compare_all(description, args):
        for k, name in enumerate(("T_hat", "r_hat", "counts")):
            c.compare(f"{description}: {name}", lambda k=k: _pick(fn(*args), k, 3), Ref(lambda k=k: reference(*args)[k]))

    compare_all("s=[0, 0, 1], a=[1, 1, 0], r=[1, 3, 2], s_next=[1, 0, 1], S=2, A=2 (pair (0,0) and (1,1) unseen)",
                ([0, 0, 1], [1, 1, 0], [1.0, 3.0, 2.0], [1, 0, 1], 2, 2))
    rng = np.random.default_rng(fresh(7))
    m = tab.random_mdp(5, 3, seed=fresh(3))
    d = tab.sample_dataset(m, _random_policy(5, 3, 4), 200, seed=int(rng.integers(1000)))
    compare_all("200 transitions of a random MDP S=5 A=3 seed=3", (d["s"], d["a"], d["r"], d["s_next"], 5, 3))
    return c.report()


def _pick(result, k: int, n: int):
    if not isinstance(result, (tuple, list)) or len(result) != n:
        raise ValueError(f"expected a tuple of {n} arrays, got {type(result).__name__}"
                         + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""))
    return result[k]


def optimism_experiment(unseen_reward: float = 1.0, n_transitions: int = 300, seed: int = 0) -> dict:
    """The reference answer of chapter 1's experiment: plan in the empirical MDP of a small dataset whose unseen pairs
    pay ``unseen_reward`` forever, then run the greedy policy in the true MDP.  Returns the value the empirical MDP
    promises (``J_hat``), the true return (``J_true``) and the behaviour policy's true return (``J_beta``)."""
    from .. import tabular as tab
    mdp = tab.random_mdp(8, 4, gamma=0.9, seed=seed, branching=3)
    pi_beta = np.zeros((8, 4))
    pi_beta[:, 0], pi_beta[:, 1] = 0.7, 0.3  # the behaviour policy never takes actions 2 and 3
    data = tab.sample_dataset(mdp, pi_beta, n_transitions, seed=seed)
    mdp_hat, _ = tab.empirical_mdp(data, 8, 4, gamma=0.9, init=mdp.init, unseen_reward=unseen_reward)
    pi = tab.greedy_policy(tab.value_iteration(mdp_hat))
    return {"J_hat": tab.policy_return(mdp_hat, pi), "J_true": tab.policy_return(mdp, pi),
            "J_beta": tab.policy_return(mdp, pi_beta)}


OPTIMISM_POOL = {"unseen_reward": (0.5, 0.8, 1.0), "n_transitions": (100, 200, 300, 500, 1000)}


def optimism_setting() -> dict:
    """The keyword arguments ``optimism_experiment`` is checked with: none for the self-check (its defaults, the
    notebook's setting), and while grading a seed, a dataset size and an unseen reward drawn by the task's draw
    (:func:`fresh`) from :data:`OPTIMISM_POOL`."""
    if _FRESH is None:
        return {}
    rng = np.random.default_rng(fresh(11))
    return {"unseen_reward": float(rng.choice(OPTIMISM_POOL["unseen_reward"])),
            "n_transitions": int(rng.choice(OPTIMISM_POOL["n_transitions"])), "seed": int(rng.integers(1, 10_000))}


def check_optimism_experiment(fn) -> None:
    """Task: ``fn(unseen_reward=1.0, n_transitions=300, seed=0)`` returns the pair ``(J_hat, J_true)`` of the
    optimism experiment (:func:`optimism_experiment`); called with its defaults, or while grading with drawn ones."""
    c = Checks("optimism_experiment", reference=optimism_experiment)
    kw = optimism_setting()
    at = (f" (unseen reward {kw['unseen_reward']:g}, {kw['n_transitions']} transitions, seed {kw['seed']})"
          if kw else "")
    c.compare(f"J_hat: the return the empirical MDP promises{at}", lambda: _pick(fn(**kw), 0, 2),
              Ref(lambda: optimism_experiment(**kw)["J_hat"]), atol=1e-4)
    c.compare(f"J_true: the greedy policy's return in the true MDP{at}", lambda: _pick(fn(**kw), 1, 2),
              Ref(lambda: optimism_experiment(**kw)["J_true"]), atol=1e-4)
    return c.report()


# ---------------------------------------------------------------------------------------------------------------
# Chapters 2-4: the losses of BCQ, CQL and IQL, checked against minirl's own pure functions
# ---------------------------------------------------------------------------------------------------------------

def _t(x, requires_grad: bool = False):
    import torch
    return torch.tensor(x, dtype=torch.float32, requires_grad=requires_grad)


def _clone(args):
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) if hasattr(a, "detach") else a for a in args)


def _check_cases(task: str, fn, reference, cases, atol: float = 1e-5) -> Checks:
    """Compare ``fn(*args)`` with ``reference(*args)`` for every ``(description, args)`` in ``cases``."""
    c = Checks(task, reference=reference)
    for description, args in cases:
        c.compare(description, lambda args=args: fn(*_clone(args)), Ref(lambda args=args: reference(*_clone(args))),
                  atol=atol, rtol=1e-5)
    return c


def _randn(*shape, seed: int, scale: float = 1.0):
    import torch
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(fresh(seed)))


def _check_detached(c: Checks, fn, args: tuple, index: int, name: str, description: str) -> None:
    """One check: ``fn(*args)`` must carry no gradient to ``args[index]`` (it must be detached there)."""
    import torch

    def gradient_size():  # in the child: a number (the size of the gradient), never a verdict
        a = _clone(args)
        out = fn(*a)
        if not getattr(out, "requires_grad", False):
            return 0.0
        grad = torch.autograd.grad(out.sum(), a[index], allow_unused=True)[0]
        return 0.0 if grad is None else float(grad.abs().sum())

    def judge(size):
        if isinstance(size, bool) or not isinstance(size, (int, float)):
            return f"expected a number, got {size!r}"
        return None if size == 0 else f"the output has a gradient with respect to {name}: detach {name} (make it a " \
                                      "constant)"

    c.compare(description, gradient_size, judge)


def check_expectile_loss(fn) -> None:
    """Task: ``expectile_loss(diff, tau) = |tau - 1(diff < 0)| * diff^2``, elementwise."""
    from ..iql import expectile_loss
    c = _check_cases("expectile_loss", fn, expectile_loss, [
        ("diff=[-2, -0.5, 0, 0.5, 2], tau=0.7 (by hand: [1.2, 0.075, 0, 0.175, 2.8])",
         (_t([-2.0, -0.5, 0.0, 0.5, 2.0]), 0.7)),
        ("diff=[-1, 1, 3], tau=0.5 (half the squared error)", (_t([-1.0, 1.0, 3.0]), 0.5)),
        ("random diff of shape (3, 4), tau=0.9", (_randn(3, 4, seed=0), 0.9)),
        ("random diff of shape (6,), tau=0.1 (below the median: negative errors weigh more)", (_randn(6, seed=1), 0.1)),
        ("diff all zero, tau=0.99", (_t([0.0, 0.0, 0.0]), 0.99)),
    ])
    c.report()


def check_q_target(fn) -> None:
    """Task: IQL's critic target ``y = r + gamma (1 - done) V(s')``."""
    from ..iql import q_target
    _check_cases("q_target", fn, q_target, [
        ("rew=[1, 2], done=[0, 1], next_v=[10, 10], gamma=0.9 (by hand: [10, 2])",
         (_t([1.0, 2.0]), _t([0.0, 1.0]), _t([10.0, 10.0]), 0.9)),
        ("gamma=0: the target is the reward", (_t([1.0, -1.0, 3.0]), _t([0.0, 0.0, 0.0]), _t([5.0, 6.0, 7.0]), 0.0)),
        ("every transition terminal", (_t([0.5, 0.25]), _t([1.0, 1.0]), _t([100.0, -100.0]), 0.99)),
        ("random batch of 8, gamma=0.99", (_randn(8, seed=2), (_randn(8, seed=3) > 1).float(), _randn(8, seed=4),
                                           0.99)),
    ]).report()


def check_awr_weights(fn) -> None:
    """Task: ``awr_weights(adv, beta, max_weight) = min(exp(beta * adv), max_weight)``, detached."""
    from ..iql import awr_weights
    c = _check_cases("awr_weights", fn, awr_weights, [
        ("adv=[-1, 0, 1, 2], beta=3, max_weight=100 (exp(6) = 403 is clamped to 100)",
         (_t([-1.0, 0.0, 1.0, 2.0]), 3.0, 100.0)),
        ("beta=0: every weight is 1 (behaviour cloning)", (_randn(5, seed=5), 0.0, 100.0)),
        ("random advantages, beta=10, max_weight=20", (_randn(4, 3, seed=6), 10.0, 20.0)),
        ("huge advantages [50, 1000], beta=3: clamped, never inf or nan", (_t([50.0, 1000.0]), 3.0, 100.0)),
    ])
    _check_detached(c, fn, (_t([0.5, -0.5, 1.5], requires_grad=True), 3.0, 100.0), 0, "adv",
                    "adv requires grad: the weights must be constants for the actor")
    c.report()


EXPECTILE_PROBS = ((0.5, 0.3, 0.2), (0.2, 0.5, 0.3), (0.6, 0.2, 0.2), (0.1, 0.3, 0.6), (0.4, 0.4, 0.2),
                   (0.25, 0.25, 0.5), (0.7, 0.2, 0.1), (0.3, 0.6, 0.1))
EXPECTILE_TAUS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)


def expectile_setting() -> dict:
    """The keyword arguments ``expectile_experiment`` is checked with: none for the self-check (its defaults, the
    task's values 0, 1, 5, probabilities 0.5, 0.3, 0.2 and tau 0.9), and while grading three values (distinct
    integers from -4 to 10), their probabilities (:data:`EXPECTILE_PROBS`) and tau (:data:`EXPECTILE_TAUS`) drawn by
    the task's draw (:func:`fresh`)."""
    if _FRESH is None:
        return {}
    rng = np.random.default_rng(fresh(13))
    values = sorted(float(v) for v in rng.choice(np.arange(-4, 11), 3, replace=False))
    probs = [float(p) for p in EXPECTILE_PROBS[int(rng.integers(len(EXPECTILE_PROBS)))]]
    return {"values": values, "probs": probs, "tau": float(rng.choice(EXPECTILE_TAUS))}


def check_expectile_experiment(fn) -> None:
    """Task: ``fn(values=(0, 1, 5), probs=(0.5, 0.3, 0.2), tau=0.9)`` returns the tau-expectile of ``values`` taken
    with probabilities ``probs``; called with its defaults, or while grading with drawn ones."""
    from ..tabular import expectile
    kw = expectile_setting()
    values, probs, tau = (kw["values"], kw["probs"], kw["tau"]) if kw else ([0.0, 1.0, 5.0], [0.5, 0.3, 0.2], 0.9)
    want = Ref(lambda: float(expectile(np.array(values), np.array(probs), tau)))
    c = Checks("expectile_experiment", reference=expectile)
    description = (f"the {tau:g}-expectile of {[int(v) for v in values]} with probabilities {probs}, within 1e-3"
                   if kw else "the 0.9-expectile, within 1e-3")
    c.compare(description, lambda: float(fn(**kw)), want, atol=1e-3)
    c.report()


def check_discrete_cql_penalty(fn) -> None:
    """Task: discrete CQL's ``logsumexp_a Q(s, a) - Q(s, a_data)`` per state."""
    import torch
    from ..cql import discrete_cql_penalty
    long = lambda x: torch.tensor(x, dtype=torch.long)  # noqa: E731
    _check_cases("discrete_cql_penalty", fn, discrete_cql_penalty, [
        ("q_all=[[1, 2, 3]], actions=[0] (by hand: log(e + e^2 + e^3) - 1 = 2.4076)", (_t([[1.0, 2.0, 3.0]]), long([0]))),
        ("all Q equal: the penalty is log |A|", (_t([[0.5, 0.5, 0.5, 0.5]]), long([2]))),
        ("random Q of shape (5, 4)", (_randn(5, 4, seed=7), long([0, 1, 2, 3, 0]))),
        ("Q values near 1000 (compute logsumexp stably)", (_t([[1000.0, 1001.0], [999.0, 1000.0]]), long([1, 0]))),
        ("the data action has the largest Q", (_t([[0.0, 5.0, 1.0]]), long([1]))),
    ]).report()


def check_cql_penalty(fn) -> None:
    """Task: ``T * logsumexp_i(Q(s, a_i) / T - log p(a_i)) - Q(s, a_data)`` per state."""
    from ..cql import cql_penalty
    log_u = float(-3 * np.log(0.5))  # -log of the uniform density on [-1, 1]^3 is +3 log 2; log p = 3 log 0.5
    _check_cases("cql_penalty", fn, cql_penalty, [
        ("q_data=[1], q_sampled=[[1, 2, 3]], log_density=0, T=1", (_t([1.0]), _t([[1.0, 2.0, 3.0]]), 0.0, 1.0)),
        ("uniform actions in [-1, 1]^3: log_density = 3 log 0.5 for every sample",
         (_t([0.0, 1.0]), _t([[0.0, 1.0], [2.0, 0.5]]), -log_u, 1.0)),
        ("per-sample log-densities of shape (B, K)", (_randn(3, seed=8), _randn(3, 4, seed=9), _randn(3, 4, seed=10),
                                                      1.0)),
        ("temperature 0.1 (close to the hard max)", (_randn(4, seed=11), _randn(4, 6, seed=12), 0.0, 0.1)),
        ("temperature 10", (_randn(4, seed=13), _randn(4, 6, seed=14), _randn(4, 6, seed=15), 10.0)),
    ]).report()


def check_lagrange_loss(fn) -> None:
    """Task: the dual loss ``-cql_alpha * alpha' * (penalty.detach() - gap)``, ``alpha' = clamp(exp(log a'), 0, 1e6)``."""
    import torch
    from ..cql import lagrange_loss
    c = _check_cases("lagrange_loss", fn, lagrange_loss, [
        ("log_alpha'=0, penalty=[7], gap=5, cql_alpha=1 (by hand: -2)", (_t(0.0), _t([7.0]), 5.0, 1.0)),
        ("penalty below the gap: the loss is positive", (_t(0.5), _t([2.0]), 5.0, 5.0)),
        ("per-critic penalties [3, 9] are averaged", (_t(-1.0), _t([3.0, 9.0]), 5.0, 1.0)),
        ("log_alpha'=20: alpha' is clamped at 1e6", (_t(20.0), _t([6.0]), 5.0, 1.0)),
    ], atol=1e-3)
    for description, penalty, gap in (("penalty 7 > gap 5: a descent step raises alpha'", 7.0, 5.0),
                                      ("penalty 2 < gap 5: a descent step lowers alpha'", 2.0, 5.0)):
        def grad_of(f, penalty=penalty, gap=gap):
            log_a = _t(0.3, requires_grad=True)
            out = f(log_a, _t([penalty]), gap, 1.0)
            return torch.autograd.grad(out, log_a)[0]
        c.compare(f"{description} (gradient on log alpha')", lambda g=grad_of: g(fn),
                  Ref(lambda g=grad_of: g(lagrange_loss)))
    _check_detached(c, fn, (_t(0.0, requires_grad=True), _t([4.0, 6.0], requires_grad=True), 5.0, 1.0), 1,
                    "penalty", "penalty requires grad (it belongs to the critic's graph): the loss must not reach it")
    c.report()


def check_soft_clipped_double_q(fn) -> None:
    """Task: ``lambda * min(q1, q2) + (1 - lambda) * max(q1, q2)``."""
    from ..bcq import soft_clipped_double_q
    _check_cases("soft_clipped_double_q", fn, soft_clipped_double_q, [
        ("q1=[1, 5], q2=[3, 2], lambda=0.75 (by hand: [1.5, 2.75])", (_t([1.0, 5.0]), _t([3.0, 2.0]), 0.75)),
        ("lambda=1: clipped double Q, the minimum", (_randn(5, seed=16), _randn(5, seed=17), 1.0)),
        ("lambda=0: the maximum", (_randn(5, seed=18), _randn(5, seed=19), 0.0)),
        ("random (4, 10) candidates, lambda=0.75", (_randn(4, 10, seed=20), _randn(4, 10, seed=21), 0.75)),
        ("q1 == q2: both", (_t([2.0, -3.0]), _t([2.0, -3.0]), 0.75)),
    ]).report()


def check_vae_loss(fn) -> None:
    """Task: ``mean (recon - a)^2 + kl_weight * mean KL(N(mean, std^2) || N(0, 1))``."""
    from ..bcq import vae_loss
    _check_cases("vae_loss", fn, vae_loss, [
        ("recon=[[0.5]], a=[[0]], mean=[[0]], std=[[1]]: the KL is 0 (loss 0.25)",
         (_t([[0.5]]), _t([[0.0]]), _t([[0.0]]), _t([[1.0]]), 0.5)),
        ("perfect reconstruction, mean=[[1, 0]], std=[[1, 2]] (KL only)",
         (_t([[0.2, -0.3]]), _t([[0.2, -0.3]]), _t([[1.0, 0.0]]), _t([[1.0, 2.0]]), 0.5)),
        ("random batch: actions (8, 3), latent (8, 6)",
         (_randn(8, 3, seed=22), _randn(8, 3, seed=23), _randn(8, 6, seed=24), _randn(8, 6, seed=25).exp(), 0.5)),
        ("kl_weight=0: the reconstruction error only",
         (_randn(4, 2, seed=26), _randn(4, 2, seed=27), _randn(4, 4, seed=28), _randn(4, 4, seed=29).exp(), 0.0)),
        ("small std 0.05 (log std^2 is large and negative)",
         (_randn(2, 1, seed=30), _randn(2, 1, seed=31), _t([[0.1, 0.0], [0.0, 0.2]]), _t([[0.05, 0.05], [0.1, 0.5]]), 0.5)),
    ]).report()


def check_critic_target(fn) -> None:
    """Task: BCQ's ``y = r + gamma (1 - done) max_j [soft_clipped_double_q(Q'_1, Q'_2)](s', a_j)``."""
    from ..bcq import critic_target
    _check_cases("critic_target", fn, critic_target, [
        ("r=[1], done=[0], next_q1=[[1, 4]], next_q2=[[2, 3]], gamma=0.9, lambda=0.75 (by hand: 1 + 0.9 * 3.25)",
         (_t([1.0]), _t([0.0]), _t([[1.0, 4.0]]), _t([[2.0, 3.0]]), 0.9, 0.75)),
        ("done=[1]: the target is the reward", (_t([2.0]), _t([1.0]), _t([[10.0, 20.0]]), _t([[5.0, 6.0]]), 0.99, 0.75)),
        ("one candidate per next state", (_randn(3, seed=32), _t([0.0, 1.0, 0.0]), _randn(3, 1, seed=33),
                                           _randn(3, 1, seed=34), 0.99, 0.75)),
        ("random batch of 5 with 10 candidates", (_randn(5, seed=35), (_randn(5, seed=36) > 1).float(),
                                                  _randn(5, 10, seed=37), _randn(5, 10, seed=38), 0.99, 0.75)),
    ]).report()


def check_bcq_action_mask(fn) -> None:
    """Task: discrete BCQ's mask ``G(a|s) / max_a' G(a'|s) >= threshold`` from log-probabilities."""
    import torch
    from ..discrete import bcq_action_mask
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    _check_cases("bcq_action_mask", fn, bcq_action_mask, [
        ("probs=[0.5, 0.3, 0.15, 0.05], threshold=0.3 (ratios 1, 0.6, 0.3, 0.1)", (probs.log(), 0.3)),
        ("threshold=0: every action allowed", (probs.log(), 0.0)),
        ("threshold=1: only the most likely action", (probs.log(), 1.0)),
        ("a state where no action reaches probability 0.3 (the threshold is relative)",
         (torch.tensor([[0.25, 0.25, 0.2, 0.2, 0.1]]).log(), 0.5)),
        ("tiny probabilities: log-probs [-200, -201, -210] (ratios 1, e^-1, e^-10)",
         (torch.tensor([[-200.0, -201.0, -210.0]]), 0.3)),
    ]).report()

