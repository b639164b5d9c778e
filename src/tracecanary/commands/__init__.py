"""One module per CLI stage; each defines ``register(subparsers)`` (see tracecanary.cli).
The ``add_*_option`` helpers write each shared option once."""

import argparse
import os

OUTPUT_OPTIONS = ("output", "markdown", "plot_dir", "log", "verification", "diagnostics_json")
"""The destinations of every option that names something a command writes; every other
argument may name an input (``cli`` refuses an output that is, or holds, one of them:
``canonical.check_outputs_spare_inputs``). A new option naming an output belongs here."""


NOT_INPUTS = ("user_command",)
"""Arguments that are no input of the command: ``capture -- CMD``'s command line is the
user's program's own (its ``--logdir DIR`` may well be the capture's ``-o DIR``)."""


def outputs_and_inputs(args) -> tuple[dict[str, str], list[str]]:
    """The parsed command's outputs ({option: path}, ``OUTPUT_OPTIONS`` that were given)
    and every other text argument (a possible input path)."""
    outputs: dict[str, str] = {}
    inputs: list[str] = []
    for name, value in vars(args).items():
        if name in NOT_INPUTS:
            continue
        if name in OUTPUT_OPTIONS:
            if isinstance(value, str | os.PathLike):
                outputs[name] = os.fspath(value)
            continue
        values = value if isinstance(value, list | tuple) else [value]
        inputs.extend(os.fspath(v) for v in values if isinstance(v, str | os.PathLike))
    return outputs, inputs


def add_force_option(parser) -> None:
    """``--force``: a directory output may replace an existing non-empty directory
    (never the current directory or an ancestor; see ``canonical.check_output_target``)."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing non-empty output directory (default: refuse, exit 2)",
    )


def add_backends_option(parser) -> None:
    """``--backends B``: simulator configurations (default: the shipped example)."""
    parser.add_argument(
        "--backends",
        default=None,
        metavar="B",
        help="simulator configurations YAML "
        "(default: the shipped example, tracecanary/defaults/backends.yaml)",
    )


def add_tolerances_option(parser) -> None:
    """``--tolerances T``: behavior-verification tolerances (default: the shipped ones)."""
    parser.add_argument(
        "--tolerances",
        metavar="T",
        help="tolerances YAML (default: the shipped tracecanary/defaults/tolerances.yaml)",
    )


def add_standard_option(parser) -> None:
    """``--standard S``: what behaviour is held to (``verify.claims.STANDARDS``)."""
    from tracecanary.verify.claims import DEFAULT_STANDARD, STANDARDS

    parser.add_argument(
        "--standard",
        choices=STANDARDS,
        default=DEFAULT_STANDARD,
        help="what each behaviour check is held to: strict (the fixed tolerances) or "
        "reproducibility (also passes inside the source's own 95%% block-bootstrap "
        "interval of that statistic); both figures are reported either way",
    )


def add_second_capture_option(parser) -> None:
    """``--second-capture TRACE``: another capture of the same program (its spread)."""
    parser.add_argument(
        "--second-capture",
        metavar="TRACE",
        help="another capture of the same program (native trace or normalized Parquet): each "
        "check's source interval is widened to hold its value there (default: none)",
    )


def load_second_capture(args):
    """(program, SHA-256) of ``args.second_capture``, or None when not given."""
    if not args.second_capture:
        return None
    from tracecanary.canonical import sha256_file
    from tracecanary.errors import located
    from tracecanary.load import load_program

    with located(args.second_capture):
        program = load_program(args.second_capture, executed=False)
    return program, sha256_file(args.second_capture)


def add_configs_option(parser, *, what: str) -> None:
    """``--config NAME`` (repeatable): the simulator configurations to ``what`` (default all)."""
    parser.add_argument(
        "--config",
        action="append",
        metavar="NAME",
        help=f"configurations to {what} (repeatable; default: all)",
    )


def add_rendezvous_options(parser) -> None:
    """``--nnodes``, ``--node-rank``, ``--rdzv-endpoint``, ``--rdzv-id``: where the ranks
    of a multi-node run meet (see ``physical.launch.Topology``)."""
    parser.add_argument("--nnodes", type=int, default=1, help="nodes taking part")
    parser.add_argument(
        "--node-rank",
        type=int,
        default=None,
        help="static rendezvous: this node's rank (default: none; needed when --nnodes > 1)",
    )
    parser.add_argument(
        "--rdzv-endpoint",
        default=None,
        metavar="HOST:PORT",
        help="multi-node rendezvous endpoint (default: none; needed when --nnodes > 1)",
    )
    parser.add_argument(
        "--rdzv-id",
        default=None,
        help="multi-node: id shared by all nodes, names the staging dir (default: none)",
    )


def topology_from_args(args):
    """The ``physical.launch.Topology`` the ``--nproc`` and rendezvous options name."""
    from tracecanary.physical.launch import Topology  # loads torch: only when a command runs

    return Topology(
        nproc=args.nproc,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_id=args.rdzv_id,
    )


class _QuietAction(argparse.Action):
    """``--quiet`` takes effect when parsed (``progress.set_quiet``), so no command has
    to pass it on to the library code that draws progress."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from tracecanary.progress import set_quiet

        set_quiet(True)
        setattr(namespace, self.dest, True)


def add_quiet_option(parser) -> None:
    """``--quiet``: no progress bars (they are shown only when stderr is a terminal)."""
    parser.add_argument(
        "--quiet",
        action=_QuietAction,
        help="no progress bars (shown only when stderr is a terminal; default: shown there)",
    )


def add_order_option(parser) -> None:
    """``--order time|canonical``: the order the source's occurrences are compiled in
    (``formats.vocab.OCCURRENCE_ORDERS``); the canary declares a canonical one."""
    from tracecanary.formats.vocab import OCCURRENCE_ORDERS

    parser.add_argument(
        "--order",
        choices=OCCURRENCE_ORDERS,
        default="time",
        help="occurrence order of the source: time (by earliest member arrival) or "
        "canonical (each rank's issue order merged by structure, independent of timing "
        "jitter between concurrent groups; written into the canary) (default: time)",
    )


def add_diagnostics_option(parser) -> None:
    """``--diagnostics-json PATH``: the failed checks, their numbers and the fix
    (``tracecanary.diagnostics``), written on exit 0 and on exit 1, never on exit 2."""
    parser.add_argument(
        "--diagnostics-json",
        metavar="PATH",
        default=None,
        help="also write the failed checks, their numbers and the fix here "
        "(tracecanary.diagnostics/v1; written on exit 0 and 1; default: not written)",
    )


def add_judge_inputs(parser, *, canary_help: str) -> None:
    """SOURCE, CANARY, ``--backends``, ``--tolerances`` and ``--config``: the inputs of
    every command that judges a canary against its source (``judge_canary_against_source``)."""
    parser.add_argument(
        "source", metavar="SOURCE", help="the source: native trace or normalized Parquet"
    )
    parser.add_argument("canary", metavar="CANARY", help=canary_help)
    add_backends_option(parser)
    add_tolerances_option(parser)
    add_configs_option(parser, what="replay")


def add_table_outputs(parser, *, metavar: str, what: str) -> None:
    """``--markdown TABLE.md`` and ``-o/--output``: a judging command's document and,
    optionally, its table as markdown."""
    parser.add_argument(
        "--markdown", metavar="TABLE.md", help="also write the table as markdown (default: none)"
    )
    parser.add_argument("-o", "--output", required=True, metavar=metavar, help=what)


def judge_canary_against_source(args, judge, **extra) -> dict:
    """Load ``args.backends``, ``args.tolerances``, the canary ``args.canary`` and the
    source program ``args.source`` in the order the canary declares (errors located at
    the file they come from), then return
    ``judge(source, canary, backends, tolerances, source_digest=..., canary_digest=...,
    config_names=args.config, **extra)``: the shared front of verify-behavior and
    baselines."""
    from tracecanary.canonical import sha256_file
    from tracecanary.compile.document import declared_order, load_canary
    from tracecanary.errors import located
    from tracecanary.load import load_program
    from tracecanary.sim.backends import load_backends
    from tracecanary.verify.behavior import load_tolerances

    backends = load_backends(args.backends)
    tolerances = load_tolerances(args.tolerances)
    with located(args.canary):
        canary = load_canary(args.canary)
    with located(args.source):  # in the order the canary declares
        source = load_program(args.source, executed=False, order=declared_order(canary))
    with located(args.canary):
        return judge(
            source,
            canary,
            backends,
            tolerances,
            source_digest=sha256_file(args.source),
            canary_digest=sha256_file(args.canary),
            config_names=args.config,
            **extra,
        )
