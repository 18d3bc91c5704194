"""The runner's side of the pull-request gate (:mod:`faultload.suite.gate`): each example judged beside the same
example on the base."""

from __future__ import annotations

from faultload.store.repro import config_key
from faultload.suite.executor import StackExecutor, SuiteError, TrialOutcome
from faultload.suite.gate import BASE_AGAIN, classify, count, on_base, violated_names
from faultload.suite.properties import Property
from faultload.suite.state import PropertyState
from faultload.suite.verdicts import failing


class BesideBase:
    """The runner's side of the gate (:class:`faultload.suite.runner.SuiteRunner` is one): each example judged
    against the same example on the base, when the session has one (``self.base``)."""

    def _failing(self, prop: Property, config, state: PropertyState, outcome: TrialOutcome) -> list:
        """The violations that fail the example: all of them, or with a base only the new ones (:mod:`.gate`:
        the same example run on the base, its known and fixed ones counted)."""
        violations = failing(prop, outcome)
        if self.base is None or prop.comparative:
            return violations
        base_config = on_base(config, self.base)
        base_outcome = self._base_outcome(base_config, state, needed=bool(violations))
        base = violated_names(base_outcome) if base_outcome is not None else None
        for again in range(BASE_AGAIN if base is not None else 0):  # a violation the base can show is not new
            if not {v.name for v in violations} - base:
                break
            base |= violated_names(self._base_outcome(base_config, state, needed=True, again=again + 1))
        new, known, fixed = classify(violations, base)
        count(state.gate, config_key(config), config.shape.requests, new, known, fixed, base is not None)
        if new:
            state.known_in_failure[config_key(config)] = tuple(v.name for v in known)
        return new

    def _base_outcome(self, config, state: PropertyState, needed: bool, again: int = 0) -> TrialOutcome | None:
        """The example on the base (cached like any trial; ``again``: its repeat of that number, cached apart). Run
        whenever the head violated something (it decides new from known); else only within the property's time
        bound and never while shrinking (it would only say fixed). None: not run, or no test of the base (every
        head violation is then new)."""
        key = config_key(config) + (f"#again{again}" if again else "")
        outcome = self.cache.get(key)
        if outcome is None:
            if not needed and (state.shrinking or self.stopped() or self._out_of_time(state, self._now(), state.prop)):
                return None
            if self.base_executor is None:
                pools, access = self._stack_settings
                self.base_executor = StackExecutor(
                    self.workspace, self.budgets, self.profile.baseline_wait_s, self._log, pools=pools, access=access
                )
            outcome = self._run(config, state, self.base_executor)
            self.cache[key] = outcome
        if outcome.error:
            raise SuiteError(f"the base {self.base}: {outcome.error}")
        return None if outcome.unjudged else outcome
