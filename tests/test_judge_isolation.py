"""The grading child is isolated by the operating system (issue 70): namespaces made by the forked child itself
(minirl.classroom.sandbox.isolate).

A submission's answer cell tries every route the audit hook does not see, to read what it must not (the solutions,
the book's exercises page, another student's notebook, the git history, minirl's own sources) and to write outside its
folder (the repository, the grader's package, the class's folder, the temporary folder): a path relative to a directory
descriptor, a symlink, ``/proc/<grader>/root`` and ``/proc/<grader>/mem``, sqlite, ctypes' own ``open(2)``, unmounting
what hides the files, a new namespace of its own. It prints what each route got; every read must come back empty or
refused, every write refused, and nothing may appear outside. Skipped where the machine offers no user namespaces
(the grader then says so on its first line: test_the_grader_says_how_it_isolates).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minirl.classroom import grader, release

from test_grading import NB, _answers, filled, write

SOLUTION = release.SOLUTIONS / f"{NB}.ipynb"
SECRETS = {"solution": str(SOLUTION), "exercises page": str(release.BOOK_PAGE),
           "git history": str(release.REPO / ".git" / "HEAD"), "a minirl source": str(release.REPO / "minirl" / "iql.py"),
           "the grader's source": str(release.REPO / "minirl" / "classroom" / "grader.py")}

ROUTES = r'''
import ctypes, json, os, sqlite3
_found = {}
def _try(name, f):
    try:
        out = f()
        _found[name] = out if isinstance(out, (int, str)) else repr(out)
    except BaseException as e:
        _found[name] = "refused: " + type(e).__name__
libc = ctypes.CDLL(None, use_errno=True)
def _c_read(path):
    fd = libc.open(path.encode(), os.O_RDONLY)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "open")
    buf = ctypes.create_string_buffer(1 << 16)
    n = libc.read(fd, buf, 1 << 16)
    return n
def _c_write(path):
    fd = libc.open(path.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "open")
    return libc.write(fd, b"pwned", 5)
def _dirfd_read(path):
    d = os.open(os.path.dirname(path), os.O_RDONLY)
    fd = os.open(os.path.basename(path), os.O_RDONLY, dir_fd=d)
    return len(os.read(fd, 1 << 16))
def _dirfd_write(path):
    d = os.open(os.path.dirname(path), os.O_RDONLY)
    fd = os.open(os.path.basename(path), os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d)
    return os.write(fd, b"pwned")
def _symlink_read(path):
    os.symlink(os.path.dirname(path), "link_" + str(len(_found)))
    return _c_read("link_" + str(len(_found)) + "/" + os.path.basename(path))
for name, path in SECRETS.items():
    _try("read " + name + " with ctypes", lambda: _c_read(path))
    _try("read " + name + " through a dir_fd", lambda: _dirfd_read(path))
    _try("read " + name + " through a symlink", lambda: _symlink_read(path))
    _try("read " + name + " through /proc/<grader>/root", lambda: _c_read(f"/proc/{os.getppid()}/root{path}"))
_try("read the grader's memory", lambda: len(open(f"/proc/{os.getppid()}/mem", "rb").read(1)))
_try("read another student's notebook", lambda: _c_read(OTHER))
_try("unmount what hides the solutions", lambda: libc.umount2(SECRETS["solution"].encode(), 2) or
     _c_read(SECRETS["solution"]))
_try("a new namespace, then unmount", lambda: (libc.unshare(0x10000000 | 0x00020000), libc.umount2(
    os.path.dirname(SECRETS["solution"]).encode(), 2), _c_read(SECRETS["solution"]))[-1])
for name, path in OUTSIDE.items():
    _try("write " + name + " with ctypes", lambda: _c_write(path + ".c"))
    _try("write " + name + " through a dir_fd", lambda: _dirfd_write(path + ".d"))
    _try("write " + name + " with sqlite", lambda: sqlite3.connect(path + ".db").execute("create table t (x)") and 1)
print("FINDINGS " + json.dumps(_found))
'''


def _run(tmp_path, monkeypatch, isolation: str = ""):
    """One attacking student and one honest one, graded; returns (what the routes got, the honest rows)."""
    monkeypatch.setattr(grader, "_ISOLATION", [])
    monkeypatch.setenv("MINIRL_GRADER_ISOLATION", isolation)
    folder = tmp_path / "class"
    other = write(folder, "ana", NB, filled(NB))
    outside = {"the repository": str(release.REPO / "pwned"), "the grader's package":
               str(release.REPO / "minirl" / "classroom" / "pwned"), "the class's folder": str(folder / "pwned"),
               "the temporary folder": str(tmp_path / "pwned")}
    attack = (_answers(NB)["policy_transition"] + f"\nSECRETS = {SECRETS!r}\nOTHER = {str(other)!r}\n"
              f"OUTSIDE = {outside!r}\n" + ROUTES)
    path = write(folder, "eve", NB, filled(NB, replace={"policy_transition": attack}))
    specs = grader.load_checks()
    jobs = [grader.prepare(s, NB, p, specs[NB]) for s, p in (("eve", path), ("ana", other))]
    try:
        grader.run_jobs(jobs, [str(release.SOLUTIONS), str(folder.resolve())], 2)
        outputs = [r.get("output", "") for r in grader._records(jobs[0]) if r["type"] == "end"]
        honest = grader.results_of(jobs[1])
    finally:
        for job in jobs:
            grader.cleanup(job)
    lines = [ln for out in outputs for ln in out.splitlines() if ln.startswith("FINDINGS ")]
    assert lines, outputs
    written = [p + ext for p in outside.values() for ext in (".c", ".d", ".db") if os.path.exists(p + ext)]
    for p in written:
        os.remove(p)
    return json.loads(lines[0][len("FINDINGS "):]), honest, written


def _leaks(found: dict) -> dict:
    """The routes that got something: a read of more than 0 bytes, a write of more than 0 bytes."""
    return {k: v for k, v in found.items() if isinstance(v, int) and v > 0
            or isinstance(v, str) and not v.startswith("refused") and v not in ("0", "-1", "None")}


needs_namespaces = pytest.mark.skipif(grader.isolation() is not None, reason=str(grader.isolation()))


@needs_namespaces
def test_no_route_reads_or_writes_what_it_must_not(tmp_path, monkeypatch):
    for path in SECRETS.values():
        assert Path(path).stat().st_size > 0  # there to be read
    found, honest, written = _run(tmp_path, monkeypatch)
    assert len(found) >= 35, found
    assert _leaks(found) == {} and written == [], (_leaks(found), written)
    assert all(r.passed for r in honest if r.level != "written"), [(r.task, r.status) for r in honest]


@needs_namespaces
def test_without_isolation_those_routes_get_through(tmp_path, monkeypatch):
    """What the namespaces are for: with them off (MINIRL_GRADER_ISOLATION=off) the same answer reads the solutions
    and writes outside its folder, past the audit hook."""
    found, _, written = _run(tmp_path, monkeypatch, "off")
    leaks = _leaks(found)
    assert any(k.startswith("read solution") for k in leaks) and written, found


def test_the_grader_says_how_it_isolates(monkeypatch, capsys, tmp_path):
    from minirl.classroom import cli
    monkeypatch.setattr(grader, "_ISOLATION", ["no OS isolation: this kernel refuses unprivileged user namespaces"])
    line = grader.isolation_line()
    assert line.startswith("WARNING: no OS isolation")
    monkeypatch.setattr(grader, "_ISOLATION", [None])
    assert grader.isolation_line().startswith("isolation: each notebook runs in its own user, mount and network")
    write(tmp_path, "ana", NB, "{not json")  # graded without running anything
    assert cli.main(["grade", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("isolation:")


@needs_namespaces
def test_the_temporary_folder_outside_the_grader_s_own_stays_readable(tmp_path, monkeypatch):
    """CI keeps its virtual environment and datasets in /tmp: the child's namespace hides the grading run's own
    folder (the other children's), not the whole temporary folder, else the child cannot import what it imports late
    (matplotlib, torch) and every notebook dies (the CI failure of stop 74: exit status 70)."""
    import tempfile
    temp = tmp_path / "tmp"
    (temp / "venv").mkdir(parents=True)
    (temp / "venv" / "site.txt").write_text("visible")
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(grader, "_ISOLATION", [])
    folder = tmp_path / "class"
    probe = _answers(NB)["policy_transition"] + f"\nprint('READ ' + open({str(temp / 'venv' / 'site.txt')!r}).read())\n"
    path = write(folder, "eve", NB, filled(NB, replace={"policy_transition": probe}))
    specs = grader.load_checks()
    job = grader.prepare("eve", NB, path, specs[NB])
    try:
        grader.run_jobs([job], [str(release.SOLUTIONS), str(folder.resolve())], 1)
        outputs = "".join(r.get("output", "") for r in grader._records(job) if r["type"] == "end")
        rows = grader.results_of(job)
    finally:
        grader.cleanup(job)
    assert "READ visible" in outputs, outputs
    assert all(r.passed for r in rows if r.level != "written"), [(r.task, r.status, r.message) for r in rows]
    assert list(temp.iterdir()) == [temp / "venv"]  # the grading run's folder removed with its last job


def _without_namespaces(command: str) -> subprocess.CompletedProcess | None:
    """Run ``command`` (sh) where making a user namespace fails as on a kernel that refuses them: inside a user
    namespace of its own whose limit on further ones is 0 (``unshare`` then fails with ENOSPC). ``None`` where this
    machine cannot make that namespace."""
    import shutil
    if shutil.which("unshare") is None or grader.isolation() is not None:
        return None
    probe = subprocess.run(["unshare", "-U", "-r", "sh", "-c", "echo 0 > /proc/sys/user/max_user_namespaces && "
                            "! unshare -U true 2>/dev/null"], capture_output=True)
    if probe.returncode != 0:
        return None
    return subprocess.run(["unshare", "-U", "-r", "sh", "-c", "echo 0 > /proc/sys/user/max_user_namespaces && "
                           + command], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MINIRL_GRADER_ISOLATION": ""})


def test_where_the_kernel_refuses_namespaces_the_grader_says_so_and_still_grades(tmp_path):
    """The grader's first line warns, and grading goes on, where the kernel refuses the namespaces (made here for
    real, not by setting ``MINIRL_GRADER_ISOLATION``). The same answer then reads the solutions past the audit hook
    (test_without_isolation_those_routes_get_through): what the instructors' page says such a machine leaves open."""
    folder = tmp_path / "class"
    write(folder, "ana", NB, filled(NB))
    done = _without_namespaces(f"{sys.executable} -m minirl.classroom grade {folder} --notebooks {NB}")
    if done is None:
        pytest.skip("this machine cannot make a user namespace that refuses further ones")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr[-2000:]
    assert lines[0].startswith("WARNING: no OS isolation: this kernel refuses unprivileged user namespaces"), lines[:3]
    ana = [ln for ln in lines if ln.startswith("| ana")]
    assert ana and not any("failed" in ln or "error" in ln for ln in ana), lines
