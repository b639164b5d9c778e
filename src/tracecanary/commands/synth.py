"""``tracecanary synth decode|adversarial|training``: deterministic synthetic inputs."""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("synth", help="generate deterministic synthetic traces")
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    d = kinds.add_parser(
        "decode", help="4-rank decode capture set: one file per rank + calibration"
    )
    d.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="output directory: rank<r>.<format> per rank and calibration.json",
    )
    d.add_argument("--ranks", type=int, default=4, help="ranks (processes)")
    d.add_argument("--ranks-per-host", type=int, default=2, help="ranks sharing one host clock")
    d.add_argument("--events-per-rank", type=int, default=20_500, help="collective events per rank")
    d.add_argument("--seed", type=int, default=20261130, help="random seed")
    d.add_argument(
        "--layers", type=int, default=16, help="transformer layers (two all_reduces each per step)"
    )
    d.add_argument("--hidden", type=int, default=8192, help="hidden size (sets message bytes)")
    d.add_argument("--requests", type=int, default=4, help="decode requests")
    d.add_argument(
        "--prompt-tokens",
        type=int,
        default=2048,
        help="prompt length in tokens (sets the prefill message size)",
    )
    d.add_argument("--tail-windows", type=int, default=6, help="injected tail-latency windows")
    d.add_argument(
        "--format",
        choices=["jsonl.gz", "jsonl", "json"],
        default="jsonl.gz",
        help="trace file format",
    )
    d.set_defaults(func=run_decode)
    a = kinds.add_parser(
        "adversarial",
        help="100-occurrence trace whose isolated ranking differs from its workload ranking",
    )
    a.add_argument("-o", "--output", required=True, metavar="FILE", help="trace file (.json)")
    a.set_defaults(func=run_adversarial)
    t = kinds.add_parser(
        "training",
        help="training trace (tp x pp x dp ranks): tensor-parallel collectives, pipeline "
        "send/recv, data-parallel gradient buckets; streamed as JSON Lines",
    )
    t.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE.jsonl[.gz]",
        help="trace file (.jsonl, optionally .gz)",
    )
    t.add_argument("--tp", type=int, default=8, help="tensor-parallel size")
    t.add_argument("--pp", type=int, default=4, help="pipeline stages")
    t.add_argument("--dp", type=int, default=4, help="data-parallel size")
    t.add_argument("--steps", type=int, default=10, help="training steps")
    t.add_argument("--microbatches", type=int, default=8, help="microbatches per step")
    t.add_argument(
        "--layers-per-stage", type=int, default=2, help="transformer layers per pipeline stage"
    )
    t.add_argument("--seed", type=int, default=20261201, help="random seed")
    t.set_defaults(func=run_training)


def run_decode(args) -> int:
    from tracecanary.canonical import write_json
    from tracecanary.errors import InputError
    from tracecanary.synth.decode import DecodeSpec, build_decode
    from tracecanary.trace_io import write_trace

    if args.ranks < 2 or args.ranks_per_host < 1 or args.events_per_rank < 100:
        raise InputError(
            "need --ranks >= 2, --ranks-per-host >= 1, --events-per-rank >= 100", field="synth"
        )
    spec = DecodeSpec(
        ranks=args.ranks,
        ranks_per_host=args.ranks_per_host,
        events_per_rank=args.events_per_rank,
        seed=args.seed,
        layers=args.layers,
        hidden=args.hidden,
        requests=args.requests,
        prompt_tokens=args.prompt_tokens,
        tail_windows=args.tail_windows,
    )
    docs, calibration = build_decode(spec)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for rank, doc in enumerate(docs):
        write_trace(doc, out / f"rank{rank}.{args.format}")
    write_json(out / "calibration.json", calibration)
    print(
        f"wrote {len(docs)} rank captures of {len(docs[0]['events'])} events + calibration.json to {out}",
        file=sys.stderr,
    )
    return 0


def run_adversarial(args) -> int:
    from tracecanary.synth.adversarial import build_adversarial
    from tracecanary.trace_io import write_trace

    write_trace(build_adversarial(), args.output)
    return 0


def run_training(args) -> int:
    from tracecanary.synth.training import write_training

    summary = write_training(
        args.output,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        steps=args.steps,
        seed=args.seed,
        microbatches=args.microbatches,
        layers_per_stage=args.layers_per_stage,
    )
    print(
        f"wrote {summary['events']:,} events of {summary['ranks']} ranks "
        f"({summary['occurrences']:,} occurrences, {summary['steps']} steps) to {args.output} "
        f"sha256:{summary['sha256']}",
        file=sys.stderr,
    )
    return 0
