"""The suite's own failure, apart from any verdict: light, so the pytest plugin can tell it from a violation."""


class SuiteError(RuntimeError):
    """The suite could not run a trial (stack did not start, harness crashed): not an invariant. pytest reports
    it as an error, not a failure, and the session exits with the harness code (``cli.exits.EXIT_HARNESS``)."""
