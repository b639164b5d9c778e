"""Campaign configs are untrusted: they travel inside archives and are run by reviewers.

Guarantees:

- ``refuse_evaluating_config`` reads a config's raw text with the package's one YAML
  loader (``tracecanary.limits.load_yaml``: safe tags only, under the resource policy)
  and refuses, exit 2 naming the file and key, a config that asks for evaluation:
  Snakemake 9 reads config files through ``yte``, which evaluates ``?expr`` values
  when the document sets ``__use_yte__`` (``__definitions__`` is yte's code block). A
  tag that would construct a Python object is refused by the loader itself. Call it
  *before* Snakemake reads the file.
- ``check_store_inside``: the content-addressed store is a relative folder inside the
  working directory unless the config sets ``allow_external_store: true``.
- ``check_paths_inside``: every output path a campaign names resolves inside
  ``results/<campaign>`` (identifiers are also constrained by the config schema, so
  this is the second guard, not the first).
- ``second_captures``: each source's ``second_capture`` (another source of the campaign,
  a second capture of the same program), refused, exit 2 naming the source, where it
  names no other source of the campaign.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tracecanary.errors import InputError
from tracecanary.limits import load_yaml

# keys through which yte evaluates a document (any level is refused)
EVALUATING_KEYS = frozenset({"__use_yte__", "__definitions__", "__variables__"})
STORE_DEFAULT = "results/cas"
EXTERNAL_STORE_FLAG = "allow_external_store"


def _evaluating_key(doc: Any, path: str = "") -> str | None:
    stack = [(doc, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                here = f"{where}.{key}" if where else str(key)
                if key in EVALUATING_KEYS:
                    return here
                stack.append((value, here))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
    return None


def refuse_evaluating_config(path: str | os.PathLike) -> Any:
    """The config document of ``path`` read without evaluating anything; InputError
    if it enables yte (``__use_yte__``) or any other evaluation (see module doc)."""
    doc = load_yaml(path)
    key = _evaluating_key(doc)
    if key is not None:
        raise InputError(
            "config asks Snakemake to evaluate expressions (yte); refused: a campaign "
            "config is data, never code",
            file=str(path),
            field=key,
        )
    return doc


def refuse_evaluating_configs(paths: Iterable[str | os.PathLike]) -> None:
    """``refuse_evaluating_config`` on each path that exists (the Snakefile passes its
    default config file and every ``--configfile``)."""
    for path in paths:
        if Path(path).exists():
            refuse_evaluating_config(path)


def _inside(path: str | os.PathLike, root: Path) -> bool:
    resolved = Path(os.path.normpath(Path.cwd() / path))
    return resolved == root or root in resolved.parents


def check_store_inside(config: dict, workdir: str | os.PathLike = ".", *, file: str) -> None:
    """Refuse a ``store`` outside ``workdir`` (absolute, or leaving it through ``..``)
    unless ``allow_external_store`` is true."""
    store = config.get("store", STORE_DEFAULT)
    if config.get(EXTERNAL_STORE_FLAG) is True:
        return
    root = Path(os.path.normpath(Path.cwd() / workdir))
    if (
        not isinstance(store, str)
        or not store
        or Path(store).is_absolute()
        or not _inside(Path(workdir) / store, root)
        or Path(os.path.normpath(Path.cwd() / workdir / store)) == root
    ):
        raise InputError(
            f"store {str(store)[:200]!r} is not a folder inside the working directory "
            f"(set {EXTERNAL_STORE_FLAG}: true to allow it)",
            file=file,
            field="store",
        )


def check_paths_inside(paths: Iterable[str], campaign: str, *, file: str) -> None:
    """Refuse any of ``paths`` (relative to the working directory) that does not
    resolve inside ``results/<campaign>``."""
    root = Path(os.path.normpath(Path.cwd() / "results" / campaign))
    if root.parent != Path(os.path.normpath(Path.cwd() / "results")):
        raise InputError(f"campaign {campaign[:200]!r} is not one folder name", file=file)
    for path in paths:
        if (
            Path(path).is_absolute()
            or not _inside(path, root)
            or Path(os.path.normpath(Path.cwd() / path)) == root
        ):
            raise InputError(
                f"output path {str(path)[:200]!r} leaves results/{campaign}",
                file=file,
                field="output",
            )


OUTPUT_ROOTS = ("results", "logs", "benchmarks")
# a Snakemake wildcard, with its optional constraint: {name} or {name,regex}
_WILDCARD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:,(?:[^{}]|\{[^{}]*\})*)?\}")


def check_rule_outputs(rules: Iterable[Any], campaign: str, *, file: str) -> None:
    """Refuse a workflow whose rules name an output, log or benchmark that is not under
    ``results|logs|benchmarks/<campaign>/`` (absolute, or with a ``..`` component).
    Wildcards other than ``{campaign}`` take config identifiers (schema pattern), so
    they cannot add a ``..`` or a ``/``."""
    for rule in rules:
        benchmark = getattr(rule, "benchmark", None)
        patterns = [*rule.output, *rule.log, *([benchmark] if benchmark else [])]
        for pattern in patterns:
            concrete = _WILDCARD.sub(
                lambda m: campaign if m.group(1) == "campaign" else "w", str(pattern)
            )
            parts = Path(concrete).parts
            if (
                Path(concrete).is_absolute()
                or ".." in parts
                or len(parts) < 3
                or parts[0] not in OUTPUT_ROOTS
                or parts[1] != campaign
            ):
                raise InputError(
                    f"rule {rule.name} writes {str(pattern)[:200]!r}, outside "
                    f"{'|'.join(OUTPUT_ROOTS)}/{campaign}",
                    file=file,
                    field="output",
                )


def second_captures(config: dict, *, file: str) -> dict[str, str]:
    """``{source id: the id of its second capture}`` for every source that names one;
    InputError (exit 2) naming the source where the id is not another source's."""
    ids = [source["id"] for source in config["sources"]]
    out = {}
    for k, source in enumerate(config["sources"]):
        other = source.get("second_capture")
        if other is None:
            continue
        if other not in ids or other == source["id"]:
            raise InputError(
                f"source {source['id']}: second_capture {other!r} is not another source of "
                f"this campaign ({', '.join(ids)})",
                file=file,
                field=f"sources[{k}].second_capture",
            )
        out[source["id"]] = other
    return out
