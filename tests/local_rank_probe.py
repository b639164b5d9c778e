"""A rank program for tests/test_local_ranks.py: ``main(argv)`` as
``tracecanary.physical.local_ranks`` runs it, one behaviour per argv.

``env DIR``: write this rank's pid and launcher variables to ``DIR/rank<r>.json``;
``exit R C``: rank R returns C, the others wait (to be stopped);
``signal R``: rank R kills itself with SIGKILL, the others wait;
``raise R``: rank R raises, the others wait."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
             "MASTER_PORT", "GROUP_RANK", "TORCHELASTIC_MAX_RESTARTS")  # fmt: skip


def main(argv: list[str]) -> int:
    rank = int(os.environ["RANK"])
    what = argv[0]
    if what == "env":
        record = {"pid": os.getpid(), "torch": "torch" in sys.modules}
        record.update({k: os.environ.get(k) for k in VARIABLES})
        Path(argv[1], f"rank{rank}.json").write_text(json.dumps(record))
        return 0
    if rank != int(argv[1]):
        time.sleep(120)  # a peer that would outlive the test unless it is stopped
        return 0
    if what == "exit":
        return int(argv[2])
    if what == "signal":
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"rank {rank} was told to raise")
