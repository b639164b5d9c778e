"""``tracecanary capture -o DIR -- CMD...``: run the user's own torch.distributed program
(``python prog.py`` or ``torchrun ...``), unmodified, with ``tracecanary.record`` active
in every rank, and merge the rank captures into ``DIR/merged.jsonl.gz``
(``tracecanary.autorecord``).

``tracecanary capture --nproc 4 --steps N -o DIR`` (or ``--workload NAME``, a zoo
workload, ``tracecanary.zoo``): run a small real torch.distributed
(gloo, CPU) workload under torch.profiler and write one Kineto trace per rank
(``DIR/rank<r>.json.gz``) plus ``DIR/capture.json``. See ``tracecanary.capture``.

Exit codes: 0 ok; 1 the run failed (a rank raised or timed out; nothing written);
2 bad usage (odd ``--nproc``, ``--steps`` < 1), or a recording refused as incomplete
(``-- CMD``: collectives ran that the recorder did not see; nothing written).
"""

from __future__ import annotations

import argparse

from tracecanary.commands import add_force_option


def register(sub) -> None:
    p = sub.add_parser(
        "capture",
        help="capture a small real gloo workload under torch.profiler, or record your own "
        "program: capture -o DIR -- CMD...",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--nproc", type=int, default=4, help="processes (even)")
    p.add_argument(
        "--workload",
        metavar="NAME",
        help="a zoo workload (ddp, fsdp2_tp, tp_decode, pp, moe; --nproc 4, or 2 for ddp, "
        "tp_decode and pp; see tracecanary.zoo) "
        "(default: the built-in probe workload)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="steps profiled (default 3; a zoo workload: its own default, tp_decode: tokens)",
    )
    p.add_argument("--hidden", type=int, default=64, help="model width")
    p.add_argument("--seq-len", type=int, default=32, help="tokens per step")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before the run is failed")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="output directory: capture.json and one Kineto trace per rank "
        "(with -- CMD: rank<r>.json captures and merged.jsonl.gz)",
    )
    add_force_option(p)
    p.add_argument(
        "user_command",
        nargs=argparse.REMAINDER,
        metavar="-- CMD",
        help="record this command (python or torchrun running your program) instead of a "
        "built-in workload; --timeout applies (default: none, the built-in workload runs)",
    )
    p.set_defaults(func=run)


def _run_user_command(args) -> int:
    from tracecanary.autorecord.run import run_recorded
    from tracecanary.errors import InputError

    cmd = args.user_command[1:] if args.user_command[:1] == ["--"] else args.user_command
    if args.workload is not None:
        raise InputError("--workload and -- CMD exclude each other", field="workload")
    doc = run_recorded(cmd, args.output, timeout_s=args.timeout)
    merged = doc["merged"]
    print(
        f"recorded {doc['ranks']} ranks of {' '.join(cmd)} in {doc['wall_s']} s: "
        f"{merged['events']} events, {merged['collectives']} collectives, skew "
        f"{merged['skew']['status']} -> {args.output}/{merged['file']}"
    )
    for note in doc["completeness"]:
        print(f"  {note}")
    return 0


def run(args) -> int:
    from tracecanary.canonical import check_output_before_running
    from tracecanary.capture import CaptureSettings, capture
    from tracecanary.errors import InputError

    check_output_before_running(args.output, directory=True)  # before anything runs
    if args.user_command:
        return _run_user_command(args)

    if args.workload is not None:
        from tracecanary.zoo.runner import capture_workload

        doc = capture_workload(
            args.workload,
            args.output,
            steps=args.steps,
            timeout_s=max(args.timeout, 300.0),
            nproc=args.nproc,
        )
        settings, noise = doc["settings"], doc["noise"]
        pinned = "a CPU each" if settings["cpus_per_rank"] else "not pinned: ranks share cores"
        print(
            f"captured workload {args.workload}: {settings['nproc']} ranks ({pinned}) x "
            f"{settings['steps']} steps, {doc['import_check']['collectives']} collectives, groups "
            f"settled, in {doc['wall_s']} s (torch {doc['environment']['torch']}, gloo); latency "
            f"CV per signature: median {noise['latency_cv_median']}, max "
            f"{noise['latency_cv_max']} -> {args.output}"
        )
        return 0
    if args.steps is None:
        args.steps = 3

    for name in ("hidden", "seq_len"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1", field=name)
    if args.seq_len % 2:
        raise InputError("--seq-len must be even (tensor-parallel pairs)", field="seq_len")
    if args.timeout <= 0:
        raise InputError("--timeout must be > 0", field="timeout")
    settings = CaptureSettings(
        nproc=args.nproc,
        steps=args.steps,
        hidden=args.hidden,
        seq_len=args.seq_len,
        timeout_s=args.timeout,
    )
    doc = capture(args.output, settings)
    print(
        f"captured {settings.nproc} ranks x {settings.steps} steps in {doc['wall_s']} s "
        f"(torch {doc['environment']['torch']}, gloo) -> {args.output}"
    )
    return 0
