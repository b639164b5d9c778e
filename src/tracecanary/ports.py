"""A local TCP port for a rendezvous of this machine's ranks."""

from __future__ import annotations

import socket


def free_local_port() -> int:
    """A TCP port on 127.0.0.1 that was free when asked (the rendezvous binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
