"""Install target servers into their own venvs, and SDK releases into folders of their own, once, idempotently.

What a target venv holds is its family's to say (``ServerFamily.own_install`` and ``requirements``).
Torch (imported at module level on SkyRL's sampling path) is the CUDA build
on PyPI, ~4.5 GB with its nvidia wheels: it is installed once into a shared
``_torch`` venv and every target venv sees it through a ``.pth`` file. Each
venv gets a stamp file naming what was installed; a matching stamp means
nothing to do.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from faultload.model.sdk import SDK_PACKAGE, sdk_version
from faultload.model.target import TargetSpec
from faultload.targets.family import family_of

TORCH_REQUIREMENT = "torch==2.13.0"
STAMP = "faultload-installed.json"
Log = Callable[[str], None]


class InstallError(RuntimeError):
    pass


def _run(cmd: list[str], log: Log, what: str) -> None:
    log(f"  $ {' '.join(cmd)}")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
        raise InstallError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _stamp_matches(venv: Path, wanted: dict) -> bool:
    stamp = venv / STAMP
    try:
        return json.loads(stamp.read_text()) == wanted and (venv / "bin" / "python").exists()
    except (OSError, ValueError):
        return False


def _make_venv(venv: Path, log: Log) -> None:
    if not (venv / "bin" / "python").exists():
        _run([sys.executable, "-m", "venv", str(venv)], log, f"creating venv {venv}")


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def ensure_shared_torch(targets_dir: Path, log: Log) -> Path:
    """The shared torch venv's site-packages, installing torch if needed.

    The path is resolved: a workspace whose ``targets`` is a symlink (a CI
    cache, a scratch workspace sharing installed targets) must not write the
    link's path into a target's ``.pth`` and stamp, or the venv breaks when the
    link goes and is reinstalled each time it is reached another way.
    """
    venv = targets_dir.resolve() / "_torch"
    wanted = {"torch": TORCH_REQUIREMENT}
    if not _stamp_matches(venv, wanted):
        started = time.monotonic()
        log(f"installing {TORCH_REQUIREMENT} once into {venv} (shared by every target venv)")
        _make_venv(venv, log)
        _run([str(venv / "bin" / "pip"), "install", "-q", TORCH_REQUIREMENT], log, "installing torch")
        (venv / STAMP).write_text(json.dumps(wanted))
        log(f"torch installed in {time.monotonic() - started:.0f}s")
    return site_packages(venv)


def target_python(targets_dir: Path, spec: TargetSpec) -> Path:
    return targets_dir / spec.venv_name / "bin" / "python"


def is_installed(targets_dir: Path, spec: TargetSpec) -> bool:
    venv = targets_dir / spec.venv_name
    return (venv / STAMP).exists() and (venv / "bin" / "python").exists()


def index_versions(package: str, timeout_s: float = 60.0) -> list[str] | None:
    """The releases of ``package`` on the package index (pip's, every Python's), None when the index could not say.

    ``pip index versions`` (pip's own view of the index, with the same
    configuration as the install that follows) is asked with
    ``--ignore-requires-python``: SkyRL 0.4.0 declares Python >= 3.12 and
    would otherwise be hidden on 3.11, where it is installed the same way.
    """
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "index",
        "versions",
        package,
        "--ignore-requires-python",
        "--disable-pip-version-check",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if "No matching distribution found" in proc.stderr:
        return []
    for line in proc.stdout.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return None


def check_release_exists(targets_dir: Path, spec: TargetSpec, versions=index_versions) -> None:
    """InstallError in one line for a release the index does not have, before anything is built or installed.

    An installed release needs no index; an index that cannot be asked (no
    network, an old pip) is no verdict, and the install itself says why it fails.
    """
    if spec.kind != "release" or is_installed(targets_dir, spec):
        return
    _check_on_index(family_of(spec).package, spec.version or "", spec.text, versions)


def _check_on_index(package: str, version: str, text: str, versions: Callable[[str], list[str] | None]) -> None:
    known = versions(package)
    if known is not None and version not in known:
        listed = ", ".join(sorted(known, key=_version_key)[-8:]) or "none"
        raise InstallError(f"{text}: no such release on the package index ({package} releases there: {listed})")


def _version_key(version: str) -> tuple:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def ensure_target(targets_dir: Path, spec: TargetSpec, log: Log) -> Path:
    """Install ``spec`` into its venv if needed; return the venv's python.

    A venv this call created is removed again when its install fails: a
    failed install leaves nothing behind (a venv that was there stays).
    """
    if spec.kind == "url":
        raise InstallError("url= targets are not installed by faultload")
    torch_site = ensure_shared_torch(targets_dir, log) if family_of(spec).needs_torch else None
    venv = targets_dir / spec.venv_name
    created = not venv.exists()
    try:
        return _install_target(venv, spec, torch_site, log)
    except BaseException:
        if created:
            shutil.rmtree(venv, ignore_errors=True)
        raise


def _install_target(venv: Path, spec: TargetSpec, torch_site: Path | None, log: Log) -> Path:
    family = family_of(spec)
    requirements = family.requirements(spec)
    wanted = {
        "target": spec.text,
        "requirements": hashlib.sha1(json.dumps(requirements).encode()).hexdigest(),
        "torch": str(torch_site) if torch_site is not None else None,
    }
    if not _stamp_matches(venv, wanted):
        started = time.monotonic()
        log(f"installing target {spec.text} into {venv}")
        _make_venv(venv, log)
        if torch_site is not None:
            (site_packages(venv) / "_faultload_shared_torch.pth").write_text(f"{torch_site}\n")
        pip = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
        _run(pip + family.own_install(spec), log, f"installing {spec.text}")
        _run(pip + requirements, log, "installing the server's runtime modules")
        (venv / STAMP).write_text(json.dumps(wanted))
        log(f"target {spec.text} ready in {time.monotonic() - started:.0f}s")
    return venv / "bin" / "python"


def sdk_folder(sdks_dir: Path, version: str) -> Path:
    """Where SDK release ``version`` and its dependencies are installed (``pip install --target``), put first on a
    sdk-client worker's ``sys.path``."""
    return sdks_dir / f"{SDK_PACKAGE}-{version}"


def sdk_installed(sdks_dir: Path, version: str) -> bool:
    return (sdk_folder(sdks_dir, version) / STAMP).exists()


def ensure_sdk_release(sdks_dir: Path, release: str, log: Log) -> Path:
    """:func:`ensure_sdk` for a release as a user names it (``tinker==X.Y.Z``); ValueError for a malformed name."""
    return ensure_sdk(sdks_dir, sdk_version(release), log)


def ensure_sdk(sdks_dir: Path, version: str, log: Log, versions=index_versions) -> Path:
    """SDK release ``version`` installed (with its own dependencies) into its folder if needed; the folder.

    A release the index does not have is an InstallError in one line before anything is written, and a folder
    this call created is removed again when the install fails: nothing is left behind.
    """
    folder = sdk_folder(sdks_dir, version)
    if sdk_installed(sdks_dir, version):
        return folder
    _check_on_index(SDK_PACKAGE, version, f"{SDK_PACKAGE}=={version}", versions)
    created = not folder.exists()
    try:
        started = time.monotonic()
        log(f"installing {SDK_PACKAGE}=={version} into {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--upgrade",
                "--target",
                str(folder),
                f"{SDK_PACKAGE}=={version}",
            ],
            log,
            f"installing {SDK_PACKAGE}=={version}",
        )
        (folder / STAMP).write_text(json.dumps({"sdk": f"{SDK_PACKAGE}=={version}"}))
        log(f"{SDK_PACKAGE}=={version} ready in {time.monotonic() - started:.0f}s")
    except BaseException:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder
