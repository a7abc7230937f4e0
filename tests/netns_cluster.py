"""A test cluster of three hosts on one machine, each in a network namespace of its own: the
head (the Ray head, with no CPUs, and mtc.stack's tracking server on its PostgreSQL) and two
workers (Ray worker nodes). The hosts are joined by two bridges in a fourth namespace (the
switch), so nothing is added to the machine's own namespace and nothing can leave the machine:

- the Ray network 10.213.0.0/24 (br0): the head .2, the workers .3, .4; every Ray process binds
  its host's address (``ray start --node-ip-address``);
- the tracking network 10.213.1.0/24 (br1): the tracking server listens on the head's 10.213.1.2
  only, so cutting that one link (``cut_tracking``) takes the server away from the workers while
  Ray keeps running. PostgreSQL listens on the head's own 127.0.0.1 (mtc.stack as it is).

No namespace has a default route: a host reaches its bridges' subnets and its own loopback.

The driver runs in the head's namespace (``in_netns(cluster.head)``: ``ip netns exec``): Ray's
driver joins the raylet of its own host (ray._private.services.get_node_to_connect_for_driver
picks the head among the raylets it sees), so it must sit on a host of the Ray network, and
the root namespace gets no address there. The test's own calls (the MLflow client, psycopg2)
run in the head's namespace through ``entered(name)``, which moves the calling thread only.

A host is lost with ``lose`` (its cables cut, every process of it killed, one process group
spared if asked: a driver that outlives its head). A lost worker comes back with ``revive``; a
lost head with ``restore_head`` (its Ray temp folder gone as a rebooted host's /tmp, PostgreSQL and the tracking server started again on
the same folder, a new Ray head), then ``restart_workers`` (on each worker what an operator
does once the head is back: ``ray stop``, ``ray start``).

A part of a host fails alone (benchmarks/chaos_run.py): ``kill_ray`` (a host's raylet and ``ray
start`` killed, the host up) and ``restart_ray`` (the operator's ``ray stop``, ``ray start``);
``kill_tracking_server`` and ``kill_database`` (the head's server or PostgreSQL killed) and
``start_stack`` (the operator's ``python -m mtc.stack start``, which brings back the part that is
down). ``strays`` lists the processes of the hosts that none of these parts owns.

``close`` removes everything, also after a failure: the server and PostgreSQL stopped by
mtc.stack, then every process of each namespace killed (``ip netns pids``), the namespaces
deleted (their veths and bridges with them) and the cluster's folders removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "mtcns"  # namespaces mtcns-<pytest pid>-<token>-<role>; a dead pid's are removed as stale
RAY_NET, TRACKING_NET = "10.213.0", "10.213.1"
RAY_PORT, SERVER_PORT, DB_PORT = 6379, 5000, 5433  # a namespace's ports are its own: fixed ports are free
CLONE_NEWNET = 0x40000000
RAY = str(Path(sys.executable).with_name("ray"))
PLUGIN = Path(__file__).parent / "plugin"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why this machine cannot host the cluster (a skip reason), or None."""
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    for command, package in (("ip", "iproute2"), ("runuser", "util-linux; mtc.stack runs PostgreSQL with it")):
        if not shutil.which(command):
            return f"no {command} command ({package})"
    from mtc.errors import InputError
    from mtc.stack.server import postgres_binary

    try:
        postgres_binary("initdb")
    except InputError as error:
        return str(error)
    probe = f"{PREFIX}-{os.getpid()}-probe"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        bridge = ip("-n", probe, "link", "add", "br0", "type", "bridge", check=False)
        veth = ip("-n", probe, "link", "add", "v0", "type", "veth", "peer", "name", "v1", check=False)
    finally:
        ip("netns", "del", probe, check=False)
    for what, done in (("a bridge", bridge), ("a veth pair", veth)):
        if done.returncode != 0:
            return f"cannot create {what} in a namespace: {done.stderr.strip()}"
    return None


@contextlib.contextmanager
def entered(netns: str):
    """Run the calling thread in the network namespace ``netns`` (setns(2): that thread only;
    the processes it starts and the sockets it opens are in it too), then back."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"setns into {netns}: {os.strerror(error)}")
        finally:
            os.close(target)
        try:
            yield
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back into the test's own network namespace")
    finally:
        os.close(own)


def netns_pids(netns: str) -> list[int]:
    done = ip("netns", "pids", netns, check=False)
    return [int(pid) for pid in done.stdout.split()] if done.returncode == 0 else []


def process_group(pid: int) -> int | None:
    """The process group of ``pid``, or None if it is gone."""
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def reaped(pid: int) -> bool:
    """Whether ``pid`` has ended and is no more, or is a zombie of this process (its Popen reaps
    it). A killed process leaves its namespace at once (``ip netns pids`` lists it no more) but
    its pid lives on as a zombie until its parent reaps it; an orphan's parent is PID 1, which
    here reaps about once a second. PostgreSQL, started again on its folder meanwhile, sees the
    pid of its lock file alive and refuses to start ("lock file postmaster.pid already exists")."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    return fields[0] in ("Z", "X") and int(fields[1]) == os.getpid()


def kill_everything_in(netns: str, seconds: float = 20.0, spare: int | None = None) -> int:
    """SIGKILL every process of the namespace until none is left (a dying Ray node can still
    fork), but those of process group ``spare``, and wait until their pids are gone (reaped);
    returns how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + seconds
    while pids := [pid for pid in netns_pids(netns) if spare is None or process_group(pid) != spare]:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} of namespace {netns} survive SIGKILL")
        time.sleep(0.1)
    while unreaped := [pid for pid in killed if not reaped(pid)]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {unreaped} of namespace {netns} were killed but not reaped")
        time.sleep(0.1)
    return len(killed)


def command_of(pid: int) -> list[str]:
    """The command line of ``pid`` (empty if it is gone or a zombie)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def folder_of(pid: int) -> str | None:
    """The working folder of ``pid`` (PostgreSQL's processes work in its data folder), or None."""
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/cwd")
    return None


def wait_until(condition, what: str, seconds: float = 30.0) -> None:
    """Until ``condition()`` holds; TimeoutError naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not {what} after {seconds} s")
        time.sleep(0.1)


def left_by_a_dead_process(name: str) -> bool:
    """Whether ``name`` (mtcns-<pid>-...) is a cluster's whose test process is gone."""
    parts = name.split("-")
    return len(parts) >= 3 and parts[0] == PREFIX and parts[1].isdigit() and not Path(f"/proc/{parts[1]}").exists()


def remove_stale() -> None:
    """Remove the namespaces and folders of earlier test processes that died before their clean-up."""
    for line in ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if left_by_a_dead_process(name):
            with contextlib.suppress(RuntimeError):
                kill_everything_in(name)
            ip("netns", "del", name, check=False)
    for folder in (*Path("/var/tmp").glob(f"{PREFIX}-*"), *Path("/tmp").glob(f"{PREFIX}-*")):
        if left_by_a_dead_process(folder.name):
            shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Host:
    """One host: its role (head, w1, w2), namespace, addresses and its Ray node's process."""

    role: str
    netns: str
    index: int
    ray_node: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def ray_ip(self) -> str:
        return f"{RAY_NET}.{self.index}"

    @property
    def tracking_ip(self) -> str:
        return f"{TRACKING_NET}.{self.index}"

    def inode(self) -> int:
        """Its network namespace's inode (what /proc/PID/ns/net of its processes point to)."""
        return os.stat(f"/run/netns/{self.netns}").st_ino


def in_netns(host: Host, *command: str) -> list[str]:
    return ["ip", "netns", "exec", host.netns, *command]


class NetnsCluster:
    """The three hosts (``workers`` workers of ``worker_cpus`` CPUs each); ``env`` is every Ray
    node's environment (RAY_AUTH_MODE, RAY_AUTH_TOKEN, PYTHONPATH, ...), ``head_env`` what the
    head adds (Ray's health-check settings). Use as a context manager."""

    def __init__(self, env: dict[str, str], workers: int = 2, worker_cpus: int = 2,
                 head_env: dict[str, str] | None = None, worker_env: dict[str, str] | None = None):
        self.token = f"{os.getpid()}-{secrets.token_hex(2)}"
        self.env = {**env, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
        self.head_env = head_env or {}
        self.worker_env = worker_env or {}
        self.worker_cpus = worker_cpus
        self.switch = f"{PREFIX}-{self.token}-sw"
        self.head = Host("head", f"{PREFIX}-{self.token}-head", 2)
        self.workers = [Host(f"w{i}", f"{PREFIX}-{self.token}-w{i}", 2 + i) for i in range(1, workers + 1)]
        # /var/tmp: the postgres user must reach the stack's folder (mtc.stack.server.stack_dir);
        # Ray's folders in a short path under /tmp (its Unix sockets' paths are limited to 107 bytes)
        self.root = Path(f"/var/tmp/{PREFIX}-{self.token}")
        self.ray_root = Path(f"/tmp/{PREFIX}-{self.token}")
        self.markers = self.ray_root / "markers"
        self.stack = None
        self.namespaces: list[str] = []

    @property
    def hosts(self) -> list[Host]:
        return [self.head, *self.workers]

    @property
    def ray_address(self) -> str:
        return f"{self.head.ray_ip}:{RAY_PORT}"

    @property
    def tracking_uri(self) -> str:
        return self.stack.tracking_uri

    def __enter__(self) -> NetnsCluster:
        try:
            remove_stale()
            self.root.mkdir(parents=True)
            (self.root / "logs").mkdir()
            self.markers.mkdir(parents=True)
            self.wire()
            self.start_node(self.head)
            self.start_tracking()
            self.start_ray()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # the network
    def port(self, host: Host, net: int) -> str:
        """The switch's port (a veth end) of ``host`` on bridge ``br<net>``."""
        return f"{host.role}-{net}"

    def wire(self) -> None:
        for name in (self.switch, *(host.netns for host in self.hosts)):
            ip("netns", "add", name)
            self.namespaces.append(name)
        for net in (0, 1):
            ip("-n", self.switch, "link", "add", f"br{net}", "type", "bridge")
            ip("-n", self.switch, "link", "set", f"br{net}", "up")
        for host in self.hosts:
            ip("-n", host.netns, "link", "set", "lo", "up")
            for net, address in ((0, host.ray_ip), (1, host.tracking_ip)):
                port = self.port(host, net)
                ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", f"eth{net}", "netns",
                   host.netns)
                ip("-n", self.switch, "link", "set", port, "master", f"br{net}", "up")
                ip("-n", host.netns, "addr", "add", f"{address}/24", "dev", f"eth{net}")
                ip("-n", host.netns, "link", "set", f"eth{net}", "up")

    def set_links(self, host: Host, up: bool, nets: tuple[int, ...] = (0, 1)) -> None:
        """Plug (``up``) or unplug ``host``'s cables at the switch."""
        for net in nets:
            ip("-n", self.switch, "link", "set", self.port(host, net), "up" if up else "down")

    @contextlib.contextmanager
    def tracking_cut(self, answers_only: bool = False):
        """The tracking server cut off from the workers within; Ray's network is untouched and
        the driver (on the head) still reaches the server. By default the head's tracking link
        is unplugged: every packet between the workers and the server is lost. With
        ``answers_only`` only the head's packets to the workers are (a blackhole route on the
        head for each worker's tracking address): a request a worker sends on an open
        connection reaches the server and is served, but its answer never arrives, so the
        worker sends it again; no new connection can be opened (its SYN-ACK is lost)."""
        if answers_only:
            routes = [("blackhole", f"{worker.tracking_ip}/32") for worker in self.workers]
            for route in routes:
                ip("-n", self.head.netns, "route", "add", *route)
        else:
            self.set_links(self.head, False, (1,))
        try:
            yield
        finally:
            if answers_only:
                for route in routes:
                    ip("-n", self.head.netns, "route", "del", *route)
            else:
                self.set_links(self.head, True, (1,))

    # the tracking server
    def start_tracking(self) -> None:
        """mtc.stack's PostgreSQL (on the head's 127.0.0.1) and server (on the head's tracking
        address), started from a thread in the head's namespace: the processes start there."""
        from mtc.stack import server

        with entered(self.head.netns):
            self.stack = server.start(self.root / "stack", host=self.head.tracking_ip, port=SERVER_PORT,
                                      db_port=DB_PORT)

    # Ray
    def ray_command(self, host: Host) -> list[str]:
        flags = [f"--node-ip-address={host.ray_ip}", f"--temp-dir={self.ray_root / host.role}",
                 "--disable-usage-stats", "--object-store-memory=100000000", "--block"]
        if host is self.head:
            return [RAY, "start", "--head", f"--port={RAY_PORT}", "--num-cpus=0", "--include-dashboard=false",
                    *flags]
        return [RAY, "start", f"--address={self.ray_address}", f"--num-cpus={self.worker_cpus}", *flags]

    def start_node(self, host: Host) -> None:
        env = {**self.env, **(self.head_env if host is self.head else
                              {**self.worker_env, "MTC_TEST_FIT_MARKERS": str(self.markers)})}
        log = open(self.root / "logs" / f"ray-{host.role}.log", "ab")
        host.ray_node = subprocess.Popen(in_netns(host, *self.ray_command(host)), env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def start_ray(self) -> None:
        """The head's node (started by __enter__ before the tracking server, which takes as
        long to start), then the workers' nodes, until all have joined."""
        self.wait_for_port(self.head, RAY_PORT)
        for worker in self.workers:
            self.start_node(worker)
        self.wait_for_nodes(len(self.hosts))

    def wait_for_port(self, host: Host, port: int, seconds: float = 60.0) -> None:
        deadline = time.monotonic() + seconds
        with entered(host.netns):
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex((host.ray_ip, port)) == 0:
                        return
                time.sleep(0.3)
        raise TimeoutError(f"nothing listens on {host.ray_ip}:{port} in {host.netns} after {seconds} s")

    def wait_for_nodes(self, count: int, seconds: float = 120.0) -> None:
        """Until the cluster has ``count`` live nodes, asked by a driver on the head."""
        code = ("import sys; from mtc.stack.loopback import wait_for_nodes; "
                f"wait_for_nodes({self.ray_address!r}, {count}, {seconds})")
        done = subprocess.run(in_netns(self.head, sys.executable, "-c", code), env=self.env, capture_output=True,
                              text=True, timeout=seconds + 60)
        if done.returncode != 0:
            raise RuntimeError(f"the Ray cluster did not reach {count} nodes: {done.stderr.strip()[-2000:]}")

    def lose(self, host: Host, spare: int | None = None) -> int:
        """The host is lost: its cables cut first (no goodbye packet leaves it), then every
        process in its namespace killed but those of process group ``spare`` (a driver started
        with ``start_new_session`` that outlives its host, standing for one on another host);
        returns how many were killed. The head's processes are its Ray node, the tracking
        server and PostgreSQL (killed as by a power cut: the database recovers from its WAL on
        restart)."""
        self.set_links(host, False)
        killed = kill_everything_in(host.netns, spare=spare)
        if host.ray_node is not None:
            host.ray_node.wait(timeout=10)
            host.ray_node = None
        return killed

    def revive(self, host: Host) -> None:
        """The lost host back: its cables plugged and its Ray node started again (a new node)."""
        self.set_links(host, True)
        self.start_node(host)
        self.wait_for_nodes(len(self.hosts))

    def restore_head(self) -> None:
        """The lost head back, as a host rebooted: its cables plugged, its Ray temp folder gone
        (/tmp does not survive a reboot; kept, ``ray start --head`` would refuse to start: it
        reads its last address there and sees it in use by the workers' raylets, which it finds
        with ps, every host's processes being this machine's), PostgreSQL and the tracking
        server started again by mtc.stack on the same folder (its database and artifacts kept),
        then a new Ray head (a new cluster: the workers' raylets, if still up, belong to the
        old one). The workers are not waited for: see restart_workers."""
        from mtc.stack import server

        self.set_links(self.head, True)
        shutil.rmtree(self.ray_root / self.head.role, ignore_errors=True)
        folder = Path(self.stack.dir)
        try:
            with entered(self.head.netns):
                self.stack = server.start(folder, host=self.head.tracking_ip, port=SERVER_PORT, db_port=DB_PORT)
        except RuntimeError as error:
            log = (folder / "postgres.log").read_text(errors="replace")[-1500:]
            raise RuntimeError(f"the head's stack did not start again: {error}; end of postgres.log:\n{log}") from error
        self.start_node(self.head)
        self.wait_for_port(self.head, RAY_PORT)

    def restart_workers(self) -> list[int | None]:
        """What an operator does on each worker once its lost head is back: ``ray stop`` (every
        process of the host ended, the trials its raylet still ran for the lost head's driver
        with them), then ``ray start`` to the new head; returns each worker's Ray node's exit
        code when it was stopped (None: it still ran; Ray's raylet gives up on a lost head by
        itself, gcs_rpc_server_reconnect_timeout_s, 60 s by default)."""
        codes = []
        for worker in self.workers:
            codes.append(self.stop_ray(worker))
            self.start_node(worker)
        self.wait_for_nodes(len(self.hosts))
        return codes

    def stop_ray(self, host: Host) -> int | None:
        """``ray stop`` on ``host``: every process of it ended; returns its Ray node's exit code
        when it was stopped (None: it still ran)."""
        code = None if host.ray_node is None else host.ray_node.poll()
        kill_everything_in(host.netns)
        if host.ray_node is not None:
            host.ray_node.wait(timeout=10)
            host.ray_node = None
        return code

    # one part fails, the host up
    def kill_ray(self, host: Host) -> list[int]:
        """``host``'s Ray crashes: SIGKILL to its raylet and its ``ray start``; returns their pids.
        Its other Ray processes (agents, workers) are left as such a crash leaves them."""
        raylets = [pid for pid in netns_pids(host.netns) if Path((command_of(pid) or [""])[0]).name == "raylet"]
        pids = [*raylets, *([host.ray_node.pid] if host.ray_node is not None else [])]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids

    def restart_ray(self, host: Host) -> None:
        """What an operator does on a host whose Ray is down: ``ray stop``, ``ray start``, until
        every node has joined."""
        self.stop_ray(host)
        self.start_node(host)
        self.wait_for_nodes(len(self.hosts))

    def kill_tracking_server(self) -> int:
        """SIGKILL to the tracking server's process group (its pid from mtc.stack's stack.json);
        returns that pid once none of the group is left."""
        from mtc.stack import server

        pid = server.load_state(Path(self.stack.dir)).server_pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        wait_until(lambda: not any(process_group(p) == pid for p in netns_pids(self.head.netns)),
                   f"the tracking server's process group {pid} gone")
        server.reap(pid)  # a server this process started
        return pid

    def kill_database(self) -> int:
        """SIGKILL to PostgreSQL's postmaster (its lock file stays); returns its pid once it and
        its children are gone."""
        from mtc.stack import server

        data = str((Path(self.stack.dir) / "pgdata").resolve())
        pid = server.running_database(Path(self.stack.dir)).pid
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: reaped(pid) and not any(folder_of(p) == data for p in netns_pids(self.head.netns)),
                   f"PostgreSQL {pid} gone with its children")
        return pid

    def start_stack(self) -> None:
        """``python -m mtc.stack start --dir D`` on the head, as an operator brings back the part
        of the stack that is down (the other is left as it runs)."""
        from mtc.stack import server

        folder = Path(self.stack.dir)
        done = subprocess.run(in_netns(self.head, sys.executable, "-m", "mtc.stack", "start", "--dir", str(folder)),
                              env=self.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"python -m mtc.stack start failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
        self.stack = server.load_state(folder)

    def strays(self) -> list[str]:
        """The processes of the hosts that no part of the cluster owns (a host's Ray node: its
        ``ray start``'s process group; the tracking server's process group; PostgreSQL: its
        postmaster and the processes working in its data folder), as '<role> <pid> <command>'."""
        from mtc.stack import server

        owners = {host.ray_node.pid for host in self.hosts if host.ray_node is not None}
        data, database = None, None
        if self.stack is not None:
            owners.add(server.load_state(Path(self.stack.dir)).server_pid)
            data = str((Path(self.stack.dir) / "pgdata").resolve())
            database = server.running_database(Path(self.stack.dir))
        found = []
        for host in self.hosts:
            for pid in netns_pids(host.netns):
                if process_group(pid) in owners or (database and pid == database.pid) or folder_of(pid) == data:
                    continue
                found.append(f"{host.role} {pid} {' '.join(command_of(pid))[:200]}")
        return found

    # clean-up
    def close(self) -> None:
        """Stop and remove everything this cluster made; every step runs even if one fails."""
        errors = []
        if self.stack is not None:
            from mtc.stack import server

            if netns_pids(self.head.netns):  # else the head was lost and not restored: nothing of it runs
                try:
                    server.stop(Path(self.stack.dir))
                except Exception as error:  # the namespace's processes are killed below anyway
                    errors.append(error)
            self.stack = None
        for name in reversed(self.namespaces):
            try:
                kill_everything_in(name)
            except Exception as error:
                errors.append(error)
        for host in self.hosts:
            if host.ray_node is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    host.ray_node.wait(timeout=10)
                host.ray_node = None
        for name in reversed(self.namespaces):
            done = ip("netns", "del", name, check=False)
            if done.returncode != 0:
                errors.append(RuntimeError(f"ip netns del {name}: {done.stderr.strip()}"))
        self.namespaces.clear()
        for folder in (self.root, self.ray_root):
            shutil.rmtree(folder, ignore_errors=True)
        if errors:
            raise errors[0]
