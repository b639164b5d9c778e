"""Small inputs: a lossless compile, a replay and a verify-behavior of a 10-collective
trace and of a 56-collective one, ours beside the public reference implementation of the
design (iemAnshuman/CommCanary at ``REFERENCE_COMMIT``), each command a fresh process as
a user or a Snakemake job runs it: wall seconds (median of alternating runs, ours then
the reference in each round), CPU seconds (user + system; steadier than wall seconds on
a shared machine, reported in the notes) and peak RSS (``wait4`` of the child).

The inputs are the reference's own example traces (``examples/traces/``:
``llama70b_tp8_trace.json``, 10 all_reduce collectives over 8 ranks, and
``llama70b_tp8_trace_long.json``, 56), converted to ``tracecanary.trace/v1`` by
``to_native`` (one event per rank and collective, ``ts_ns`` = start + the rank's arrival,
the overlap kept). The last rows measure floors alone: the interpreter's start (``python
-c pass``) on both sides, then two import floors beside ``import commcanary.cli``:
``import numpy`` bounds every command of ours (the reference imports no numpy), and the
modules a lossless compile imports (numpy and ours, no work done) show what our own
modules add; both after the process set-up a command takes (``command_process``: NumPy's
BLAS with one thread, the collector's raised threshold). None of the three commands
imports pandas, pyarrow or jsonschema on these inputs: a small JSON trace is read as
numpy columns (``trace_columns``), matched, compiled and verified on column arrays and a
canary's expansion is held as numpy columns (valid documents are accepted by
``formats.schema_subset``); backends.yaml is read by PyYAML (libyaml's parser) under
``limits.load_yaml``.

Each side runs in a venv of its own. The reference's is the scratch venv it was
installed into; ours is made by the bench under its work folder (``--without-pip``, no
system site-packages) and sees this interpreter's installed packages and ``src/`` through
one path file. So neither side runs the ``.pth`` hooks of the base interpreter (on these
machines a sandbox's certifi hook, about 45 ms at every start, and setuptools' distutils
shim), as neither would in a user's venv; the interpreter-start row shows what is left.

Both sides run with bytecode caches, as Python does by default and as an installed
package has them (pip compiles the reference's at install): every command runs once
unmeasured first, with ``PYTHONPYCACHEPREFIX`` under the bench's work folder and
``PYTHONDONTWRITEBYTECODE`` (set in some sandboxes) cleared, so neither source tree is
written and neither side pays for recompiling its modules on every start.

The reference is used where present, never installed by the benchmark: a source tree
at ``$TRACECANARY_REFERENCE_SRC`` (default ``/tmp/commcanary``, e.g. ``git archive
c133ad3`` of a clone) and a Python with it installed at ``$TRACECANARY_REFERENCE_PYTHON``
(default ``/tmp/commcanary-venv/bin/python``, a scratch venv: ``python -m venv
/tmp/commcanary-venv && /tmp/commcanary-venv/bin/pip install /tmp/commcanary``). Where
either is absent its rows say why and measure ours only, on a built-in trace of the
same shape."""

from __future__ import annotations

import json
import os
import site
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, WORK, row

REFERENCE_COMMIT = "c133ad3"
REFERENCE_SRC = Path(os.environ.get("TRACECANARY_REFERENCE_SRC", "/tmp/commcanary"))
REFERENCE_PYTHON = Path(
    os.environ.get("TRACECANARY_REFERENCE_PYTHON", "/tmp/commcanary-venv/bin/python")
)
REFERENCE_TRACE = REFERENCE_SRC / "examples" / "traces" / "llama70b_tp8_trace.json"
REFERENCE_LONG_TRACE = REFERENCE_SRC / "examples" / "traces" / "llama70b_tp8_trace_long.json"
MEMORY_TARGET_MB = 80


def reference_missing() -> str | None:
    """Why the reference cannot run here (None when it can)."""
    if not (REFERENCE_TRACE.is_file() and REFERENCE_LONG_TRACE.is_file()):
        return f"no reference source tree at {REFERENCE_SRC} (set TRACECANARY_REFERENCE_SRC)"
    if not REFERENCE_PYTHON.is_file():
        return f"no reference Python at {REFERENCE_PYTHON} (set TRACECANARY_REFERENCE_PYTHON)"
    probe = subprocess.run(
        [str(REFERENCE_PYTHON), "-c", "import commcanary.cli"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        return f"commcanary is not importable by {REFERENCE_PYTHON}"
    return None


def builtin_reference_doc() -> dict:
    """A trace in the reference's format shaped like its example (10 all_reduce of
    256 KiB over 8 ranks, prefill then decode), for when the reference is absent."""
    events = []
    for i in range(10):
        events.append(
            {
                "bytes": 262144,
                "compute_overlap_us": 30.0 + i,
                "group": "tp0",
                "op": "all_reduce",
                "phase": "prefill" if i < 4 else "decode",
                "rank_arrival_us": {str(r): round(r * 0.9 + i * 0.1, 3) for r in range(8)},
                "ranks": list(range(8)),
                "start_us": 75.0 * i,
            }
        )
    return {"events": events}


def to_native(reference_doc: dict) -> dict:
    """The reference's collective-per-event trace as a ``tracecanary.trace/v1`` document:
    one event per rank and collective in each rank's order; ``ts_ns`` = (start + the
    rank's arrival) in ns; ``overlap_ns`` from the compute overlap; one clock domain."""
    events, groups, seq = [], {}, {}
    for collective in reference_doc["events"]:
        ranks = sorted(collective["ranks"])
        groups.setdefault(collective["group"], ranks)
        for r in ranks:
            arrival = collective["rank_arrival_us"][str(r)]
            events.append(
                {
                    "rank": r,
                    "seq": seq.get(r, 0),
                    "op": collective["op"],
                    "bytes": collective["bytes"],
                    "dtype": "bfloat16",
                    "group": collective["group"],
                    "phase": collective["phase"],
                    "stream": "0",
                    "ts_ns": round((collective["start_us"] + arrival) * 1000),
                    "overlap_ns": round(collective["compute_overlap_us"] * 1000),
                }
            )
            seq[r] = seq.get(r, 0) + 1
    events.sort(key=lambda e: (e["rank"], e["seq"]))
    world = sorted({r for ranks in groups.values() for r in ranks})
    return {
        "format": "tracecanary.trace/v1",
        "meta": {
            "world_size": len(world),
            "source": "bench_small: the reference's example trace, converted",
            "clock_domains": [{"id": "node0", "host": "node0", "ranks": world}],
        },
        "groups": [{"id": g, "ranks": ranks} for g, ranks in groups.items()],
        "events": events,
    }


def bytecode_cached_env(work: Path) -> dict[str, str]:
    """The environment of every measured command: this one, with bytecode caches written
    and reused under ``work/pycache`` (see the module doc)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def own_venv_python(work: Path) -> str:
    """The Python of ours' own venv (made once under ``work``; see the module doc): this
    interpreter, with its site-packages and ``src/`` on the path and none of its ``.pth``
    hooks run."""
    venv = work / "ours-venv"
    python = venv / "bin" / "python"
    if not python.is_file():
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300
        )
    paths = [str(REPO / "src"), *site.getsitepackages()]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (venv / "lib" / version / "site-packages" / "tracecanary-bench.pth").write_text(
        "\n".join(paths) + "\n"
    )
    return str(python)


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """(wall seconds, peak RSS in MiB, CPU seconds) of one command run to completion in a
    child; RuntimeError naming the command when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} exited {proc.returncode}: {err[-1500:]}")
    return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def _commands(
    work: Path, ours_python: str, ref_python: str | None, ref_trace: Path | None
) -> dict[str, dict[str, list[str]]]:
    """Per case: our command line and the reference's on ``ref_trace`` (absent without
    the reference)."""
    from tracecanary.defaults import default_file

    ours = [ours_python, "-m", "tracecanary"]
    backends = str(default_file("backends.yaml"))
    native, canary = str(work / "trace.json"), str(work / "canary.json")
    cases = {
        "compile --lossless": {
            "ours": ours + ["compile", native, "--lossless", "-o", str(work / "c.json")],
        },
        "replay": {
            "ours": ours + ["replay", canary, "--backends", backends, "-o", str(work / "r.json")],
        },
        "verify-behavior": {
            "ours": ours
            + ["verify-behavior", native, canary, "--backends", backends]
            + ["-o", str(work / "v.json")],
        },
    }
    if ref_python is not None:
        ref = [ref_python, "-m", "commcanary"]
        trace, ref_canary = str(ref_trace), str(work / "ref_canary.json")
        out = str(work / "ref_out.json")
        cases["compile --lossless"]["reference"] = ref + [
            "compile", trace, "--lossless-timing", "-o", str(work / "ref_c.json"),
        ]  # fmt: skip
        cases["replay"]["reference"] = ref + ["replay", ref_canary, "-o", out]
        cases["verify-behavior"]["reference"] = ref + [
            "verify-behavior", trace, ref_canary, "-o", out,
        ]  # fmt: skip
    return cases


def _prepare(
    work: Path,
    source: dict,
    ref_trace: Path | None,
    ours_python: str,
    ref_python: str | None,
    env: dict[str, str],
) -> dict[str, dict[str, list[str]]]:
    """Write ``source`` converted (``to_native``) and both sides' canaries of it under
    ``work``; return its cases (``_commands``)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "trace.json").write_text(json.dumps(to_native(source), sort_keys=True))
    # the canaries the replay and verify cases read
    measure(
        [ours_python, "-m", "tracecanary", "compile", str(work / "trace.json"), "--lossless"]
        + ["-o", str(work / "canary.json")],
        env,
    )
    if ref_python is not None:
        measure(
            [ref_python, "-m", "commcanary", "compile", str(ref_trace)]
            + ["--lossless-timing", "-o", str(work / "ref_canary.json")],
            env,
        )
    return _commands(work, ours_python, ref_python, ref_trace)


def _label(source: dict) -> str:
    ranks = {r for event in source["events"] for r in event["ranks"]}
    return f"small input ({len(source['events'])} collectives, {len(ranks)} ranks)"


def run(quick: bool) -> list[dict]:
    missing = reference_missing()
    ref_python = None if missing else str(REFERENCE_PYTHON)
    work = WORK / "small"
    work.mkdir(parents=True, exist_ok=True)
    env = bytecode_cached_env(work)
    ours_python = own_venv_python(work)
    inputs = (
        [(REFERENCE_TRACE, "trace"), (REFERENCE_LONG_TRACE, "long")]
        if missing is None
        else [(None, "builtin")]
    )
    cases: dict[str, dict[str, list[str]]] = {}
    for ref_trace, name in inputs:
        source = json.loads(ref_trace.read_text()) if ref_trace else builtin_reference_doc()
        prepared = _prepare(work / name, source, ref_trace, ours_python, ref_python, env)
        cases.update({f"{_label(source)}: {case}": argv for case, argv in prepared.items()})
    as_a_command = (  # a command's process set-up, as python -m tracecanary takes it
        "from tracecanary.command_process import take_the_process; take_the_process(); "
    )
    floors = {
        "interpreter start (python -c pass)": ("pass", "pass"),
        "import floor (numpy)": (as_a_command + "import numpy", "import commcanary.cli"),
        "import floor (the modules a lossless compile imports)": (
            as_a_command + "import numpy, tracecanary.cli, tracecanary.commands.compile, "
            "tracecanary.compile.canary, tracecanary.load, tracecanary.trace_columns, "
            "tracecanary.matching",
            "import commcanary.cli",
        ),
    }
    for case, (statement, reference_statement) in floors.items():
        cases[f"small inputs: {case}"] = {"ours": [ours_python, "-c", statement]}
        if ref_python is not None:
            cases[f"small inputs: {case}"]["reference"] = [ref_python, "-c", reference_statement]
    repeats = 3 if quick else 15  # this machine is shared: single runs spread by +-20%
    samples: dict[str, dict[str, list[tuple[float, float, float]]]] = {
        case: {side: [] for side in argvs} for case, argvs in cases.items()
    }
    for argvs in cases.values():  # unmeasured: writes each side's bytecode caches
        for argv in argvs.values():
            measure(argv, env)
    for _ in range(repeats):  # alternating: ours, then the reference, case by case
        for case, argvs in cases.items():
            for side, argv in argvs.items():
                samples[case][side].append(measure(argv, env))
    load = os.getloadavg()[0]
    rows = []
    for case, sides in samples.items():
        ours_s = statistics.median(t for t, _, _ in sides["ours"])
        ours_mb = max(m for _, m, _ in sides["ours"])
        ours_cpu = statistics.median(c for _, _, c in sides["ours"])
        ref = sides.get("reference")
        ref_s = statistics.median(t for t, _, _ in ref) if ref else None
        ref_mb = max(m for _, m, _ in ref) if ref else None
        ref_cpu = statistics.median(c for _, _, c in ref) if ref else None
        fast = ref_s is not None and ours_s <= ref_s
        notes = (
            f"median of {repeats} alternating runs, each a fresh process with bytecode "
            f"caches; ours/reference {ours_s / ref_s:.2f}x; CPU seconds ours {ours_cpu:.3f} / "
            f"reference {ref_cpu:.3f} ({ours_cpu / ref_cpu:.2f}x); reference peak RSS "
            f"{ref_mb:.0f} MiB"
            if ref
            else f"reference not measured: {missing}; CPU seconds ours {ours_cpu:.3f}"
        )
        notes += f"; load average {load:.1f} on {os.cpu_count()} cores"
        rows.append(
            row(
                case,
                round(ours_s, 3),
                "s",
                f"CommCanary {REFERENCE_COMMIT} (its own venv)",
                round(ref_s, 3) if ref_s is not None else None,
                round(ours_s / ref_s, 2) if ref_s else None,
                f"<= reference, peak < {MEMORY_TARGET_MB} MiB",
                bool(fast and ours_mb < MEMORY_TARGET_MB),
                round(ours_mb, 1),
                notes,
            )
        )
    return rows


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
