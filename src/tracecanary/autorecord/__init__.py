"""Recording a user's unmodified program: ``tracecanary capture -o DIR -- CMD...``.

``run_recorded(cmd, out_dir)`` runs ``cmd`` (a ``python`` or ``torchrun`` command line)
with ``RECORD_DIR_ENV`` naming a staging directory and this package's ``hook``
directory first on ``PYTHONPATH``. Every Python process of the run then loads
``hook/sitecustomize.py``, which calls ``activate()``: once the process imports
``torch.distributed``, its ``init_process_group`` is wrapped so that, when it returns,
``tracecanary.record.record(<staging>)`` starts and writes ``rank<r>.json`` when the
program calls ``destroy_process_group`` or, failing that, at interpreter exit. The user's program imports nothing of TraceCanary.

What is recorded is what ``tracecanary.record`` records (its module doc), from the
return of ``init_process_group`` to ``destroy_process_group`` or the exit of the process
(a ``multiprocessing`` child that never destroys its group exits without ``atexit``: no
capture, and the run is refused as recording nothing); a name bound at import time
(``from torch.distributed import all_reduce``) is seen through its module binding, and
a collective no wrapper sees refuses the run (the completeness check).
After the command exits 0, the rank captures are merged (``tracecanary.merge``) into
``DIR/merged.jsonl.gz``; ``DIR`` holds the captures, the merged trace and
``capture.json`` (the command, its exit status, wall time). ``DIR`` is checked before
the command runs (an existing non-empty directory without ``--force`` is refused then,
not after a training). A command that fails, times out or records nothing raises
``RunFailed`` (exit 1); one whose recording a rank refused as incomplete
(``tracecanary.record_completeness``: collectives ran that the recorder did not see)
raises ``IncompleteRecording`` (exit 2) with that rank's reason; neither leaves ``DIR``
behind, and where any rank recorded something the error names the staging directory
that keeps the recordings. Only regular ``rank<N>.json`` files within
``max_json_document_bytes`` (and ``rank<N>.refused.txt``) are read from the staging
directory; anything else the program left there (another name, a FIFO, a symlink, an
oversized file) is refused, exit 2, naming it, before a byte of it is read.
Processes that do not import torch.distributed pay only this package's import.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys

RECORD_DIR_ENV = "TRACECANARY_RECORD_DIR"
REFUSED_SUFFIX = ".refused.txt"  # a rank whose recording was refused as incomplete
INCOMPLETE_SUFFIX = ".incomplete.json"  # what such a rank did record, kept for the user
WATCHED_MODULE = "torch.distributed"


_recording: list = []  # the active ``record`` of this process, if any


def _start_recording(out_dir: str) -> None:
    """Start ``record(out_dir)`` in this process; ``_finish_recording`` writes it."""
    import atexit

    from tracecanary.record import record

    recording = record(out_dir)
    recording.__enter__()
    _recording.append(recording)
    atexit.register(_finish_recording)


def _finish_recording() -> None:
    """Write this process's capture (once): at ``destroy_process_group`` or at exit
    (multiprocessing children end without running ``atexit``; well-behaved programs
    destroy their process group). A recording refused as incomplete writes
    ``rank<r>.refused.txt`` (its one-line reason) and what it did record as
    ``rank<r>.incomplete.json`` instead, and the user's program goes on: ``run_recorded``
    refuses the run and says where these are kept."""
    from tracecanary.record_completeness import IncompleteRecording

    while _recording:
        recording = _recording.pop()
        recorder = recording.recorder
        try:
            recording.__exit__(None, None, None)
        except IncompleteRecording as err:
            refused = recorder.out_dir / f"rank{recorder.rank}{REFUSED_SUFFIX}"
            refused.parent.mkdir(parents=True, exist_ok=True)
            refused.write_text(err.message + "\n")
            from tracecanary.trace_io import write_trace

            write_trace(
                recorder.document(), refused.with_name(f"rank{recorder.rank}{INCOMPLETE_SUFFIX}")
            )


def _wrap_init(dist, out_dir: str) -> None:
    init, destroy = dist.init_process_group, dist.destroy_process_group

    @functools.wraps(init)
    def init_process_group(*args, **kwargs):
        result = init(*args, **kwargs)
        _start_recording(out_dir)
        return result

    @functools.wraps(destroy)
    def destroy_process_group(*args, **kwargs):
        _finish_recording()
        return destroy(*args, **kwargs)

    dist.init_process_group = init_process_group
    dist.destroy_process_group = destroy_process_group


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds ``torch.distributed`` like the path finder would, and wraps its
    ``init_process_group`` right after the module has executed."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir

    def find_spec(self, name, path, target=None):
        if name != WATCHED_MODULE:
            return None
        sys.meta_path.remove(self)  # once is enough
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module
        out_dir = self.out_dir

        def exec_module(module):
            execute(module)
            _wrap_init(module, out_dir)

        spec.loader.exec_module = exec_module
        return spec


def activate(out_dir: str) -> None:
    """Arrange for this process to record from ``init_process_group`` on (see module doc)."""
    loaded = sys.modules.get(WATCHED_MODULE)
    if loaded is not None:
        _wrap_init(loaded, out_dir)
    else:
        sys.meta_path.insert(0, _AfterImport(out_dir))
