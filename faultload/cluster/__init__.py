"""Load workers on a Ray cluster, for load one machine cannot hold.

``connect`` joins a running cluster (loopback unless ``--allow-remote``) and
asks every node for its limits and its clock; ``nodes`` places the trial's
worker jobs on the nodes; ``actor`` runs one job in a Ray actor with the same
code a local worker process runs (``faultload.client.workers``); ``pool`` is
the trial's view of those actors, with the interface of the local
``WorkerPool``. ``ray`` is an optional extra: nothing here imports it at
module level, so a harness without it runs as before.
"""
