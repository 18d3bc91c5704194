"""The mutant regression switches (``targets/skyrl_mutants.py``) on the real releases: 0.4.0 takes every
mutant, 0.3.0 (no in-memory future store) refuses them by name. The switches on test doubles are in
``tests/unit/test_mutant_switches.py``.
"""

from __future__ import annotations

import pytest
from conftest import TARGETS, require_target

from faultload.host.network import http_get_json, pick_free_port
from faultload.model.target import parse_target
from faultload.targets import install, skyrl_mutants
from faultload.targets.families.skyrl import launch_skyrl
from faultload.targets.server import ServerStartError

SCALE = 0.05


@pytest.mark.integration
def test_the_real_release_takes_every_mutant_and_0_3_0_refuses_them(tmp_path):
    """0.4.0 starts with every mutant's patch point found (each logs its patch line) and answers /healthz;
    0.3.0, which has no in-memory future store, is refused by that name."""

    def launch(version: str, folder: str, regress: tuple[str, ...]):
        spec = parse_target(f"skyrl=={version}")
        (tmp_path / folder).mkdir()
        return launch_skyrl(
            spec,
            install.target_python(TARGETS, spec),
            tmp_path / folder,
            pick_free_port(),
            "http://127.0.0.1:9",
            regress=regress,
            time_scale=SCALE,
        )

    require_target("0.4.0")
    handle = launch("0.4.0", "new", tuple(skyrl_mutants.MUTANTS))
    try:
        assert http_get_json(handle.healthz_url, timeout_s=10.0)[1] is not None
        log = (tmp_path / "new" / "server.log").read_text()
        assert [name for name in skyrl_mutants.MUTANTS if f'"{name}: ' not in log] == []
    finally:
        handle.stop()
    require_target("0.3.0")
    with pytest.raises(ServerStartError, match="no 'ExternalFutureStore'"):
        launch("0.3.0", "old", ("lost-wakeup",))
