"""Who else talks to an engine's port: connections the runner did not open (interleaved pairing).

Why: under the interleaved pairing both engines stay started, and while one is measured the other
is frozen. A frozen engine's listening socket still completes TCP handshakes in the kernel, so a
candidate could, during its own turn, open connections to the stock engine and queue requests
that the stock engine would serve once thawed, beside the arena's: the stock engine would look
slower and the candidate's ratio higher. Before an engine is thawed the runner lists every
connection to its port whose client end is not a socket of the runner's own process; any such
connection is the other engine's doing (nothing else on the machine knows the port), and it is
charged to the candidate (scored 0, never a void: rules/idle.py).

Read from /proc/net/tcp and tcp6 (what `ss` reads), each socket with its state, receive queue,
owner uid and inode; the runner's own sockets are the inodes of its file descriptors.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

# The server-side states in which a connection can still bring the engine work: open, half-open
# in the accept queue, or closed by its client with a request the engine has not read. In every
# other state the engine's side is closing or closed.
ESTABLISHED, SYN_RECV, CLOSE_WAIT = "01", "03", "08"
STATES = {ESTABLISHED: "established", SYN_RECV: "syn-received", CLOSE_WAIT: "close-wait"}


@dataclass(frozen=True)
class Socket:
    local: str  # hex address:port as the kernel writes it
    remote: str
    state: str
    rx_queue: int
    uid: int
    inode: int

    @property
    def local_port(self) -> int:
        return int(self.local.rsplit(":", 1)[1], 16)


def sockets() -> list[Socket]:
    out = []
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 10:
                continue
            out.append(Socket(f[1], f[2], f[3], int(f[4].split(":")[1], 16), int(f[7]), int(f[9])))
    return out


def own_socket_inodes(pid: int | None = None) -> set[int]:
    fd_dir = Path(f"/proc/{pid or os.getpid()}/fd")
    inodes = set()
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def foreign_connections(port: int, reads: int = 3, pause: float = 0.05) -> list[str]:
    """Connections to `port` that the runner did not open and that could still bring the engine
    work: open (established, or half-open in the accept queue) or closed by their client with
    data the engine has not read (the kernel counts the client's FIN as one byte unread). A
    connection closed with nothing to read is not work. Each as a line naming the client's uid and the state.

    A connection counts only when `reads` listings in a row, `pause` seconds apart, find it
    foreign: the kernel lists /proc/net/tcp a page at a time, and a listing taken while the runner's
    lanes open and close connections (the sliced pass, sliced.py, checks before every slice) may
    miss a socket. (The false findings of the draft v13's A/A run 9 and of CI had another cause: a
    client port still in TIME_WAIT shadowed the live client socket that reused it; the client end
    is now found by its whole address pair.) A real one waits in the frozen engine's queue and is
    found every time; the pause costs only when the first listing found something."""
    found: dict[tuple[str, str], str] | None = None
    for k in range(reads):
        if k:
            time.sleep(pause)
        now = _foreign_once(port)
        found = now if found is None else {key: v for key, v in now.items() if key in found}
        if not found:
            return []
    return list(found.values())


def _foreign_once(port: int) -> dict[tuple[str, str], str]:
    all_sockets = sockets()
    own = own_socket_inodes()
    # the client end by its whole address pair: a client port in TIME_WAIT from an earlier connection
    # to another port can be reused at once, so a local address alone may name two sockets
    by_pair = {(s.local, s.remote): s for s in all_sockets}
    found = {}
    for s in all_sockets:
        if s.local_port != port or s.state not in STATES:
            continue
        if s.state == CLOSE_WAIT and s.rx_queue <= 1:  # the client's FIN counts one: nothing to read
            continue
        client = by_pair.get((s.remote, s.local))
        if client is not None and client.inode in own:
            continue
        if client is None:
            who = "a client not listed"
        elif client.inode:
            who = f"uid {client.uid}"
        else:  # closed by its process; the kernel keeps it for the rest of the TCP exchange
            who = f"a closed client (uid {client.uid}, tcp state {client.state})"
        found[s.local, s.remote] = f"{who}, {STATES[s.state]}, {s.rx_queue} bytes unread"
    return found
