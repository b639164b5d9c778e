"""One module per CLI stage; each defines ``register(subparsers)`` (see tracecanary.cli)."""
