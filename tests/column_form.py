"""Test helpers for the two forms of a Program: its values held as column arrays, and the
row count from which the hash-table routines go to pandas."""

from __future__ import annotations

import contextlib

import numpy as np

from tracecanary import factorize as fz
from tracecanary.program import MEMBER_COLUMNS, OCCURRENCE_COLUMNS, Program, TextColumn

TEXT_FORMS = ("codes", "repeated", "objects")


def column_dicts(program: Program, text: str = "codes") -> tuple[dict, dict]:
    """(occurrence columns, member columns) of ``program`` as numpy copies, every column
    it has in its order; text as a ``TextColumn`` (``codes``), a ``TextColumn`` whose
    literals appear twice, odd rows using the second copy (``repeated``), or an object
    array of str (``objects``)."""
    assert text in TEXT_FORMS, text
    occ = {}
    for name in program.column_names:
        if OCCURRENCE_COLUMNS.get(name) != "str":
            occ[name] = np.array(program.column(name))
        elif text == "objects":
            occ[name] = np.array(program.column(name, object), dtype=object)
        else:
            codes, literals = program.factorized(name, sort=False)
            if text == "repeated":
                codes = codes + len(literals) * (np.arange(len(codes)) % 2)
                literals = literals + literals
            occ[name] = TextColumn(np.asarray(codes, dtype=np.int64), literals)
    return occ, {name: np.array(program.member_column(name)) for name in MEMBER_COLUMNS}


def held_as_columns(program: Program, text: str = "codes") -> Program:
    """``program``'s values held as column arrays (``column_dicts``)."""
    occ, mem = column_dicts(program, text)
    held = Program.from_columns(
        occ,
        mem,
        world_size=program.world_size,
        skew_known=program.skew_known,
        skew_reason=program.skew_reason,
        notes=program.notes,
        skew_uncertainty_ns=program.skew_uncertainty_ns,
    )
    assert held.holds_columns
    return held


@contextlib.contextmanager
def pandas_from(rows: int):
    """Arrays of at least ``rows`` elements go to pandas (0: all; 1 << 62: none)."""
    saved = fz.PANDAS_MIN_ROWS
    fz.PANDAS_MIN_ROWS = rows
    try:
        yield
    finally:
        fz.PANDAS_MIN_ROWS = saved
