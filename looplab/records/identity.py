"""What identifies a cell and a case, the same on every machine and Python.

A cell's identity (`CellKey`) is what was asked for before it ran: runner, case, repeat index, model, wire API and,
when asked, `--stream on|off`. With the matrix's runners it places the cell in a shard (`shard_of`), and it decides
whether `--resume` runs it again. A case is identified by the content hash of its definition and fixture files
(`case_hash`): a case id whose hash differs between two documents ran different versions of the case.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from looplab.scenarios.cases import Case

__all__ = ["CellKey", "shard_of"]


class CellKey(NamedTuple):
    """A cell's identity, known before it runs: what shards and `--resume` go by."""

    runner: str
    case: str
    repeat: int
    model: str
    api: str | None
    #: `--stream on|off` as asked (None: each runner's own); part of the identity only when asked, so a cell
    #: run without it keeps the identity it had before streaming was a choice.
    stream: bool | None = None

    def canonical(self) -> str:
        """The identity as one stable string (JSON, no spaces): the same on every machine and Python."""
        return json.dumps(
            [self.runner, self.case, self.repeat, self.model, self.api, *asked_stream(self.stream)],
            separators=(",", ":"),
        )


def asked_stream(stream: bool | None) -> list[bool]:
    """The stream choice as part of an identity: nothing when none was made."""
    return [] if stream is None else [stream]


def shard_of(key: CellKey, shards: int, runners: Sequence[str] = ()) -> int:
    """The shard (1..shards) a cell belongs to, from identities alone: every machine computes the same one.

    A case's cells cost about the same whatever the runner, and cases differ by seconds (a test run
    that is killed, a slow one), so a case's cells are dealt out over the shards in turn: the matrix's
    `runners` ranked by the sha256 of each one's cell identity, dealt from a shard that the hash of
    the case (with its repeat, model and API) picks. Each shard then gets its share of every case,
    within one cell, which a hash of each cell alone leaves to chance. Cases and repeats added do not
    move the others; the runners asked for are part of the deal, so every shard is run with the same
    ones (the same command line but `--shard`).
    """
    group = list(dict.fromkeys([*runners, key.runner]))
    ranked = sorted(group, key=lambda runner: _digest(key._replace(runner=runner).canonical()))
    offset = _digest(
        json.dumps([key.case, key.repeat, key.model, key.api, *asked_stream(key.stream)], separators=(",", ":"))
    )
    return (ranked.index(key.runner) + offset) % shards + 1


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def case_hash(case: Case) -> str:
    """sha256 of the case's definition, its suite's own tools and defaults, and every file of its repo and overlay,
    as a run sees them."""
    from looplab.shared_tools.workspace import SKIPPED_DIRS

    h = hashlib.sha256()
    h.update(json.dumps(case.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode("utf-8"))
    if case.suite is not None and case.suite.fingerprint:
        h.update(f"\0suite\0{case.suite.fingerprint}".encode())
    for label, root in (("repo", case.repo_path), ("overlay", case.overlay_path)):
        if root is None:
            continue
        files = sorted(
            p for p in root.rglob("*") if p.is_file() and not SKIPPED_DIRS.intersection(p.relative_to(root).parts)
        )
        for path in files:
            # The relative path and the length frame each file, so moving bytes between files changes the hash.
            data = path.read_bytes()
            h.update(f"\0{label}\0{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
            h.update(data)
    return "sha256:" + h.hexdigest()


def short_hash(digest: str | None) -> str:
    """A content hash as a refusal quotes it: its first 12 hex digits, or `none`."""
    return "none" if digest is None else digest.removeprefix("sha256:")[:12]
