"""An SDK release run from a folder of its own (``--sdk``): the workers import it, the harness checks they did,
and a trial that names a release not installed (or workers Ray runs) is refused before anything starts."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import multiprocessing as mp
from pathlib import Path

import pytest
from conftest import WORKDIR, require_built

from faultload.client.job import WorkerJob
from faultload.client.sdk import check_sdk_release
from faultload.client.workers import WorkerPool, sys_path_first
from faultload.host.workspace import Workspace
from faultload.model.sdk import SDK_RELEASES, sdk_version
from faultload.model.shape import LoadShape
from faultload.run.jobs import pools_for_sdk
from faultload.targets.install import STAMP, sdk_folder, sdk_installed

OTHER = SDK_RELEASES[1]


def _tinker_seen(out) -> None:
    """A spawned child's view: where ``tinker`` would be imported from, and the version its metadata says."""
    out.put((importlib.util.find_spec("tinker").origin, importlib.metadata.version("tinker")))


def _child_sees(folder: str | None) -> tuple[str, str]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with sys_path_first(folder):
        proc = ctx.Process(target=_tinker_seen, args=(out,))
        proc.start()
    try:
        return out.get(timeout=60)
    finally:
        proc.join(timeout=30)


def test_a_worker_spawned_with_an_sdk_folder_imports_the_release_there_and_others_do_not():
    require_built(f"tinker=={OTHER}", sdk_installed(WORKDIR / "sdks", OTHER), f"faultload setup --sdk tinker=={OTHER}")
    folder = str(sdk_folder(WORKDIR / "sdks", OTHER))
    origin, version = _child_sees(folder)
    assert origin.startswith(folder + "/") and version == OTHER
    origin, version = _child_sees(None)  # the swap is undone: the next spawn is as before
    assert not origin.startswith(folder) and version == SDK_RELEASES[0]


def test_a_worker_that_imported_another_release_is_the_harness_error_naming_both():
    shape = LoadShape(requests=1, client="sdk", sdk="tinker==9.9.9")
    job = WorkerJob(0, "http://127.0.0.1:9", None, "s", "m", 0, 1, 1, shape, 0.0, 30.0)
    with pytest.raises(RuntimeError, match=r"imported tinker 0\.25\.0 from .*, not tinker==9\.9\.9"):
        check_sdk_release(job)
    check_sdk_release(
        WorkerJob(0, "http://127.0.0.1:9", None, "s", "m", 0, 1, 1, LoadShape(requests=1, client="sdk"), 0.0, 30.0)
    )  # "": the installed one


def test_a_release_not_installed_or_on_ray_is_refused_in_one_line(tmp_path: Path):
    workspace = Workspace(tmp_path)
    shape = LoadShape(requests=1, client="sdk", sdk="tinker==0.38.0")
    with pytest.raises(
        ValueError, match=r"^tinker==0\.38\.0 is not installed in .* \(faultload setup --sdk tinker==0\.38\.0\)$"
    ):
        pools_for_sdk(WorkerPool, shape, workspace)
    folder = sdk_folder(workspace.sdks, "0.38.0")
    folder.mkdir(parents=True)
    (folder / STAMP).write_text("{}")
    with pytest.raises(ValueError, match="runs on this machine's workers only"):
        pools_for_sdk(lambda jobs: None, shape, workspace)  # a Ray cluster's pool factory
    pools = pools_for_sdk(WorkerPool, shape, workspace)
    assert callable(pools.spawn_early)
    assert pools_for_sdk(WorkerPool, LoadShape(requests=1, client="sdk"), workspace) is WorkerPool


@pytest.mark.parametrize(
    "text, problem",
    [
        ("tinker==0.38.0", None),
        ("tinkr==0.38.0", "expected tinker==X.Y.Z"),
        ("tinker>=0.38", "expected tinker==X.Y.Z"),
        ("tinker==latest", "is not X.Y.Z"),
    ],
)
def test_an_sdk_release_is_named_tinker_equals_a_version(text: str, problem: str | None):
    if problem is None:
        assert sdk_version(text) == "0.38.0"
        LoadShape(client="sdk", sdk=text).validate()
    else:
        with pytest.raises(ValueError, match=problem):
            sdk_version(text)
    with pytest.raises(ValueError, match="an sdk release needs client sdk"):
        LoadShape(client="raw", sdk="tinker==0.38.0").validate()
