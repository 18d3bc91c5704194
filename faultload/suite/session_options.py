"""One pytest session's options as values: the plugin's options and the environment it read, resolved once.

Apart from :mod:`faultload.suite.session` (the Hypothesis profiles, the runner, the reports) so each stays
small; a bad target, switch, build, SDK release, key or cluster is a ``pytest.UsageError`` here, before any
trial.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from faultload.cluster.connect import ClusterError, check_reachable, resolve_address
from faultload.compare.judge import CompareSettings, load_compare_settings
from faultload.host.settings import find_config
from faultload.host.workspace import Workspace
from faultload.model.access import Access, access_for
from faultload.model.build import Build, parse_build
from faultload.model.target import DEFAULT_TARGET, parse_target
from faultload.model.trial import TrialConfig
from faultload.suite.baseline import NO_BASELINE, default_baseline
from faultload.suite.comparative import EXAMPLE_S as COMPARISON_EXAMPLE_S
from faultload.suite.defaults import profile_name
from faultload.suite.gate import check_base
from faultload.suite.profiles import Profile, get_profile
from faultload.targets.install import InstallError, ensure_sdk_release, is_installed


class SuiteOptions:
    """The plugin's options and the environment the plugin read, resolved once per session."""

    def __init__(self, config: pytest.Config | None = None, environ: Mapping[str, str] | None = None) -> None:
        get = (lambda name: config.getoption(name)) if config is not None else (lambda name: None)
        environ = environ or {}
        session_s = get("faultload_session_s")
        profile = _overridden_profile(
            profile_name(get("faultload_profile"), environ), get("faultload_examples"), session_s
        )
        self.rootdir = Path(str(config.rootpath)) if config is not None else Path.cwd()
        self.target: str = get("faultload_target") or DEFAULT_TARGET
        self.regress: tuple[str, ...] = tuple(get("faultload_regress") or ())
        self.fixes: tuple[str, ...] = tuple(get("faultload_fix") or ())
        try:  # a target, or a switch its family lacks, is a usage error before any trial
            TrialConfig(target=self.target, regress=self.regress, fixes=self.fixes).validate()
        except ValueError as exc:
            raise pytest.UsageError(f"--faultload-target/--faultload-regress/--faultload-fix: {exc}") from None
        self.sdk: str = get("faultload_sdk") or ""  # the SDK release of the session's sdk-client trials
        self.access = _suite_access(self.target, get, environ)
        self.workdir: str | None = get("faultload_workdir")
        self.home: str | None = environ.get("FAULTLOAD_HOME")
        self.baseline: Build | None = None
        self.baseline_note = ""  # why the session compares with a build, or why not, when that is not obvious
        self.compare_settings: CompareSettings | None = None
        self._install_sdk()
        self.base: str | None = self._base(get("faultload_base"))  # the pull-request gate's base (suite.gate)
        # a comparison that is due and cannot run (a checkout on ci whose release is not installed): why, one line;
        # its property is then a harness error, never a pass (--faultload-baseline none: not due)
        self.baseline_missing: str | None = None
        try:
            self.baseline, self.baseline_note = self._baseline(get("faultload_baseline"), profile.name)
            if self.baseline is None and self.baseline_note and get("faultload_baseline") != NO_BASELINE:
                self.baseline_missing = self.baseline_note
            if self.baseline is not None:
                self.compare_settings = load_compare_settings(self.pyproject())
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        if self.baseline is not None and session_s is None:
            # the comparison's trials come on top of the profile's session, not out of it
            profile = dataclasses.replace(
                profile, session_s=profile.session_s + profile.compare_examples * COMPARISON_EXAMPLE_S
            )
        self.profile: Profile = profile
        self.shrink_s: float | None = get("faultload_shrink_s")
        # --faultload-ray: the cluster's HOST:PORT, checked to answer now (its join waits for the first trial)
        self.ray_environ = {name: environ[name] for name in ("RAY_ADDRESS", "PYTHONPATH") if name in environ}
        self.ray: str | None = _reachable_cluster(get("faultload_ray"), environ)

    def _install_sdk(self) -> None:
        """``--faultload-sdk``'s release, installed now: a release the index lacks is a usage error before any
        trial."""
        try:
            if self.sdk:
                ensure_sdk_release(
                    self.workspace().sdks,
                    self.sdk,
                    log=lambda message: print(f"faultload: {message}", file=sys.stderr, flush=True),
                )
        except (ValueError, InstallError) as exc:
            raise pytest.UsageError(f"--faultload-sdk: {exc}") from None

    def workspace(self) -> Workspace:
        return Workspace.default(self.workdir or self.home)

    def _base(self, given: str | None) -> str | None:
        """``--faultload-base``: a launchable build of the target's family, installed; a usage error else."""
        if not given:
            return None
        try:
            base = check_base(self.target, given)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        if not is_installed(self.workspace().targets, parse_target(base)):
            raise pytest.UsageError(f"--faultload-base {base}: not installed (faultload setup --target {base})")
        return base

    def _baseline(self, given: str | None, profile: str) -> tuple[Build | None, str]:
        """``--faultload-baseline`` (``none``: no comparison), else the base (``--faultload-base``), else a
        checkout's own release on ci."""
        if given == NO_BASELINE:
            return None, "not compared with a baseline (--faultload-baseline none)"
        if given:
            return parse_build(given, "--faultload-baseline"), ""
        if self.base is not None:
            build = parse_build(self.base + (f"+fix={','.join(self.fixes)}" if self.fixes else ""))
            return build, f"compared with its base {build.text} (--faultload-base; --faultload-baseline: another)"
        return default_baseline(self.target, profile, self.workspace().targets, fixes=self.fixes)

    def pyproject(self) -> Path | None:
        return find_config(self.rootdir)


def _overridden_profile(name: str, examples: int | None, session_s: float | None) -> Profile:
    """The suite profile named, with ``--faultload-examples`` and ``--faultload-session-s`` in place of its own."""
    profile = get_profile(name)
    if examples:
        profile = dataclasses.replace(profile, max_examples=max(1, examples))
    if session_s is not None:
        profile = dataclasses.replace(profile, session_s=max(0.0, session_s))
    return profile


def _suite_access(target: str, get: Callable[[str], Any], environ: Mapping[str, str]) -> Access:
    """A url= target's key, headers and TLS (its sdk-client trials check certificates: no --insecure); a bad one
    is a usage error."""
    spec = parse_target(target)
    try:
        return access_for(
            spec.url if spec.kind == "url" else None,
            api_key=get("faultload_api_key"),
            env_api_key=environ.get("TINKER_API_KEY"),
            headers=get("faultload_header") or [],
            ca_cert=get("faultload_ca_cert"),
            insecure=False,
            sdk_client=True,
            prefix="--faultload-",
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _reachable_cluster(given: str | None, environ: Mapping[str, str]) -> str | None:
    """``--faultload-ray``'s cluster as HOST:PORT, checked to answer now; None without the option."""
    if not given:
        return None
    try:
        address = resolve_address(given, environ)
        check_reachable(address)
    except ClusterError as exc:
        raise pytest.UsageError(suite_cluster_error(exc)) from None
    return address


def suite_cluster_error(exc: ClusterError) -> str:
    """A cluster's one-line refusal, naming the suite's option (the CLI's says ``--ray``)."""
    return str(exc).replace("--ray", "--faultload-ray", 1)
