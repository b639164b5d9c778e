"""The PARAM comms-replay contract in one place: export of a canary or program to PARAM's
basic per-rank trace format (``export``), reading an export directory back for replay
(``program``), PARAM dtype names (``dtypes``) and PARAM replay results -> attempt
archive (``results``)."""
