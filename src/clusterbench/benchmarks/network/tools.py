"""Tools of the network benchmark: a TCP test server and clients (standard library sockets and
threads), and runners and parsers for ``iperf3`` and ``ib_write_bw`` (perftest).

These are measurement endpoints between the test's own hosts, not a rendezvous: the ports
they listen on are exchanged through torch.distributed.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TypeVar

import psutil

__all__ = [
    "Ports",
    "Servers",
    "Throughput",
    "ib_write_bw_client",
    "interface_of",
    "iperf3_client",
    "local_address",
    "parse_ib_write_bw",
    "parse_iperf3_json",
    "socket_latency_us",
    "socket_throughput",
    "start_servers",
    "which",
]

which = shutil.which
T = TypeVar("T")
R = TypeVar("R")
_CHUNK_BYTES = 1 << 20
_MESSAGE_BYTES = 64
_LATENCY_WARMUP = 20
_SAMPLE_S = 0.25
_COUNT = struct.Struct("!Q")
_CONNECT_RETRIES = 20


@dataclass(frozen=True)
class Ports:
    socket: int
    iperf3: int | None = None
    rdma: int | None = None


@dataclass(frozen=True)
class Throughput:
    gbps: float
    """End to end: bytes the receiver confirmed / time until it confirmed them."""
    interval_gbps: list[float]
    """Per-interval rates (iperf3's intervals; the socket test samples every 0.25 s)."""
    tool: str


# --- addresses -----------------------------------------------------------------------------


def local_address(bind: str, *, peer: str | None) -> str:
    """The IPv4 address to test over: ``bind`` (address or interface), else the route to peer."""
    if bind:
        addrs = psutil.net_if_addrs().get(bind)
        if addrs is None:
            return bind  # an address, not an interface name
        ipv4 = [a.address for a in addrs if a.family == socket.AF_INET]
        if not ipv4:
            raise ValueError(f"network: interface {bind!r} has no IPv4 address")
        return ipv4[0]
    if not peer:
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((peer, 9))  # UDP connect sends nothing; it only picks the route
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        # On the master node MASTER_ADDR may resolve to loopback (127.0.1.1 in /etc/hosts).
        return _first_global_ipv4() or address
    return address


def _first_global_ipv4() -> str | None:
    stats = psutil.net_if_stats()
    for name, addrs in psutil.net_if_addrs().items():
        if name == "lo" or not (name in stats and stats[name].isup):
            continue
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return str(a.address)
    return None


def interface_of(address: str) -> str | None:
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == address for a in addrs):
            return name
    return None


# --- servers -------------------------------------------------------------------------------


class _SocketServer:
    """Accepts test connections: ``D`` drains and reports the byte count, ``E`` echoes."""

    def __init__(self, address: str, *, timeout_s: float) -> None:
        self._listener = socket.create_server((address, 0))
        self._listener.settimeout(_SAMPLE_S)
        self.port = int(self._listener.getsockname()[1])
        self._timeout_s = timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(self._timeout_s)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=_handle, args=(conn,), daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()


def _handle(conn: socket.socket) -> None:
    with conn:
        try:
            kind = _recv_exact(conn, 1)
            if kind == b"D":
                buf = bytearray(_CHUNK_BYTES)
                total = 0
                while n := conn.recv_into(buf):
                    total += n
                conn.sendall(_COUNT.pack(total))
            elif kind == b"E":
                while msg := _recv_exact(conn, _MESSAGE_BYTES):
                    conn.sendall(msg)
        except OSError:
            pass  # the client reports the failure; a server thread has no one to tell


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    """``size`` bytes, or b"" when the peer closed before sending any."""
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            if data:
                raise ConnectionError("network: connection closed mid-message")
            return b""
        data += chunk
    return bytes(data)


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


class Servers:
    """The servers one node runs for one peer: sockets always, iperf3 and ib_write_bw maybe."""

    def __init__(
        self, address: str, *, iperf3: bool, rdma_device: str | None, timeout_s: float
    ) -> None:
        self._socket = _SocketServer(address, timeout_s=timeout_s)
        self._procs: list[subprocess.Popen[bytes]] = []
        iperf3_port = rdma_port = None
        if iperf3:
            iperf3_port = _free_port(address)
            self._spawn(["iperf3", "-s", "-1", "-B", address, "-p", str(iperf3_port)])
        if rdma_device:
            rdma_port = _free_port(address)
            self._spawn(_ib_write_bw_argv(rdma_device, port=rdma_port))
        self.ports = Ports(socket=self._socket.port, iperf3=iperf3_port, rdma=rdma_port)

    def _spawn(self, argv: list[str]) -> None:
        self._procs.append(
            subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )

    def stop(self) -> None:
        self._socket.stop()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)  # one-shot servers end after their client
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start_servers(
    address: str, *, iperf3: bool, rdma_device: str | None, timeout_s: float
) -> Servers:
    return Servers(address, iperf3=iperf3, rdma_device=rdma_device, timeout_s=timeout_s)


# --- clients -------------------------------------------------------------------------------


def socket_throughput(address: str, *, port: int, streams: int, duration_s: float) -> Throughput:
    """``streams`` TCP connections sending for ``duration_s``; the server confirms the bytes."""
    conns = [
        socket.create_connection((address, port), timeout=duration_s + 30) for _ in range(streams)
    ]
    sent = [0] * streams
    start = threading.Barrier(streams + 1)

    def send(i: int) -> tuple[int, float]:
        conn, chunk = conns[i], memoryview(bytes(_CHUNK_BYTES))
        try:
            with conn:
                conn.sendall(b"D")
                start.wait(timeout=duration_s + 30)
                end = time.perf_counter() + duration_s
                while time.perf_counter() < end:
                    conn.sendall(chunk)
                    sent[i] += len(chunk)
                conn.shutdown(socket.SHUT_WR)
                count = _recv_exact(conn, _COUNT.size)
                if not count:
                    raise ConnectionError("network: server closed without confirming the bytes")
                return int(_COUNT.unpack(count)[0]), time.perf_counter()
        except BaseException:
            start.abort()  # release the others: this test has failed
            raise

    with ThreadPoolExecutor(max_workers=streams) as pool:
        futures = [pool.submit(send, i) for i in range(streams)]
        try:
            start.wait(timeout=duration_s + 30)
        except threading.BrokenBarrierError:
            wait(futures)
        t0 = time.perf_counter()
        intervals = _sample_rates(sent, until=lambda: all(f.done() for f in futures))
        results = _results_or_first_error(futures)
    total = sum(r for r, _ in results)
    elapsed = max(t for _, t in results) - t0
    # Gb/s = bytes * 8 / s / 1e9
    return Throughput(gbps=total * 8 / elapsed / 1e9, interval_gbps=intervals, tool="socket")


def _results_or_first_error(futures: list[Future[R]]) -> list[R]:
    """Every result; else the first real error (not a sender released by another's failure)."""
    wait(futures)
    errors = [e for f in futures if (e := f.exception()) is not None]
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if errors:
        raise (real or errors)[0]
    return [f.result() for f in futures]


def _sample_rates(sent: list[int], *, until: Callable[[], bool]) -> list[float]:
    """Sender-side rate (Gb/s) of each full interval of ``_SAMPLE_S`` while senders run."""
    rates = []
    last_t, last_bytes = time.perf_counter(), sum(sent)
    while not until():
        time.sleep(_SAMPLE_S)
        now, total = time.perf_counter(), sum(sent)
        if until():
            break  # a partial last interval
        rates.append((total - last_bytes) * 8 / (now - last_t) / 1e9)
        last_t, last_bytes = now, total
    return rates


def socket_latency_us(address: str, *, port: int, rounds: int) -> list[float]:
    """Round-trip times (us) of 64 B messages over one TCP connection (Nagle off)."""
    msg = bytes(_MESSAGE_BYTES)
    rtts = []
    with socket.create_connection((address, port), timeout=30) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(b"E")
        for i in range(_LATENCY_WARMUP + rounds):
            t0 = time.perf_counter_ns()
            conn.sendall(msg)
            if len(_recv_exact(conn, _MESSAGE_BYTES)) != _MESSAGE_BYTES:
                raise ConnectionError("network: echo server closed the connection")
            if i >= _LATENCY_WARMUP:
                rtts.append((time.perf_counter_ns() - t0) / 1e3)
    return rtts


def _run_retrying(argv: list[str], *, timeout_s: float, parse: Callable[[str], T]) -> T:
    """Run a client until its server (started just before) answers; its parsed output."""
    error = ""
    for _ in range(_CONNECT_RETRIES):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        if proc.returncode == 0:
            try:
                return parse(proc.stdout)  # iperf3 -J exits 0 with {"error": ...}
            except (RuntimeError, ValueError) as exc:
                error = str(exc)
        else:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            error = lines[-1] if lines else f"exit status {proc.returncode}"
        time.sleep(0.5)
    raise RuntimeError(f"network: {argv[0]} failed {_CONNECT_RETRIES} times: {error}")


def iperf3_client(address: str, *, port: int, streams: int, duration_s: float) -> Throughput:
    seconds = max(1, math.ceil(duration_s))  # iperf3 -t takes whole seconds
    argv = ["iperf3", "-c", address, "-p", str(port), "-P", str(streams), "-t", str(seconds), "-J"]
    return _run_retrying(argv, timeout_s=seconds + 60, parse=parse_iperf3_json)


def parse_iperf3_json(text: str) -> Throughput:
    """iperf3 -J output: the receiver's total rate and the per-interval sums."""
    data = json.loads(text)
    if data.get("error"):
        raise RuntimeError(f"network: iperf3: {data['error']}")
    end = data["end"]
    summary = end.get("sum_received") or end["sum"]
    intervals = [
        i["sum"]["bits_per_second"] / 1e9
        for i in data.get("intervals", [])
        if not i["sum"].get("omitted", False)
    ]
    return Throughput(gbps=summary["bits_per_second"] / 1e9, interval_gbps=intervals, tool="iperf3")


def _ib_write_bw_argv(device: str, *, port: int) -> list[str]:
    return ["ib_write_bw", "-d", device, "--report_gbits", "-F", "-p", str(port)]


def ib_write_bw_client(address: str, *, port: int, device: str, timeout_s: float) -> float:
    argv = [*_ib_write_bw_argv(device, port=port), address]
    return _run_retrying(argv, timeout_s=timeout_s, parse=parse_ib_write_bw)


def parse_ib_write_bw(text: str) -> float:
    """The ``BW average`` column of ib_write_bw's result table, in Gb/s."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "BW average" not in line:
            continue
        columns = re.split(r"\s{2,}", line.strip())
        col = next(j for j, c in enumerate(columns) if c.startswith("BW average"))
        for row in lines[i + 1 :]:
            fields = row.split()
            if len(fields) > col and fields[0].isdigit():
                value = float(fields[col])
                # perftest's MB is 2^20 bytes; --report_gbits prints Gb/s (1e9 bit/s)
                return value if "Gb/sec" in columns[col] else value * 2**20 * 8 / 1e9
    raise ValueError("network: no 'BW average' result in ib_write_bw output")
