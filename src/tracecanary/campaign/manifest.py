"""The campaign manifest: binds config, evidence and every derived artifact by digest.

Classification: an *evidence* item is something that cannot be recomputed: an input
no rule produced (shipped traces, calibration files, nccl-tests logs, configs), or an
output of a non-deterministic rule (live captures, physical attempt archives).
Everything else a rule wrote is *derived*, with the rule, wildcards and the digest of
the provenance record that produced it. ``root_sha256`` is the SHA-256 of the
manifest's canonical JSON without that field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tracecanary.canonical import (
    canonical_json_bytes,
    digest_path,
    sha256_bytes,
    sha256_file,
    write_json,
)
from tracecanary.formats.ids import MANIFEST_FORMAT as FORMAT


def build_manifest(
    *,
    campaign: str,
    config: dict[str, Any],
    config_files: list[str],
    provenance_paths: list[str],
) -> dict:
    records = []
    for path in sorted(provenance_paths):
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        records.append((path, record))
    produced: dict[str, tuple[str, dict]] = {}
    for path, record in records:
        for subject in record["subject"]:
            produced[subject["name"]] = (path, record)
    evidence: dict[str, dict] = {}
    for cfg in config_files:
        evidence[str(cfg)] = {"path": str(cfg), "sha256": digest_path(cfg), "kind": "config"}
    derived = []
    for path, record in records:
        pred = record["predicate"]
        # a recorded (non-deterministic) step's outputs are the evidence; what it read from
        # outside the campaign (an external log it staged) stays in its provenance record
        for entry in pred["inputs"] if pred["deterministic"] else []:
            if entry["path"] not in produced and entry["path"] not in evidence:
                evidence[entry["path"]] = {
                    "path": entry["path"],
                    "sha256": entry["digest"]["sha256"],
                    "kind": "input",
                }
        for subject in record["subject"]:
            item = {
                "path": subject["name"],
                "sha256": subject["digest"]["sha256"],
                "rule": pred["rule"],
                "wildcards": pred["wildcards"],
                "provenance": {"path": path, "sha256": sha256_file(path)},
                "deterministic": pred["deterministic"],
            }
            if pred["deterministic"]:
                derived.append(item)
            else:
                evidence[subject["name"]] = {**item, "kind": "recorded"}
    body = {
        "format": FORMAT,
        "campaign": campaign,
        "config": {"content": config, "files": [evidence[str(c)] for c in config_files]},
        "evidence": [evidence[k] for k in sorted(evidence)],
        "derived": sorted(derived, key=lambda d: d["path"]),
        "provenance": [{"path": p, "sha256": sha256_file(p)} for p, _ in records],
        "store": "sha256/<2 hex>/<62 hex> under the campaign's store folder",
    }
    body["root_sha256"] = sha256_bytes(canonical_json_bytes(body))
    return body


def write_manifest(path: str | os.PathLike, manifest: dict) -> str:
    return write_json(path, manifest)
