"""Whether a recording saw every operation the backend ran (``tracecanary.record``).

torch.distributed's gloo backend numbers the operations it runs on each process group
(``ProcessGroup._get_sequence_number_for_group``): every collective and point-to-point
operation, whoever issued it (a ``torch.distributed`` call, a functional collective of
DTensor, DDP's C++ reducer, an object collective). A recording reads every group's
number when it starts and when it ends; the difference is what ran on the group and
must equal what the recorder saw there (``gloo_operations``: how many numbered
operations one recorded call is). Any difference means operations ran through a path
the recorder does not see, and a capture without them would describe another program:
the recording is refused (``IncompleteRecording``), and nothing is written.

Only gloo groups are checked, the backend whose numbering was measured here (torch 2.13,
every call the recorder wraps); a group on another backend (NCCL's counting has not been
measured: no GPU here) or one destroyed before the end is named as unchecked in the
capture's notes, never counted as checked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tracecanary.errors import InputError

CHECKED_BACKENDS = ("gloo",)
COMPLETENESS_NOTE = "completeness: "  # a capture's note: what the check established
NOT_CHECKED = "not checked on "  # ... where it could not check (groups named)
UNSIZED_NOTE = "not recorded: "  # a capture's note: operations counted but not sized


class IncompleteRecording(InputError):
    """Operations ran on a process group outside what the recorder saw (exit 2: the
    program is not recordable this way; the message names the way out)."""


def completeness_notes(notes: list[str]) -> list[str]:
    """The completeness notes among a capture's ``meta.notes``, in their order."""
    return [note for note in notes if note.startswith((COMPLETENESS_NOTE, UNSIZED_NOTE))]


def gloo_operations(op: str, call: str, group_size: int) -> int:
    """The numbered gloo operations that one recorded call runs: a ``reduce_scatter`` of
    a list of tensors runs one reduce per member of the group (measured, torch 2.13);
    every other recorded call, one."""
    if call == "reduce_scatter" and op == "reduce_scatter":
        return group_size
    return 1


@dataclass(frozen=True)
class GroupState:
    """A process group as the check sees it at one moment."""

    label: str  # as the capture names it: ``world`` or ``pg:<name>``
    backend: str
    number: int | None  # operations numbered so far; None: the backend does not number


def group_states(dist, label_of) -> dict[object, GroupState]:
    """Every process group of this process (the world and every subgroup this rank is a
    member of), keyed by the group object; ``label_of(group)`` names it."""
    c10d = dist.distributed_c10d
    states = {}
    for group in list(c10d._world.pg_names):
        try:
            backend = str(dist.get_backend(group))
        except (RuntimeError, ValueError):
            backend = "unknown"
        try:
            number = int(group._get_sequence_number_for_group())
        except (RuntimeError, AttributeError):
            number = None
        states[group] = GroupState(label_of(group), backend, number)
    return states


def compare(
    start: dict[object, GroupState], end: dict[object, GroupState], seen: Counter
) -> tuple[list[str], list[str]]:
    """(one line per checked group where the backend ran other than what was seen, the
    labels of groups that could not be checked). ``seen`` counts numbered operations
    per group object, as ``gloo_operations`` gives them."""
    differences: list[str] = []
    unchecked: list[str] = []
    for group, state in end.items():
        if state.backend not in CHECKED_BACKENDS or state.number is None:
            unchecked.append(f"{state.label} ({state.backend})")
            continue
        before = start.get(group)
        ran = state.number - (before.number if before is not None and before.number else 0)
        if ran != seen.get(group, 0):
            differences.append(
                f"group {state.label}: the backend ran {ran} operations, "
                f"the recording saw {seen.get(group, 0)}"
            )
    for group, state in start.items():
        if group not in end:
            unchecked.append(f"{state.label} (destroyed before the end)")
    return differences, sorted(unchecked)
