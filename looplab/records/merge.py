"""Merging results documents, and what `--resume` keeps of one.

Merging refuses two cells with the same identity and the same runner version (the same shard merged twice, or
overlapping runs): a repeat is asked for with `--repeat`, not by merging a document twice. The same identity with
another runner version (two versions of one framework) is kept. Only a document of this looplab's `SCHEMA` merges
or resumes: an unversioned one records no case hashes or models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from looplab.adapters.contract.errors import MergeRefused
from looplab.adapters.contract.result import RunResult
from looplab.records.document import SCHEMA, CellRecord, Document, summarize
from looplab.records.identity import CellKey, asked_stream, short_hash

__all__ = ["finished", "merge", "without"]


def check_mergeable(name: str, doc: Document) -> None:
    """Refuse `doc` (read from `name`) unless it has this looplab's schema: only such a one merges or resumes."""
    if doc.looplab_schema != SCHEMA:
        raise MergeRefused(
            f"{name}: results schema {doc.looplab_schema} (unversioned, from an older looplab): it records no case "
            f"hashes or models, so it cannot be merged or resumed; run it again with this looplab (schema {SCHEMA})"
        )


def _stream_label(stream: bool | None) -> str:
    """The stream choice as a refusal names a cell by it: nothing when none was made."""
    return "" if stream is None else f" (--stream {'on' if stream else 'off'})"


def merge(named: Sequence[tuple[str, Document]]) -> Document:
    """One document holding every cell, result, environment and case of `named` (`(file name, document)` pairs).

    Refused with one line naming the file: a document of another schema, a case id whose content hash
    differs from an earlier document's, a cell whose identity and runner version an earlier one already has.
    The cells come out in matrix order (model, api, repeat, case, runner), as one unsharded eval writes them.
    """
    out = Document()
    case_from: dict[str, str] = {}
    cell_from: dict[tuple[CellKey, str | None], str] = {}
    notes: list[str] = []
    placed: list[tuple[CellRecord, dict[str, Any], RunResult | None]] = []
    for name, doc in named:
        check_mergeable(name, doc)
        for case_id, record in doc.cases.items():
            known = out.cases.setdefault(case_id, record)
            if known.hash != record.hash:
                raise MergeRefused(
                    f"{name}: case {case_id!r} is not the one in {case_from[case_id]} (content hash "
                    f"{short_hash(record.hash)}, there {short_hash(known.hash)}): "
                    "they ran different versions of the case"
                )
            case_from.setdefault(case_id, name)
        out.environments.update(doc.environments)  # the id is the content's hash: equal ids, equal environments
        out.runners.extend(r for r in doc.runners if r not in out.runners)
        if doc.incomplete:
            notes.append(f"{name}: {doc.incomplete}")
        parsed = doc.run_results()
        for cell in doc.cells:
            twin = (cell.key, cell.runner_version)
            if twin in cell_from:
                raise MergeRefused(
                    f"{name}: cell {cell.runner} on {cell.case}, repeat {cell.repeat}, model {cell.model}"
                    f"{f' ({cell.api})' if cell.api else ''}{_stream_label(cell.stream)}, "
                    f"runner version {cell.runner_version or 'unknown'} "
                    f"is also in {cell_from[twin]}: merge each document once"
                )
            cell_from[twin] = name
            raw = doc.results[cell.result] if cell.result is not None else {}
            placed.append((cell, raw, parsed[cell.result] if cell.result is not None else None))
    runner_at = {r: i for i, r in enumerate(out.runners)}
    case_at = {c: i for i, c in enumerate(out.cases)}
    placed.sort(
        key=lambda p: (
            p[0].model,
            p[0].api or "",
            asked_stream(p[0].stream),
            p[0].repeat,
            case_at[p[0].case],
            runner_at.get(p[0].runner, len(runner_at)),
        )
    )
    out._parsed = []
    for cell, raw, result in placed:
        index = None
        if result is not None:
            index = len(out.results)
            out.results.append(raw)
            out._parsed.append(result)
        out.cells.append(cell.model_copy(update={"result": index}))
    out.runners.extend(r for r in dict.fromkeys(c.runner for c in out.cells) if r not in out.runners)
    out.incomplete = "; ".join(notes) or None
    out.summary = summarize(out)
    return out


def finished(doc: Document) -> set[CellKey]:
    """Identities of the cells `--resume` skips: those with a result (a cell that errored runs again)."""
    return {c.key for c in doc.cells if c.result is not None}


def without(doc: Document, keys: set[CellKey]) -> Document:
    """`doc` less the cells whose identity is in `keys` (and their results), for `--resume` to replace them."""
    out = doc.model_copy(update={"cells": [], "results": []}, deep=True)
    out._parsed = []
    parsed = doc.run_results()
    for cell in doc.cells:
        if cell.key in keys:
            continue
        index = None
        if cell.result is not None:
            index = len(out.results)
            out.results.append(doc.results[cell.result])
            out._parsed.append(parsed[cell.result])
        out.cells.append(cell.model_copy(update={"result": index}))
    out.summary = summarize(out)
    return out
