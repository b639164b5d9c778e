"""Multi-node physical replay without SLURM: two "hosts" = two network namespaces.

Each namespace gets one end of a veth pair (10.77.0.1/24 and 10.77.0.2/24, addresses
that exist only inside the namespaces this test creates) and its own hostname (a UTS
namespace); nothing else connects them. One ``replay-physical --nnodes 2 --node-rank R
--rdzv-endpoint 10.77.0.1:PORT`` runs in each, gloo bound to the veth
(GLOO_SOCKET_IFNAME), so rendezvous and every collective cross that link. The run
directory is on the shared file system, as on a cluster. Skipped, with the reason, where
namespaces cannot be created (not root, no iproute2, a sandbox without CAP_SYS_ADMIN).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import small_trace, write_doc

from tracecanary.cli import main as cli_main

pytestmark = pytest.mark.slow

RUN_TIMEOUT_S = 180
ADDR = {0: "10.77.0.1", 1: "10.77.0.2"}
RDZV_PORT = 29431


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["ip", *(["netns", "exec", netns, "ip"] if netns else []), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=check)


def _netns_unavailable() -> str | None:
    if sys.platform != "linux":
        return "network namespaces need Linux"
    for tool in ("ip", "unshare", "hostname"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (iproute2/util-linux)"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    return None


@pytest.fixture
def two_hosts():
    """Two namespaces joined by a veth pair; yields ``{node_rank: (netns, ifname)}``."""
    reason = _netns_unavailable()
    if reason:
        pytest.skip(reason)
    tag = f"{os.getpid() % 100000}"
    hosts = {0: (f"tcnr{tag}a", f"tcv{tag}a"), 1: (f"tcnr{tag}b", f"tcv{tag}b")}
    created: list[str] = []
    try:
        for ns, _ in hosts.values():
            res = _ip("netns", "add", ns, check=False)
            if res.returncode != 0:
                pytest.skip(f"cannot create a network namespace here: {res.stderr.strip()}")
            created.append(ns)
        (ns_a, if_a), (ns_b, if_b) = hosts[0], hosts[1]
        _ip("link", "add", if_a, "type", "veth", "peer", "name", if_b)
        _ip("link", "set", if_a, "netns", ns_a)
        _ip("link", "set", if_b, "netns", ns_b)
        for rank, (ns, ifname) in hosts.items():
            _ip("addr", "add", f"{ADDR[rank]}/24", "dev", ifname, netns=ns)
            _ip("link", "set", ifname, "up", netns=ns)
            _ip("link", "set", "lo", "up", netns=ns)
        yield hosts
    finally:
        for ns in created:  # deleting a namespace deletes the veth end inside it
            _ip("netns", "delete", ns, check=False)


def _iface_bytes(ns: str, ifname: str) -> int:
    stats = Path("/sys/class/net") / ifname / "statistics"
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "cat", str(stats / "rx_bytes"), str(stats / "tx_bytes")],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split()
    return sum(int(x) for x in out)


def _node_command(ns: str, hostname: str, argv: list[str]) -> list[str]:
    # own UTS namespace so each "host" reports its own hostname in environment.json
    return [
        "ip",
        "netns",
        "exec",
        ns,
        "unshare",
        "--uts",
        "--",
        "sh",
        "-c",
        'hostname "$0" && exec "$@"',
        hostname,
        *argv,
    ]


def test_replay_spans_two_network_namespaces_over_a_veth_link(tmp_path, two_hosts, capsys):
    trace = write_doc(small_trace(n_steps=2), tmp_path / "trace.json")
    program = tmp_path / "param"
    assert cli_main(["export-param", str(trace), "-o", str(program)]) == 0
    capsys.readouterr()
    out = tmp_path / "attempt"
    before = _iface_bytes(*two_hosts[1])

    procs: dict[int, subprocess.Popen] = {}
    logs: dict[int, Path] = {}
    try:
        for rank, (ns, ifname) in two_hosts.items():
            argv = [
                sys.executable,
                "-m",
                "tracecanary",
                "replay-physical",
                str(program),
                "--backend",
                "gloo",
                "--nproc",
                "1",
                "--nnodes",
                "2",
                "--node-rank",
                str(rank),
                "--rdzv-endpoint",
                f"{ADDR[0]}:{RDZV_PORT}",
                "--warmup",
                "1",
                "--iters",
                "2",
                "--timeout",
                str(RUN_TIMEOUT_S - 30),
                "-o",
                str(out),
            ]
            logs[rank] = tmp_path / f"node{rank}.log"
            with logs[rank].open("w") as log:
                procs[rank] = subprocess.Popen(
                    _node_command(ns, f"tc-host-{'ab'[rank]}", argv),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, "GLOO_SOCKET_IFNAME": ifname},
                    start_new_session=True,
                )
        codes = {rank: p.wait(timeout=RUN_TIMEOUT_S) for rank, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)

    text = {rank: path.read_text() for rank, path in logs.items()}
    assert codes == {0: 0, 1: 0}, text
    attempt = json.loads((out / "attempt.json").read_text())
    env = json.loads((out / "environment.json").read_text())
    assert attempt["status"] == "complete", attempt["reason"]
    assert attempt["nnodes"] == 2 and attempt["world_size"] == 2
    assert attempt["correctness"]["checked_rows"] > 0
    assert attempt["correctness"]["incorrect_rows"] == 0
    assert env["hosts"] == ["tc-host-a", "tc-host-b"]
    placed = {r["rank"]: (r["host"], r["env"].get("GLOO_SOCKET_IFNAME")) for r in env["ranks"]}
    assert placed == {
        0: ("tc-host-a", two_hosts[0][1]),
        1: ("tc-host-b", two_hosts[1][1]),
    }
    # the only way between the namespaces is the veth pair: it must have carried the run
    assert _iface_bytes(*two_hosts[1]) - before > 10_000
    assert not list(tmp_path.glob(".attempt.staging-*")), "staging left behind"
