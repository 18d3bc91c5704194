"""What a trial recorded, as data: per-request history, monitor samples, fault log, server-log summary, collapse.

The trial (``faultload.run``) writes these; the checker judges them, the
report shows them and a trial bundle stores them. Nothing here runs or
watches anything: a stored trial is loaded and judged with this room alone.
"""
