"""Shared fixtures and helpers for faultload's tests.

Every wait here is bounded; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKDIR = ROOT / ".faultload"
VENV_PYTHON = WORKDIR / "venv" / "bin" / "python"
TARGETS = WORKDIR / "targets"
# Marks every process a CLI test starts (children inherit the environment), so
# leftovers are found without confusing them with other people's runs.
TAG_VAR = "FAULTLOAD_TEST_TAG"


def default_signals() -> None:
    """A child's preexec: SIGINT, SIGTERM and SIGHUP at their default disposition. A test runner started as a
    background job hands SIGINT down ignored, and faultload keeps an ignored signal ignored: a test that sends
    it must start its run as a terminal would (a fresh clone's .ci/run, started in the background, failed so)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def python_exe() -> str:
    return str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable


def target_installed(version: str, family: str = "skyrl") -> bool:
    venv = TARGETS / f"{family}-{version}"
    return (venv / "faultload-installed.json").exists() and (venv / "bin" / "python").exists()


# `make test` builds the compiled router, Toxiproxy and the targets before the tiers that need them run (it
# sets this), so there a missing one is an error of the build, never a skip; a plain `pytest` on a checkout
# not set up skips what needs them, each skip naming the command that builds it (one policy for every tool).
REQUIRE_BUILT = os.environ.get("FAULTLOAD_TESTS_REQUIRE_BUILT") == "1"


def require_built(what: str, present: bool, how: str) -> None:
    """Skip (plain pytest) or fail (make test) a test that needs ``what`` when it is not there."""
    if present:
        return
    message = f"{what} is not built: run `{how}`"
    if REQUIRE_BUILT:
        pytest.fail(f"{message} (make test builds it before this tier, so its absence is an error)", pytrace=False)
    pytest.skip(message)


def pytest_report_header(config: pytest.Config) -> str:
    """What is built, said before any test runs: a plain `pytest` on a checkout not set up skips what needs
    a missing part (the summary's skip lines, -rs, name the command), `make test` fails on it."""
    from faultload.client.compiled import find_client
    from faultload.faults.toxiproxy import find_toxiproxy
    from faultload.router.compiled import find_router

    parts = {
        "compiled router": find_router(WORKDIR / "tools") is not None,
        "compiled client": find_client(WORKDIR / "tools") is not None,
        "toxiproxy": find_toxiproxy(WORKDIR / "tools") is not None,
        **{f"skyrl=={v}": target_installed(v) for v in ("0.4.0", "0.3.0")},
        "tuft==0.2.2": target_installed("0.2.2", "tuft"),
        "hatchery==0.3.0": target_installed("0.3.0", "hatchery"),
        "twinkle==0.5.1 (make setup; slow tests only)": target_installed("0.5.1", "twinkle"),
    }
    missing = [name for name, there in parts.items() if not there]
    policy = (
        "a missing part fails the tests that need it"
        if REQUIRE_BUILT
        else "tests that need a missing part are skipped (`make setup`, `make targets`)"
    )
    return f"faultload parts: {'all built' if not missing else 'missing ' + ', '.join(missing)}; {policy}"


def require_target(version: str, family: str = "skyrl") -> None:
    require_built(f"{family}=={version} (under {TARGETS})", target_installed(version, family), "make targets")


def require_toxiproxy() -> Path:
    """Toxiproxy's binary as setup built it (or one on PATH)."""
    from faultload.faults.toxiproxy import find_toxiproxy

    binary = find_toxiproxy(WORKDIR / "tools")
    require_built("toxiproxy-server", binary is not None, "make setup")
    return binary


def require_compiled_router() -> Path:
    """The compiled router setup built for this source."""
    from faultload.router.compiled import find_router

    found = find_router(WORKDIR / "tools")
    require_built("the compiled router (faultload/router/go)", found is not None, "make setup")
    return found


def require_compiled_client() -> Path:
    """The compiled client setup built for this source."""
    from faultload.client.compiled import find_client

    found = find_client(WORKDIR / "tools")
    require_built("the compiled client (faultload/client/go)", found is not None, "make setup")
    return found


@pytest.fixture
def client_binary() -> Path:
    """The compiled client's binary (tests that hold it against the Python client)."""
    return require_compiled_client()


@pytest.fixture(params=["asyncio", "uvloop"])
def on_each_loop(request):
    """Run a coroutine (bounded to 60 s) on asyncio's loop, then on uvloop's: the harness uses both."""
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return lambda coro: uvloop.run(asyncio.wait_for(coro, 60.0))
    return lambda coro: asyncio.run(asyncio.wait_for(coro, 60.0))


@pytest.fixture
def isolated_workdir(tmp_path: Path) -> Path:
    """A private faultload folder: its own runs/, the real installed targets and SDK releases (symlinked).

    Other engineers run trials on this machine too; a private runs/ lets a test
    check that *its* trial left no directory behind.
    """
    root = tmp_path / "fl"
    root.mkdir()
    (root / "targets").symlink_to(TARGETS, target_is_directory=True)
    for shared in ("tools", "sdks"):
        if (WORKDIR / shared).exists():
            (root / shared).symlink_to(WORKDIR / shared, target_is_directory=True)
    return root


def leftover_dirs(workdir: Path) -> list[str]:
    runs = workdir / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.exists() else []


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Live processes (not zombies, not this one) whose environment carries ``tag``."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(TAG_VAR) == tag:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def end_tagged_run(proc: subprocess.Popen, tag: str) -> None:
    """After a test's run: kill it if it still runs, and every process left with its ``tag`` (only ours)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)
    for leftover in tagged_processes(tag):
        try:
            leftover.kill()
        except psutil.Error:
            pass


def named_processes_since(
    started: float,
    needles: tuple[str, ...] = (
        "faultload.router",
        "skyrl_launch.py",
        "tuft_launch.py",
        "hatchery_launch.py",
        "twinkle_launch.py",
    ),
    tags: set[str] | None = None,
) -> list[str]:
    """Live processes started at/after ``started`` (epoch s) whose cmdline contains a needle,
    restricted to those carrying one of ``tags`` when given (other people run trials here too)."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline", "create_time"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if proc.info["create_time"] + 0.01 < started or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if not any(n in cmdline for n in needles):
                continue
            if tags is not None and proc.environ().get(TAG_VAR) not in tags:
                continue
        except (psutil.Error, OSError, TypeError):
            continue
        out.append(f"{proc.pid}: {cmdline[:200]}")
    return out


def wait_until(predicate, timeout_s: float, every_s: float = 0.1):
    """Poll ``predicate`` until truthy or the bound passes; return its last value."""
    deadline = time.monotonic() + timeout_s
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(every_s)
        value = predicate()
    return value


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    tag: str

    def error_line(self) -> str:
        """The first stderr line starting with 'faultload' (the one-line error)."""
        for line in self.stderr.splitlines():
            if line.startswith("faultload"):
                return line
        return ""


def cli_env(tag: str, tmpdir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env[TAG_VAR] = tag
    env["PYTHONPATH"] = str(ROOT)
    env.pop("FAULTLOAD_HOME", None)
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def run_cli(
    args: list[str],
    timeout_s: float = 240.0,
    tmpdir: Path | None = None,
    prefix: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> CliRun:
    """Run ``python -m faultload.cli.main ARGS`` (or ``python PREFIX... ARGS``) with a bound (``env``: more
    variables for it)."""
    tag = uuid.uuid4().hex
    cmd = [python_exe(), *(prefix or ["-m", "faultload.cli.main"]), *args]
    proc = subprocess.run(
        cmd,
        cwd=ROOT,
        env={**cli_env(tag, tmpdir), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr, tag)


# --------------------------------------------------------------------------- CLI runs a unit test and its
# integration half share (tests/unit/test_cli_errors.py, test_fault_cli.py, test_confirm_preflight.py and their
# tests/integration/*_integration.py halves)


@pytest.fixture
def cli(isolated_workdir: Path, tmp_path: Path):
    """Run the CLI with a private workdir and TMPDIR; afterwards check nothing is left behind."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    started = time.time()
    runs: list[CliRun] = []

    def call(*args: str, timeout_s: float = 240.0, prefix: list[str] | None = None) -> CliRun:
        result = run_cli(
            ["run", "--workdir", str(isolated_workdir), *args], timeout_s=timeout_s, tmpdir=tmpdir, prefix=prefix
        )
        runs.append(result)
        return result

    yield call
    for result in runs:
        left = wait_until(lambda: not tagged_processes(result.tag), timeout_s=15.0)
        assert left, f"processes left behind: {[p.cmdline() for p in tagged_processes(result.tag)]}"
    # The router and the SkyRL launcher by name, among processes carrying our tags.
    tags = {r.tag for r in runs}
    named = [line for line in named_processes_since(started, tags=tags)]
    assert not named, named
    assert leftover_dirs(isolated_workdir) == []
    assert not [p.name for p in tmpdir.iterdir() if p.name.startswith("faultload-router-")]


def assert_usage_error(result: CliRun, *needles: str, one_line: bool = True) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    line = result.error_line()
    assert line, f"no line starting with 'faultload' in stderr: {result.stderr[-2000:]!r}"
    for needle in needles:
        assert needle in line, (needle, line)
    if one_line:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert lines == [line], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    return line


FAULTLOAD_PROCESS_NAMES = ("toxiproxy-server", "faultload.router", "skyrl_launch.py")


@pytest.fixture
def fault_home(tmp_path: Path) -> Path:
    """A working directory whose ``.faultload`` has the real targets and tools."""
    cwd = tmp_path / "cwd"
    (cwd / ".faultload").mkdir(parents=True)
    (cwd / ".faultload" / "targets").symlink_to(TARGETS, target_is_directory=True)
    if (WORKDIR / "tools").exists():
        (cwd / ".faultload" / "tools").symlink_to(WORKDIR / "tools", target_is_directory=True)
    return cwd


def tagged_named(tag: str) -> list[str]:
    out = []
    for proc in tagged_processes(tag):
        try:
            cmdline = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if any(n in cmdline for n in FAULTLOAD_PROCESS_NAMES):
            out.append(f"{proc.pid}: {cmdline[:200]}")
    return out


def run_faultload_run(cwd: Path, args: list[str], timeout_s: float = 60.0) -> tuple[subprocess.CompletedProcess, str]:
    tag = uuid.uuid4().hex
    env = cli_env(tag, cwd)
    proc = subprocess.run(
        [python_exe(), "-m", "faultload.cli.main", "run", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout_s,
    )
    return proc, tag


def run_with_nofile(limit: int, args: list[str], timeout_s: float = 600) -> tuple[subprocess.CompletedProcess, str]:
    tag = uuid.uuid4().hex

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    proc = subprocess.run(
        [python_exe(), "-m", "faultload.cli.main", "confirm", *args],
        cwd=ROOT,
        env=cli_env(tag),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
        preexec_fn=lower,
    )
    return proc, tag
