"""Faults: Toxiproxy topology and timed toxics, router stalls/crashes (the nemesis).

What a fault *is* (``Fault``/``FaultSchedule``, validated, JSON-round-tripping)
lives in :mod:`faultload.model.faults`; this package applies them:

* :mod:`.toxiproxy` — find/check/run the real toxiproxy-server;
* :mod:`.control` — bounded control calls over toxiproxy-python;
* :mod:`.topology` — the edge and backend proxies, teardown;
* :mod:`.schedule` — ``FaultRunner`` applies a schedule on time and heals;
* :mod:`.log` — ``FaultLog``/``AppliedFault``: what it really did (read by the checker and a trial bundle).
"""
