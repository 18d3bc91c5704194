"""Run one trial: the stack (server, router, proxies), the load, the monitor and watchdog, then cleanup.

``trial.run_trial`` is the entry point; ``stack`` holds the processes a
trial runs against, ``watching`` the load wait, ``monitor``/``watchdog`` what
watches the server, ``kernel`` the listen-queue counters, ``preflight`` whether
a trial fits this machine. What they record lives in ``faultload.record``.
"""
