"""Rank lists as Kineto writes them, and their reconstruction when truncated.

``record_param_comms`` stores ``Process Group Ranks`` (and the split sizes) as a string
holding a list, truncated beyond 30 entries in one of two forms:
``"[a0, ..., a29, ...]"`` (first 30, then ``...``) or ``"[a0, ..., a28, ..., aLast]"``
(first 29, ``...``, last). A truncated list is rebuilt only from evidence: the full
list in ``distributedInfo.pg_config`` for that group name, or ``Global rank start`` /
``Global rank stride`` with ``Group size``. The rebuilt list must agree with every
entry that survived truncation; otherwise, or without evidence, the import refuses.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankList:
    """A parsed rank-list string: ``head`` entries before the first ``...``, ``tail``
    entries after it (the newer form keeps the last rank), ``truncated`` if ``...`` was
    present."""

    head: tuple[int, ...]
    tail: tuple[int, ...]
    truncated: bool

    @property
    def full(self) -> list[int] | None:
        return None if self.truncated else list(self.head)

    def agrees_with(self, ranks: list[int]) -> bool:
        """True if ``ranks`` starts with ``head`` and ends with ``tail`` (and, when not
        truncated, is exactly ``head``)."""
        if not self.truncated:
            return list(self.head) == list(ranks)
        n_head, n_tail = len(self.head), len(self.tail)
        if len(ranks) < n_head + n_tail:
            return False
        if list(ranks[:n_head]) != list(self.head):
            return False
        return n_tail == 0 or list(ranks[-n_tail:]) == list(self.tail)


def parse_rank_list(value: object) -> RankList:
    """Parse ``"[0, 1, 2]"`` / a JSON list / a truncated string; raise ValueError on
    anything else (the caller turns it into a located refusal)."""
    if isinstance(value, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ValueError("rank list holds a non-integer")
        return RankList(tuple(value), (), False)
    if not isinstance(value, str):
        raise ValueError(f"rank list is neither a string nor a list: {value!r}"[:120])
    text = value.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"rank list is not bracketed: {value!r}"[:120])
    body = text[1:-1].strip()
    if not body:
        return RankList((), (), False)
    head: list[int] = []
    tail: list[int] = []
    truncated = False
    for token in (t.strip() for t in body.split(",")):
        if token in ("...", "…"):
            if truncated and tail:
                raise ValueError("rank list has '...' twice around entries")
            truncated = True
            continue
        try:
            number = int(token)
        except ValueError:
            raise ValueError(f"rank list entry {token!r} is not an integer") from None
        (tail if truncated else head).append(number)
    if truncated and len(tail) > 1:
        raise ValueError("truncated rank list keeps more than one entry after '...'")
    return RankList(tuple(head), tuple(tail), truncated)


def strided_ranks(start: int, stride: int, size: int) -> list[int]:
    return [start + k * stride for k in range(size)]
