"""What a trial is, as plain frozen values: nothing here runs, opens a socket or reads a setting.

``shape`` (load shape, client policy), ``faults`` (fault specs and schedules),
``router`` (the fake router's config), ``target`` (what server is under test),
``switches`` (names of the regressions and fixes), ``watchdog`` (collapse
limits), ``sdk`` (the SDK's timers), ``trial`` (``TrialConfig``) and ``codec``
(its JSON form). Every other room imports these; they import nothing heavy
(``tests/repo/test_layering.py`` checks both).
"""
