from tracecanary.campaign.manifest import build_manifest, write_manifest

sm = snakemake  # noqa: F821
manifest = build_manifest(
    campaign=sm.wildcards.campaign,
    config=dict(sm.config),
    config_files=list(sm.params.config_files),
    provenance_paths=list(sm.input.records),
)
write_manifest(sm.output.manifest, manifest)
