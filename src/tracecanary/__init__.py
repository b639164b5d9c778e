"""TraceCanary: distil communication traces into small, verified, replayable canaries.

Follows the CommCanary design (see ../shared/seeds); every stage is a pure function
over tables at the core, with I/O and process launching at the edges.
"""

__version__ = "0.1.0"
