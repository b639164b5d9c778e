"""``tracecanary replay-physical DIR -o ATTEMPT/``: replay a PARAM export through real
collectives (torchrun + torch.distributed) and keep the attempt archive as evidence.

Exit codes: 0 complete; 1 the attempt failed (a rank died or hung, or a row failed its
data-correctness check; the archive is still written, marked failed); 2 bad input.
"""

from __future__ import annotations

import sys

from tracecanary.commands import (
    add_diagnostics_option,
    add_force_option,
    add_quiet_option,
    add_rendezvous_options,
    topology_from_args,
)


def register(sub) -> None:
    p = sub.add_parser(
        "replay-physical",
        help="replay a PARAM export (DIR/<rank>.json) through real collectives",
        description=__doc__,
    )
    p.add_argument("program", metavar="DIR", help="export-param output: DIR/<rank>.json")
    p.add_argument("-o", "--output", required=True, metavar="ATTEMPT", help="archive directory")
    add_force_option(p)
    p.add_argument(
        "--backend", choices=("gloo", "nccl"), default="gloo", help="torch.distributed backend"
    )
    p.add_argument("--nproc", type=int, required=True, help="ranks per node")
    p.add_argument("--warmup", type=int, default=1, help="untimed passes")
    p.add_argument("--iters", type=int, default=5, help="timed passes")
    p.add_argument(
        "--use-timestamps",
        action="store_true",
        help="each timed op waits until its startTime_ns after the pass started",
    )
    p.add_argument(
        "--physical-config",
        default=None,
        metavar="NAME",
        help="configuration name in --physical-configs (default: the file's default)",
    )
    p.add_argument(
        "--physical-configs",
        default=None,
        metavar="YAML",
        help="physical configurations YAML (default: the shipped tracecanary/defaults/physical.yaml)",
    )
    p.add_argument(
        "--timeout", type=float, default=900.0, metavar="S", help="kill the run after S seconds"
    )
    add_rendezvous_options(p)
    p.add_argument(
        "--fault",
        default=None,
        metavar="SPEC",
        help="TEST AID: kill-rank=R | hang-rank=R | corrupt-rank=R, recorded in attempt.json (default: none)",
    )
    add_diagnostics_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tracecanary.diagnostics import diagnostics_to

    with diagnostics_to(args.diagnostics_json, "replay-physical") as diagnostics:
        return _run(args, diagnostics)


def _run(args, diagnostics) -> int:
    from tracecanary.diagnostics import FIX_PHYSICAL, failed_check
    from tracecanary.errors import RunFailed
    from tracecanary.physical.config import default_configs_path
    from tracecanary.physical.replay import replay_physical

    topology = topology_from_args(args)
    try:
        doc = replay_physical(
            args.program,
            args.output,
            backend=args.backend,
            topology=topology,
            warmup=args.warmup,
            iters=args.iters,
            use_timestamps=args.use_timestamps,
            configs_path=args.physical_configs or default_configs_path(),
            config_name=args.physical_config,
            timeout_s=args.timeout,
            fault=args.fault,
            progress=None if args.quiet else sys.stderr,
        )
    except RunFailed as err:  # the attempt archive is kept; the diagnostics say why
        diagnostics.fail(
            [failed_check("physical_attempt", err.message, fix=FIX_PHYSICAL)],
            f"{err.one_line()}; fix: {FIX_PHYSICAL}",
        )
        raise
    if doc is not None:
        print(
            f"{args.output}: {doc['status']}, {doc['rows']} rows, "
            f"{doc['wall_time_ns'] / 1e9:.2f} s ({doc['physical_config']['name']})"
        )
    return 0
