"""Candidate fixes of what faultload found in TuFT, applied inside the target's Python (``--fix NAME``).

Imported by ``tuft_launch.py`` before TuFT is (a fix that widens a request or answer model must be in place
when ``tuft.server`` builds its routes from ``tinker.types``), and applied in two steps: ``BEFORE_IMPORT[name]``
takes ``tinker.types``; ``FIXES[name]`` takes TuFT's modules once it is imported (``future_store``:
``tuft.futures.FutureStore``, ``cli``: ``tuft.cli``, ``persistence``: ``tuft.persistence``, ``sampling_controller``:
``tuft.sampling_controller``, ``sequence_executor``: ``tuft.sequence_executor``) and says what it
changed. Only pydantic is imported here, so faultload's reference page can read the docstrings.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Callable, List, Optional

from pydantic import ConfigDict


def _newer_sdk_models(types: Any) -> None:
    """asample's request model ignores fields it does not know, and its answer model carries sequence ids."""

    class SampleRequest(types.SampleRequest):
        model_config = ConfigDict(frozen=True, extra="ignore")

    class UntypedAPIFuture(types.UntypedAPIFuture):
        sample_sequence_ids: Optional[List[str]] = None

    types.SampleRequest, types.UntypedAPIFuture = SampleRequest, UntypedAPIFuture


def newest_sdk_samples(modules: dict[str, Any]) -> str:
    """Finding 7's candidate fix: asample takes the newest SDK's requests and answers what it asserts.

    tinker >= 0.26 sends asample fields tinker 0.25's closed ``SampleRequest`` forbids (a 422 before anything is
    queued), then asserts that the answer carries one sequence id per sample. The fix validates asample's body
    with the fields TuFT knows, ignoring the rest, and answers ``sample_sequence_ids`` ``<request_id>:<i>`` for
    each of ``num_samples``: what SkyRL's ``sample-sequence-ids`` does for finding 6.
    """
    future_store = modules["future_store"]
    enqueue = future_store.enqueue

    async def enqueue_with_sequence_ids(self, operation, user_id, **kwargs):
        future = await enqueue(self, operation, user_id, **kwargs)
        if kwargs.get("operation_type") != "sample":
            return future
        request = (kwargs.get("operation_args") or {}).get("request")
        samples = getattr(request, "num_samples", 1) or 1
        ids = [f"{future.request_id}:{i}" for i in range(samples)]
        return type(future)(request_id=future.request_id, model_id=future.model_id, sample_sequence_ids=ids)

    future_store.enqueue = enqueue_with_sequence_ids
    return "newest-sdk-samples: asample ignores unknown request fields and answers sample_sequence_ids"


def file_persistence(modules: dict[str, Any]) -> str:
    """Finding 8's candidate fix: TuFT keeps its sessions and futures in its own FILE store, so a restart restores them.

    With persistence off (TuFT's default) a restart forgets every session and future, and a sample submitted on
    a forgotten session is still accepted, then answered 404. The fix turns on the persistence TuFT ships
    (``persistence.mode: FILE``, a JSON file beside the run's checkpoints; a production server would use its
    REDIS mode, the same code path), as the release's own config would.
    """
    cli, persistence = modules["cli"], modules["persistence"]
    build = cli._build_config

    def build_persisted(config_path, checkpoint_dir):
        config = build(config_path, checkpoint_dir)
        config.persistence = persistence.PersistenceConfig(
            mode=persistence.PersistenceMode.FILE, file_path=config.checkpoint_dir.parent / "tuft-state.json"
        )
        return config

    cli._build_config = build_persisted
    return "file-persistence: sessions and futures kept in TuFT's FILE store across a restart"


def history_in_order(modules: dict[str, Any]) -> str:
    """Finding 10's candidate fix: a sample adds its entry to its session's history instead of rebuilding it.

    TuFT records each sample in its sampling session's history, kept sorted by ``seq_id``; the release rebuilds
    the whole list on every sample, reading the session's private index through pydantic's ``__getattr__`` once
    per entry, so a session's n-th sample costs O(n) and a session of n samples O(n²). Samples are recorded in
    ``seq_id`` order (the session's ``SequenceExecutor`` runs them so), so the new entry goes at the end; an entry
    out of order or replacing one (a resubmitted ``seq_id``) still rebuilds the list, as the release does.
    """
    controller = modules["sampling_controller"]
    entry_type = controller.SamplingHistoryEntry

    async def record_sequence(self, record, seq_id, prompt):
        by_seq_id = record._history_by_seq_id  # one private-attribute read, not one per entry
        replaced = seq_id in by_seq_id
        entry = entry_type(
            seq_id=seq_id, prompt_token_count=len(prompt.to_ints()), prompt_hash=self._hash_prompt(prompt)
        )
        by_seq_id[seq_id] = entry
        history = record.history
        if not replaced and (not history or history[-1].seq_id < seq_id):
            history.append(entry)
        else:
            record.history = [by_seq_id[k] for k in sorted(by_seq_id)]
        record.last_seq_id = max(record.last_seq_id, seq_id)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._save_session, record.sampling_session_id)

    controller.SamplingController._record_sequence = record_sequence
    return "history-in-order: a sample appends its session's history entry (the release rebuilds the list)"


def sequence_tiebreak(modules: dict[str, Any]) -> str:
    """Finding 14's candidate fix: two samples with one ``seq_id`` no longer crash their session's executor.

    A sampling session runs its samples through a ``SequenceExecutor``, a heap of ``(seq_id, func, kwargs,
    future)``. A client that resubmits an asample (the SDK does, with the same body, when the answer does not
    come in time) puts a second entry with the same ``seq_id``, function and arguments; the heap then compares
    the two futures, ``TypeError`` ends the executor's processing task while it still counts as running, and
    every later sample of the session waits for ever. The fix gives each entry an arrival number after the
    ``seq_id``, so equal ``seq_id`` go in arrival order and nothing else is ever compared.
    """
    executor_type = modules["sequence_executor"].SequenceExecutor
    arrivals = itertools.count()
    submit = executor_type.submit

    async def submit_in_order(self, sequence_id, func, **kwargs):  # the heap's key: (seq_id, arrival), unique
        return await submit(self, (sequence_id, next(arrivals)), func, **kwargs)

    executor_type.submit = submit_in_order
    return "sequence-tiebreak: a session's executor orders equal seq_ids by arrival (the release compares futures)"


BEFORE_IMPORT: dict[str, Callable[[Any], None]] = {"newest-sdk-samples": _newer_sdk_models}
FIXES: dict[str, Callable[[dict[str, Any]], str]] = {
    "newest-sdk-samples": newest_sdk_samples,
    "file-persistence": file_persistence,
    "history-in-order": history_in_order,
    "sequence-tiebreak": sequence_tiebreak,
}
