"""Campaign concerns: provenance records, the manifest and its operations (verify,
regenerate, pack, unpack), the Snakemake bridge and the one-page summary."""
