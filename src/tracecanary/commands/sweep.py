"""``tracecanary sweep --collective C --min-bytes A --max-bytes B -o LADDER/``: an
nccl-tests-style ladder through real collectives, kept as an attempt archive (kind
``sweep``). ``--print-table`` prints the nccl-tests table computed from the rows. Sizes are
nccl-tests' total buffer (scatter: the root's send buffer; gather: its receive buffer).

Exit codes: 0 complete; 1 the attempt failed (a rank died or hung, or a rung failed its
data-correctness check; the archive is still written, marked failed); 2 bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tracecanary.commands import (
    add_force_option,
    add_quiet_option,
    add_rendezvous_options,
    topology_from_args,
)
from tracecanary.errors import RunFailed
from tracecanary.formats.vocab import LADDER_COLLECTIVES as COLLECTIVES


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="nccl-tests-style size ladder through real collectives",
        description=__doc__,
    )
    p.add_argument(
        "--collective",
        required=True,
        choices=COLLECTIVES,
        help="collective to sweep (broadcast, reduce, scatter, gather: root 0; scatter and "
        "gather: native mode only)",
    )
    p.add_argument("--min-bytes", default="1", help="smallest total buffer (e.g. 1, 8, 1K)")
    p.add_argument("--max-bytes", default="64M", help="largest total buffer (e.g. 64M, 1G)")
    p.add_argument("--factor", type=float, default=2.0, help="size multiplier between rungs")
    p.add_argument("--dtype", default="float32", help="element type")
    p.add_argument("--warmup", type=int, default=5, help="untimed iterations per rung")
    p.add_argument("--iters", type=int, default=20, help="timed iterations per rung")
    p.add_argument("--cycles", type=int, default=1, help="passes over the whole ladder")
    p.add_argument(
        "--backend", choices=("gloo", "nccl"), default="gloo", help="torch.distributed backend"
    )
    p.add_argument("--nproc", type=int, required=True, help="ranks per node")
    add_rendezvous_options(p)
    p.add_argument(
        "--physical-config",
        default=None,
        metavar="NAME",
        help="configuration name in --physical-configs: env and mode, not fused (default: none, plain run)",
    )
    p.add_argument(
        "--physical-configs",
        default=None,
        metavar="YAML",
        help="physical configurations YAML, used with --physical-config (default: the shipped tracecanary/defaults/physical.yaml)",
    )
    p.add_argument(
        "--timeout", type=float, default=1800.0, metavar="S", help="kill the run after S seconds"
    )
    p.add_argument("--print-table", action="store_true", help="print the nccl-tests table")
    p.add_argument(
        "--fault",
        default=None,
        metavar="SPEC",
        help="TEST AID: kill-rank=R | hang-rank=R | corrupt-rank=R (default: none)",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="LADDER", help="ladder archive directory"
    )
    add_force_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.parquet_io import read_parquet
    from tracecanary.physical.config import default_configs_path
    from tracecanary.physical.sweep import format_table, parse_size, run_sweep

    topology = topology_from_args(args)
    configs = None
    if args.physical_config is not None:
        configs = args.physical_configs or default_configs_path()
    doc = run_sweep(
        args.output,
        collective=args.collective,
        min_bytes=parse_size(args.min_bytes, "--min-bytes"),
        max_bytes=parse_size(args.max_bytes, "--max-bytes"),
        factor=args.factor,
        dtype=args.dtype,
        backend=args.backend,
        topology=topology,
        warmup=args.warmup,
        iters=args.iters,
        cycles=args.cycles,
        configs_path=configs,
        config_name=args.physical_config,
        timeout_s=args.timeout,
        fault=args.fault,
        progress=None if args.quiet else sys.stderr,
    )
    if doc is None:
        return 0
    if args.print_table and doc["rows_file"]:
        rows = read_parquet(Path(args.output) / doc["rows_file"]).to_pandas()
        sys.stdout.write(format_table(rows, doc))
    if doc["status"] != "complete":
        raise RunFailed(
            f"sweep failed: {doc['reason']} (evidence kept in {args.output})", file=args.output
        )
    print(
        f"{args.output}: {doc['status']}, {doc['rows']} rows, {len(doc['sweep']['rungs_bytes'])} rungs",
        file=sys.stderr,
    )
    return 0
