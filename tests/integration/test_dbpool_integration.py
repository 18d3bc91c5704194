"""The DB pool observer (``faultload/targets/skyrl_dbpool.py``) on a real pool.

Runs the real SQLAlchemy and aiosqlite of the 0.4.0 target venv, exhausts a real pool, and classifies what the
observer wrote with the harness's own log classifier. The observer on a test double of a QueuePool is in
``tests/unit/test_dbpool.py``.
"""

from __future__ import annotations

import re
import subprocess
import textwrap

import pytest
from conftest import TARGETS, require_target

from faultload.model.target import parse_target
from faultload.record.serverlog import classify_log
from faultload.targets import install, skyrl_dbpool

REAL_POOL = textwrap.dedent("""
    import asyncio, sys, time
    sys.path.insert(0, sys.argv[1])
    import skyrl_dbpool
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    ns = {"create_async_engine": create_async_engine}
    print(skyrl_dbpool.observe_pool_waits(ns, 0.2), flush=True)

    async def main():
        engine = ns["create_async_engine"](f"sqlite+aiosqlite:///{sys.argv[2]}", pool_size=1, max_overflow=0,
                                           pool_timeout=0.6)
        held = await engine.connect()
        await held.execute(text("select 1"))
        try:
            await engine.connect()  # the one connection is held: waits 0.6 s, then the pool's own TimeoutError
        except Exception as exc:
            print("raised", type(exc).__name__, flush=True)
        async def release_later():
            await asyncio.sleep(0.4)
            await held.close()
        asyncio.get_running_loop().create_task(release_later())
        second = await engine.connect()  # waits ~0.4 s for the held one
        await second.close()
        await engine.dispose()

    asyncio.run(main())
    time.sleep(1.5)  # the observer writes once a second
""")


@pytest.mark.integration
def test_a_real_exhausted_sqlalchemy_pool_is_written_to_the_log(tmp_path):
    require_target("0.4.0")
    python = install.target_python(TARGETS, parse_target("skyrl==0.4.0"))
    done = subprocess.run(
        [str(python), "-c", REAL_POOL, str(skyrl_dbpool.__file__).rsplit("/", 1)[0], str(tmp_path / "t.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "raised TimeoutError" in done.stdout
    summary = classify_log(done.stderr)
    assert list(summary.notes) == ["pool_exhausted"] and summary.clean, done.stderr[-2000:]
    lines = [
        m.groups()
        for m in re.finditer(
            r"(\d+) checkouts waited >= 0.2 s .*?, (\d+) timed out\); "
            r"QueuePool size 1, overflow 0, timeout 0.6 s",
            done.stderr,
        )
    ]
    assert summary.notes["pool_exhausted"].count == len(lines) >= 1
    assert sum(int(n) for n, _ in lines) == 2 and sum(int(t) for _, t in lines) == 1, done.stderr
