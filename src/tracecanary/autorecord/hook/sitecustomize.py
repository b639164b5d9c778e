"""Loaded by every Python process of a ``tracecanary capture -- CMD`` run (this folder is
first on PYTHONPATH): activates recording (``tracecanary.autorecord.activate``) when
``TRACECANARY_RECORD_DIR`` is set, then runs the ``sitecustomize`` it shadows, if any."""

import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_out = os.environ.get("TRACECANARY_RECORD_DIR")
if _out:
    from tracecanary.autorecord import activate

    activate(_out)

# the environment's own sitecustomize, which this file hides: run it as it would have run
_path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_self = sys.modules.pop("sitecustomize", None)
_saved, sys.path[:] = list(sys.path), _path
try:
    importlib.import_module("sitecustomize")
except ImportError:
    pass
finally:
    sys.path[:] = _saved
    if _self is not None and "sitecustomize" not in sys.modules:
        sys.modules["sitecustomize"] = _self
