"""A user's own property: large results must not cost the server more fds per request."""

from hypothesis import given, settings

from faultload.strategies import CI, trial_configs
from faultload.suite.properties import Property

BIG_RESULTS = CI.replace(max_result_tokens=65_536, max_in_flight_result_bytes=256 << 20, max_faults=0)
MINE = Property("big_results_fds", ("bounded_fds",), ("fds_per_in_flight",))


@settings(max_examples=5, deadline=None, derandomize=True)
@given(config=trial_configs("skyrl==0.4.0", time_scale=0.05, limits=BIG_RESULTS))
def test_big_results_keep_fds_bounded(faultload_suite, config):
    faultload_suite.check(MINE, config)  # run on the shared stack, judge, target, assert
