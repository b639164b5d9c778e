"""Every Snakemake script calls the library the same way: ``run_rule(snakemake)``, which
runs the stage named after the rule in tracecanary.campaign.stages."""

from __future__ import annotations

import re

from conftest import REPO

from tracecanary.campaign.stages import STAGES

CALL = ["from tracecanary.campaign.workflow import run_rule", "run_rule(snakemake)  # noqa: F821"]


def _code_lines(path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def test_every_script_is_the_one_run_rule_call():
    scripts = sorted((REPO / "scripts").glob("*.py"))
    assert scripts
    different = [p.name for p in scripts if _code_lines(p) != CALL]
    assert different == []


def test_every_rule_script_is_named_after_its_rule_and_has_a_stage():
    rule_scripts = {}
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        for block in re.split(r"^rule ", text, flags=re.M)[1:]:
            name = block.split(":", 1)[0].strip()
            script = re.search(r'script:\s*\n\s*"\.\./\.\./scripts/([A-Za-z_]+)\.py"', block)
            if script:
                rule_scripts[name] = script.group(1)
    assert rule_scripts
    assert {rule: s for rule, s in rule_scripts.items() if rule != s} == {}
    assert sorted(set(rule_scripts) - set(STAGES)) == []
