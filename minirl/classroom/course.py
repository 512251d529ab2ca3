"""A course folder: an instructor's own exercises, outside the package, graded like the book's.

The folder is found through one setting, the environment variable ``MINIRL_COURSE`` (:data:`ENV`); the classroom's
``make-student``, ``check``, ``grade`` and ``class-release`` take ``--course DIR``, which sets it for that command
and the processes it starts. Its layout::

    DIR/course.toml                 what the folder holds (below)
    DIR/<checkers>.py               checker modules: check_<task> functions, written as minirl.classroom's own
    DIR/solutions/<name>.ipynb      one reference notebook per exercise (cell tags as notebooks/exercises/solutions)
    DIR/exercises/                  written by make-student: the student copies, checks.json, course_table.md

``course.toml``::

    checkers = ["returns_checks.py"]        # the checker modules, plain .py files in DIR

    [exercises.07_returns]                  # the reference notebook DIR/solutions/07_returns.ipynb
    chapter = "offline_rl"                  # optional: the book's prose page it follows (book/offline_rl.md)
    reading = ["01_offline_rl"]             # optional: the chapter notebooks read before it (notebooks/*.ipynb)
    warm = {returns-table = "returns_checks.reference_table"}  # optional: computed once by the grader, before
                                            # it forks (agent_checks._cached(key, function), as sandbox.WARM)

The checker modules are loaded once per process as ``minirl_course.<name>`` (:func:`load`); the grader takes their
``check_*`` functions with the built-in ones (:func:`minirl.classroom.sandbox._checker_modules`), and a notebook
imports them as it imports the built-in checkers: ``from minirl.classroom import check_discounted_return``. While a
submission runs, the whole course folder is hidden from it as ``notebooks/exercises/solutions`` is. A bad course file
is a one-line :class:`CourseError` naming the file and the field.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

ENV = "MINIRL_COURSE"
CONFIG = "course.toml"
PACKAGE = "minirl_course"  # the checker modules' package in sys.modules
KEYS = ("checkers", "exercises")
EXERCISE_KEYS = ("chapter", "reading", "warm")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class CourseError(ValueError):
    """A bad course folder or course file: a one-line message naming the file and the field."""


@dataclass
class Exercise:
    name: str
    chapter: str | None = None
    reading: list[str] = field(default_factory=list)
    warm: dict[str, tuple[str, str]] = field(default_factory=dict)  # cache key -> (checker module, function)


@dataclass
class Course:
    folder: Path
    checker_files: list[Path]
    exercises: dict[str, Exercise]
    modules: list = field(default_factory=list)

    @property
    def config(self) -> Path:
        return self.folder / CONFIG

    @property
    def solutions(self) -> Path:
        return self.folder / "solutions"

    @property
    def out(self) -> Path:
        return self.folder / "exercises"

    @property
    def checks_file(self) -> Path:
        return self.out / "checks.json"

    def reference(self, name: str) -> Path:
        return self.solutions / f"{name}.ipynb"

    def checkers(self) -> dict:
        """``check_<task>`` -> the function, from the course's checker modules."""
        return {k: v for m in self.modules for k, v in vars(m).items() if k.startswith("check_") and callable(v)}

    def chapters(self) -> dict[str, tuple[str | None, list[str]]]:
        """As :data:`minirl.classroom.release.CHAPTERS`: exercise -> (prose page, chapter notebooks)."""
        return {name: (ex.chapter, ex.reading) for name, ex in self.exercises.items()}

    def check_references(self) -> None:
        """Every exercise has its reference notebook, and every reference notebook is an exercise of course.toml."""
        for name in self.exercises:
            if not self.reference(name).is_file():
                raise CourseError(f"{self.config}: exercises.{name}: no reference notebook solutions/{name}.ipynb")
        listed = set(self.exercises)
        for path in sorted(self.solutions.glob("*.ipynb")):
            if path.stem not in listed:
                raise CourseError(f"{self.config}: exercises: solutions/{path.name} has no [exercises.{path.stem}] "
                                  "table")

    def check_tasks(self, tasks: dict[str, list[str]], where) -> None:
        """Each task (``{exercise: [task, ...]}``) has its checker in the course's modules and no built-in task has its
        name; ``where(exercise)`` is the start of the error's line."""
        checkers, builtin = self.checkers(), builtin_tasks()
        for name, names in tasks.items():
            for task in names:
                if task in builtin:
                    raise CourseError(f"{where(name)}: task {task}: a built-in task of minirl.classroom has that name; "
                                      "give the course's task another one")
                if f"check_{task}" not in checkers:
                    files = ", ".join(f.name for f in self.checker_files)
                    raise CourseError(f"{where(name)}: task {task}: its checker cell calls check_{task}, which no "
                                      f"checker module of the course defines ({files})")


def builtin_exercises() -> set[str]:
    from .layout import CHAPTERS, SOLUTIONS
    return set(CHAPTERS) | {p.stem for p in SOLUTIONS.glob("*.ipynb")}


def builtin_tasks() -> set[str]:
    """The tasks of the built-in checker modules (:data:`minirl.classroom.CHECKER_MODULES`)."""
    from .exports import CHECKER_MODULES
    out = set()
    for m in CHECKER_MODULES:
        module = importlib.import_module(f"{__package__}.{m}")
        out |= {k[len("check_"):] for k, v in vars(module).items() if k.startswith("check_") and callable(v)}
    return out


_LOADED: dict[str, Course] = {}


def current() -> Course | None:
    """The course named by ``$MINIRL_COURSE`` (loaded once per process), or ``None`` where it is unset."""
    folder = os.environ.get(ENV)
    if not folder:
        return None
    return load(folder, f"{ENV}={folder}")


def use(folder: str | os.PathLike) -> Course:
    """``--course DIR``: load the course and set ``$MINIRL_COURSE`` to it, for this process and those it starts."""
    course = load(folder, f"--course {folder}")
    os.environ[ENV] = str(course.folder)
    return course


def load(folder: str | os.PathLike, setting: str = "") -> Course:
    """The course in ``folder``, its checker modules imported (once per process and folder)."""
    path = Path(os.path.realpath(os.path.expanduser(str(folder))))
    if str(path) in _LOADED:
        course = _LOADED[str(path)]
        if sys.modules.get(f"{PACKAGE}.{course.checker_files[0].stem}") is not course.modules[0]:
            _register(course)  # another course was loaded since (tests)
        return course
    if not path.is_dir():
        raise CourseError(f"{setting or folder}: no such folder (expected a course folder holding {CONFIG})")
    config = path / CONFIG
    if not config.is_file():
        raise CourseError(f"{config}: no such file (a course folder holds {CONFIG}: its checker modules and "
                          "exercises)")
    import tomllib
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CourseError(f"{config}: not valid TOML ({e})") from None
    course = Course(path, _checker_files(config, data), _exercises(config, data))
    _import(course)
    for name, ex in course.exercises.items():
        for key, (module, function) in ex.warm.items():
            m = next(m for m in course.modules if m.__name__ == f"{PACKAGE}.{module}")
            if not callable(getattr(m, function, None)):
                raise CourseError(f"{config}: exercises.{name}.warm.{key}: {module}.py has no function {function}")
    _LOADED[str(path)] = course
    return course


def _checker_files(config: Path, data: dict) -> list[Path]:
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise CourseError(f"{config}: unknown key {unknown[0]!r} (expected {', '.join(KEYS)})")
    files = data.get("checkers")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise CourseError(f"{config}: checkers: expected a list of the course's checker modules, e.g. "
                          "checkers = [\"my_checks.py\"]")
    out = []
    for f in files:
        p = config.parent / f
        if Path(f).is_absolute() or ".." in Path(f).parts or p.suffix != ".py" or not p.stem.isidentifier():
            raise CourseError(f"{config}: checkers: {f!r} is not a .py file of the course folder named as a Python "
                              "module (letters, digits, _)")
        if not p.is_file():
            raise CourseError(f"{config}: checkers: no file {f} in {config.parent}")
        if any(q.stem == p.stem for q in out):
            raise CourseError(f"{config}: checkers: two modules named {p.stem}")
        out.append(p)
    return out


def _exercises(config: Path, data: dict) -> dict[str, Exercise]:
    tables = data.get("exercises")
    if not isinstance(tables, dict) or not tables:
        raise CourseError(f"{config}: exercises: expected at least one [exercises.<name>] table (its reference "
                          "notebook is solutions/<name>.ipynb)")
    from .layout import REPO
    builtin = builtin_exercises()
    stems = {Path(p).stem for p in data["checkers"]}
    out = {}
    for name, table in tables.items():
        where = f"{config}: exercises.{name}"
        if not _NAME.fullmatch(name):
            raise CourseError(f"{where}: an exercise's name is a file name (letters, digits, _ . -)")
        if name in builtin:
            raise CourseError(f"{where}: a built-in exercise of the book has that name; give the course's another one")
        if not isinstance(table, dict):
            raise CourseError(f"{where}: expected a table ([exercises.{name}])")
        unknown = [k for k in table if k not in EXERCISE_KEYS]
        if unknown:
            raise CourseError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(EXERCISE_KEYS)})")
        ex = Exercise(name)
        chapter = table.get("chapter")
        if chapter is not None:
            if not isinstance(chapter, str) or not (
                    (REPO / "book" / f"{chapter}.md").is_file() or (REPO / "book" / f"{chapter}.ipynb").is_file()):
                raise CourseError(f"{where}.chapter: {chapter!r} is not a page of the book (book/<chapter>.md)")
            ex.chapter = chapter
        reading = table.get("reading", [])
        if not isinstance(reading, list) or not all(isinstance(n, str) for n in reading):
            raise CourseError(f"{where}.reading: expected a list of chapter notebooks, e.g. [\"01_offline_rl\"]")
        for n in reading:
            if not (REPO / "notebooks" / f"{n}.ipynb").is_file():
                raise CourseError(f"{where}.reading: {n!r} is not a chapter notebook of the book (notebooks/{n}.ipynb)")
        ex.reading = list(reading)
        warm = table.get("warm", {})
        if not isinstance(warm, dict):
            raise CourseError(f"{where}.warm: expected a table of cache key = \"module.function\"")
        from .layout import WARM
        taken = {key for key, _, _ in WARM.values()} | {"record-runs"}
        for key, target in warm.items():
            module, _, function = target.partition(".") if isinstance(target, str) else ("", "", "")
            if module not in stems or not function.isidentifier():
                raise CourseError(f"{where}.warm.{key}: expected \"module.function\" with module one of the course's "
                                  f"checkers ({', '.join(sorted(stems))}), got {target!r}")
            if key in taken:
                raise CourseError(f"{where}.warm.{key}: a built-in reference sweep has that key; give it another")
            ex.warm[key] = (module, function)
        out[name] = ex
    return out


def _register(course: Course) -> None:
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    package = types.ModuleType(PACKAGE, "the checker modules of the course folder in $MINIRL_COURSE")
    package.__path__ = [str(course.folder)]
    sys.modules[PACKAGE] = package
    for module in course.modules:
        sys.modules[module.__name__] = module
        setattr(package, module.__name__.rsplit(".", 1)[1], module)


def _import(course: Course) -> None:
    """Import the checker modules as ``minirl_course.<name>`` (replacing another course's), and check their tasks."""
    _register(course)
    package = sys.modules[PACKAGE]
    builtin, seen = builtin_tasks(), {}
    for path in course.checker_files:
        name = f"{PACKAGE}.{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - the instructor's own code: one line naming the file
            del sys.modules[name]
            raise CourseError(f"{path}: importing it failed ({type(e).__name__}: {e})") from None
        setattr(package, path.stem, module)
        course.modules.append(module)
        for k, v in vars(module).items():
            if not (k.startswith("check_") and callable(v)):
                continue
            if k[len("check_"):] in builtin:
                raise CourseError(f"{path}: {k}: the task {k[len('check_'):]} is a built-in one of minirl.classroom; "
                                  "give the course's task another name")
            if k in seen:
                raise CourseError(f"{path}: {k}: {seen[k]} defines it too")
            seen[k] = path.name
