"""``tracecanary replay-param EXPORT --param PATH_OR_MODULE --nproc N -o ATTEMPT/``: replay
an export in upstream PARAM's ``commsTraceReplay`` (on the launcher of ``replay-physical``, with the documented
compatibility patches of ``tracecanary.param.compat`` applied at launch) and keep the
attempt archive, as ``replay-physical`` does for our replayer.

The export should be written with ``export-param --target param-1e115ff``; an export
holding an op upstream would mis-execute is refused before anything runs. Multi-node
and SLURM: the same options as ``replay-physical`` (``python -m
tracecanary.physical.slurm_launch replay-param ...``).

Exit codes: 0 complete; 1 the attempt failed (a rank died or hung, or PARAM skipped an
op; the archive is still written, marked failed); 2 bad input (nothing written).
"""

from __future__ import annotations

import sys

from tracecanary.commands import add_force_option, add_rendezvous_options, topology_from_args


def register(sub) -> None:
    p = sub.add_parser(
        "replay-param",
        help="replay an export (DIR/<rank>.json) in upstream PARAM's commsTraceReplay",
        description=__doc__,
    )
    p.add_argument("program", metavar="EXPORT", help="export-param output: DIR/<rank>.json")
    p.add_argument("-o", "--output", required=True, metavar="ATTEMPT", help="archive directory")
    add_force_option(p)
    p.add_argument(
        "--param",
        required=True,
        metavar="PATH_OR_MODULE",
        help="a PARAM checkout (holding train/comms/pt/commsTraceReplay.py) or the "
        "importable replayer module (param_bench.train.comms.pt[.commsTraceReplay])",
    )
    p.add_argument(
        "--param-commit",
        default=None,
        metavar="SHA",
        help="PARAM's commit, when git or SOURCE.md cannot tell it (default: what they say)",
    )
    p.add_argument(
        "--backend", choices=("gloo", "nccl"), default="gloo", help="torch.distributed backend"
    )
    p.add_argument("--nproc", type=int, required=True, help="ranks per node")
    p.add_argument(
        "--iters", type=int, default=5, help="recorded passes (PARAM --num-replays; default 5)"
    )
    p.add_argument(
        "--use-timestamps",
        action="store_true",
        help="PARAM --use-timestamp: each op waits until its startTime_ns",
    )
    p.add_argument(
        "--timeout", type=float, default=900.0, metavar="S", help="kill the run after S seconds"
    )
    add_rendezvous_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.param.upstream import replay_param

    topology = topology_from_args(args)
    doc = replay_param(
        args.program,
        args.output,
        param=args.param,
        backend=args.backend,
        topology=topology,
        iters=args.iters,
        use_timestamps=args.use_timestamps,
        timeout_s=args.timeout,
        param_commit=args.param_commit,
        replace=args.force,
        progress=sys.stderr,
    )
    if doc is not None:
        print(
            f"{args.output}: {doc['status']}, {doc['rows']} rows from upstream PARAM, "
            f"{doc['wall_time_ns'] / 1e9:.2f} s"
        )
    return 0
