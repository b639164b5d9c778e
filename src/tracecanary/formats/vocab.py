"""Collective vocabularies shared by stages that must agree (and load nothing heavy)."""

# the nccl-tests perf binaries' collectives, as ladders and sweeps name them
LADDER_COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "sendrecv",
)
