"""Trials per second one tracking server (mtc.stack: PostgreSQL + ``mlflow server``) sustains
under W concurrent workers that each fit and log trials of about 10 ms.

    python benchmarks/server_throughput.py [--workers 1 2 4 8] [--duration 20]
        [--config KEY=VALUE[,KEY=VALUE...] ...] [--samples-per-cluster 10] [--auth]
        [--max-load 1.0] [--load-wait 1200] [--netns]

``--netns`` (root, iproute2, as CI runs): the server and its PostgreSQL on a host of their
own and the workers on two other hosts, in turn, each host a network namespace joined by a
bridge (tests/netns_cluster.py, without Ray): every request crosses a veth pair and the
bridge, as between machines. Without it, everything on loopback in one namespace.

A configuration (``--config``, repeatable; default ``server_workers=1``) sets:

- ``server_workers=N`` and ``server=uvicorn|gunicorn``: the server's worker processes and
  the web server that runs them. mtc.stack starts ``mlflow server --workers 1`` (uvicorn, the
  MLflow default) and cannot be told otherwise; for any other pair a second ``mlflow server
  --workers N`` (with ``--gunicorn-opts "--worker-class sync"`` for gunicorn) is started here
  on the same PostgreSQL database and artifact folder, on its own free loopback port and in
  its own process group, and the workers log to it; it is stopped after that configuration.
  (uvicorn 0.54 with more than one worker leaves Nagle's algorithm on for its connections:
  every keep-alive request waits ~40 ms for a delayed ACK, uvicorn issue #3149.)
- ``logging=batched|per-value``: ``batched`` logs a trial as a sweep does (tracking.log_trial:
  one ``log_batch`` of params and metrics, one ``trial.npz`` artifact); ``per-value`` logs the
  same params and metrics one call each (``log_param``, ``log_metric``), as the platform did
  before, and the same artifact.
- ``synchronous_commit=on|off``: PostgreSQL's setting, by ``ALTER SYSTEM`` and
  ``pg_reload_conf()`` as the stack's database superuser (reset afterwards).
- ``run_links=on|off``: MLflow's ``set_terminated`` fetches the whole run again (one more
  request, the run's params and metrics in the answer) to print its link, unless
  ``MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT=true``, which ``off`` sets in the workers. Sweeps
  run with ``on`` (the workers' printed links are discarded here).

One stack is started in a fresh folder under /var/tmp (the postgres user reaches it) on free
127.0.0.1 ports, with one experiment and one parent run; max(W) worker processes are started
once, each with its own MlflowClient. For each configuration the script waits until the
1-minute load average is below ``--max-load`` (polled every 30 s, at most ``--load-wait`` s),
runs every worker for 3 s unmeasured (warming the server), then for each W the first W workers each repeat, for ``--duration`` s, what a sweep's worker
does per trial (mtc.sweep.driver.fit_trial then write_fitted, one BLAS thread, here one trial per
write): ``run_trial`` of symmetric NMF on a small synthetic dataset, then ``run_writer.write_runs``.
Everything it started (workers, servers, PostgreSQL, the folder) is stopped and removed at
the end, also on error.

Prints the mean time of one trial's fit alone, then per configuration the load average at its
start and end and one row per W: trials finished, trials/s sustained, the ratio to W=1, the
mean fit (run_trial) and logging (create + log + terminate) times per trial in the workers,
the logging latency's percentiles p50, p95 and p99 (ms), the writes that failed (counted, and
the worker goes on; one example is printed), and the CPU used over the run by the tracking
server's processes, PostgreSQL's processes and the workers (% of one core; this machine has
``os.cpu_count()`` of them).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import queue as queue_module
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from mtc.config import Trial
from mtc.data.synthetic import make_synthetic
from mtc.methods.snmf import SymmetricNMF
from mtc.numerics.cache import Cache
from mtc.stack import server as stack
from mtc.stack.loopback import free_port
from mtc.store import run_writer, tracking
from mtc.store.preflight import process_env
from mtc.trial import run_trial, trial_params

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import netns_cluster  # noqa: E402  (the namespaced hosts of --netns: a test helper)

METHOD = "snmf"
SEEDS_PER_WORKER = 10**7
LEAD_SECONDS = 1.0  # the workers of one run start together this long after it is handed out
WARM_UP_SECONDS = 3.0  # an unmeasured run of every worker before a configuration's runs
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
EXTRA_PORT = 5001  # a second server's port on the namespaced head (--netns): the namespace's ports are its own


@dataclass(frozen=True)
class Configuration:
    """What moves the limit: the web server and its worker processes, the logging calls,
    PostgreSQL's commit and MLflow's run links."""

    server_workers: int = 1
    server: str = "uvicorn"
    logging: str = "batched"
    synchronous_commit: str = "on"
    run_links: str = "on"

    @property
    def label(self) -> str:
        return f"{self.server} x{self.server_workers} {self.logging} sc={self.synchronous_commit} links={self.run_links}"


def parse_configuration(text: str) -> Configuration:
    """``server_workers=2,server=gunicorn,logging=per-value,synchronous_commit=off,run_links=off``
    (any subset) as a Configuration."""
    values = dict(item.split("=", 1) for item in text.split(",") if item)
    unknown = set(values) - {"server_workers", "server", "logging", "synchronous_commit", "run_links"}
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown key(s) {', '.join(sorted(unknown))}")
    config = Configuration(int(values.get("server_workers", 1)), values.get("server", "uvicorn"),
                           values.get("logging", "batched"), values.get("synchronous_commit", "on"),
                           values.get("run_links", "on"))
    if config.server_workers < 1 or config.server not in ("uvicorn", "gunicorn") \
            or config.logging not in ("batched", "per-value") \
            or {config.synchronous_commit, config.run_links} - {"on", "off"}:
        raise argparse.ArgumentTypeError(f"bad configuration {text!r}")
    return config


def fit_problem(samples_per_cluster: int):
    """The dataset, solver prototype and data config of every trial: symmetric NMF on two
    synthetic tasks of 4 clusters (about 10 ms per fit with ``samples_per_cluster=10``)."""
    data_config = {"name": "synthetic", "params": {"n_tasks": 2, "samples_per_cluster": samples_per_cluster}}
    dataset = make_synthetic(**data_config["params"])
    return dataset, SymmetricNMF(n_clusters=dataset.n_clusters), data_config


def log_trial_per_value(client, run_id: str, artifact_uri: str, outcome, trial_config: dict,
                        task_names: list[str]) -> None:
    """What tracking.log_trial logs, with one ``log_param`` or ``log_metric`` call per value."""
    for key, value in tracking.flatten(tracking.run_params(trial_config, outcome.n_samples)).items():
        client.log_param(run_id, key, value[:6000])
    now = int(time.time() * 1000)
    for key, value in outcome.metrics.items():
        client.log_metric(run_id, key, float(value), now, 0)
    trace = np.asarray(outcome.objective_trace, float)
    for step in tracking.chart_steps(trace.size):
        client.log_metric(run_id, tracking.OBJECTIVE_TRACE, float(trace[step]), now, int(step))
    with tempfile.TemporaryDirectory() as tmp:
        np.savez_compressed(os.path.join(tmp, tracking.TRIAL_ARTIFACT),
                            **tracking.trial_arrays(outcome, trial_config, task_names))
        tracking.artifact_repository(client, artifact_uri).log_artifacts(tmp)


def worker(index: int, samples_per_cluster: int, tasks, results) -> None:
    """A worker process: for each task (uri, experiment id, parent id, logging, run links,
    start, stop) from ``tasks``, fit and log trials from ``start`` until ``stop`` (epoch
    seconds), then put its counts on ``results``; ``None`` ends it. It puts its index on
    ``results`` once ready. MLflow's printed run links go to /dev/null."""
    from threadpoolctl import threadpool_limits

    dataset, prototype, data_config = fit_problem(samples_per_cluster)
    tags = {"mtc.benchmark": "server_throughput", **tracking.dataset_tags(dataset)}
    seed = index * SEEDS_PER_WORKER  # every trial a seed (and run name) of its own
    cache = Cache(size=2)  # as a sweep's worker keeps one (mtc.sweep.driver.WORKER_CACHES)
    with threadpool_limits(limits=1), open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        run_trial(dataset, prototype, Trial({}, seed), cache)  # warm-up
        results.put(index)
        for task in iter(tasks.get, None):
            uri, experiment_id, parent_id, logging, run_links, start, stop = task
            os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true" if run_links == "off" else "false"
            client = tracking.client_for(uri)
            fit = log = 0.0
            trials = errors = 0
            latencies, last_error = [], ""
            time.sleep(max(0.0, start - time.time()))
            cpu = sum(os.times()[:2])
            try:
                while time.time() < stop:
                    seed += 1
                    trial = Trial({}, seed)
                    start_ms = int(time.time() * 1000)
                    began = time.perf_counter()
                    outcome = run_trial(dataset, prototype, trial, cache)
                    fitted = time.perf_counter()
                    config = trial_params(METHOD, prototype, trial, data_config)
                    try:
                        if logging == "batched":
                            run_writer.write_runs(client, experiment_id, parent_id, [tracking.trial_record(
                                parent_id, trial, tags, start_ms, outcome, config, dataset.task_names)])
                        else:
                            run = client.create_run(experiment_id, start_time=start_ms, run_name=trial.name,
                                                    tags=tracking.trial_tags(parent_id, trial, tags))
                            log_trial_per_value(client, run.info.run_id, run.info.artifact_uri, outcome, config,
                                                dataset.task_names)
                            client.set_terminated(run.info.run_id, "FINISHED")
                    except Exception as error:  # a request the server failed (or timed out): counted, and on
                        errors += 1
                        last_error = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
                        continue
                    fit += fitted - began
                    latencies.append(time.perf_counter() - fitted)
                    log += latencies[-1]
                    trials += 1
            except Exception as error:
                results.put({"worker": index, "error": f"{type(error).__name__}: {error}"})
                continue
            results.put({"worker": index, "trials": trials, "fit": fit, "log": log, "end": time.time(),
                         "cpu": sum(os.times()[:2]) - cpu, "latencies": latencies, "errors": errors,
                         "last_error": last_error})


def process_table() -> dict[int, tuple[int, float]]:
    """Every live process: {pid: (parent pid, CPU seconds of it and its reaped children)}."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        table[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / CLOCK_TICKS)
    return table


def tree_cpu(root: int, table: dict[int, tuple[int, float]]) -> float:
    """CPU seconds of ``root`` and its live descendants, each with its reaped children."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += table.get(pid, (0, 0.0))[1]
        todo.extend(children.get(pid, []))
    return total


def postmaster_pid(root: Path) -> int:
    return int((root / "pgdata" / "postmaster.pid").read_text().split()[0])


def start_extra_server(running: stack.Stack, workers: int, server: str, host: str = "127.0.0.1",
                       port: int | None = None) -> tuple[int, str]:
    """``mlflow server --workers N`` (uvicorn, or gunicorn's sync workers) on the stack's
    database and artifact folder, on ``host`` and a free port (or ``port``) in its own process
    group, as mtc.stack starts its own; returns (pid, URI)."""
    root, port = Path(running.dir), port or free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_ENABLE_TELEMETRY": "false",
           "DO_NOT_TRACK": "true"}
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", running.database_uri(),
               "--serve-artifacts", "--artifacts-destination", str(root / "artifacts"),
               "--host", host, "--port", str(port), "--workers", str(workers)]
    if server == "gunicorn":
        command += ["--gunicorn-opts", "--worker-class sync"]
    if running.auth:
        env.update(MLFLOW_AUTH_CONFIG_PATH=str(root / "auth.ini"), MLFLOW_FLASK_SERVER_SECRET_KEY=secrets.token_hex(16))
        command += ["--app-name", "basic-auth"]
    log_path = root / f"server-{server}-{workers}.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    uri = f"http://{host}:{port}"
    deadline = time.monotonic() + 120
    while not stack.server_is_up(uri):
        if process.poll() is not None or time.monotonic() > deadline:
            stack.stop_process_group(process.pid)
            raise RuntimeError(f"the {server} x{workers} mlflow server did not start; see {log_path}")
        time.sleep(0.5)
    return process.pid, uri


def set_synchronous_commit(running: stack.Stack, value: str) -> None:
    """PostgreSQL's synchronous_commit for every session, by ALTER SYSTEM and a reload."""
    import psycopg2

    connection = psycopg2.connect(host="127.0.0.1", port=running.db_port, user=stack.DB_USER, dbname="postgres")
    connection.autocommit = True  # ALTER SYSTEM cannot run in a transaction
    try:
        with connection.cursor() as cursor:
            cursor.execute("ALTER SYSTEM SET synchronous_commit = off" if value == "off"
                           else "ALTER SYSTEM RESET synchronous_commit")
            cursor.execute("SELECT pg_reload_conf()")
    finally:
        connection.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the reload is signalled: wait until a new session sees it
        connection = psycopg2.connect(host="127.0.0.1", port=running.db_port, user=stack.DB_USER, dbname="postgres")
        try:
            with connection.cursor() as cursor:
                cursor.execute("SHOW synchronous_commit")
                if cursor.fetchone()[0] == value:
                    return
        finally:
            connection.close()
        time.sleep(0.2)
    raise RuntimeError(f"PostgreSQL did not take synchronous_commit={value}")


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def wait_until_quiet(max_load: float, seconds: float) -> float:
    """Poll the 1-minute load every 30 s until it is below ``max_load`` (at most ``seconds``); returns it."""
    deadline = time.monotonic() + seconds
    while (load := load_average()) >= max_load:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the 1-minute load stayed at or above {max_load} for {seconds:.0f} s (now {load})")
        print(f"  load {load:.2f} >= {max_load}: waiting", flush=True)
        time.sleep(30)
    return load


def one_fit_ms(samples_per_cluster: int, repeats: int = 30) -> tuple[float, float]:
    """Mean milliseconds of the solver's fit and of the whole run_trial (fit + scores), one BLAS thread."""
    from threadpoolctl import threadpool_limits

    dataset, prototype, _ = fit_problem(samples_per_cluster)
    cache = Cache(size=2)
    with threadpool_limits(limits=1):
        run_trial(dataset, prototype, Trial({}, 0), cache)
        fits, trials = [], []
        for seed in range(1, repeats + 1):
            began = time.perf_counter()
            fits.append(run_trial(dataset, prototype, Trial({}, seed), cache).metrics["fit_seconds"])
            trials.append(time.perf_counter() - began)
    return 1000 * float(np.mean(fits)), 1000 * float(np.mean(trials))


def measure(pool, uri: str, experiment_id: str, parent_id: str, config: Configuration, count: int,
            duration: float, cpu_roots: dict[str, int]) -> dict:
    """One run: the first ``count`` workers fit and log for ``duration`` s; trials, rates, CPU."""
    tasks, results, processes = pool
    start = time.time() + LEAD_SECONDS
    for queue in tasks[:count]:
        queue.put((uri, experiment_id, parent_id, config.logging, config.run_links, start, start + duration))
    time.sleep(max(0.0, start - time.time()))
    before = process_table()
    done, deadline = [], time.monotonic() + duration + 120
    while len(done) < count:
        if time.monotonic() > deadline or not all(p.is_alive() for p in processes[:count]):
            raise RuntimeError(f"{count - len(done)} of {count} workers did not report (died or hung)")
        with contextlib.suppress(queue_module.Empty):
            done.append(results.get(timeout=1))
    after, wall = process_table(), time.time() - start
    errors = [d["error"] for d in done if "error" in d]
    if errors:
        raise RuntimeError(f"{len(errors)} worker(s) failed: {errors[0]}")
    trials = sum(d["trials"] for d in done)
    cpu = {name: 100 * (tree_cpu(pid, after) - tree_cpu(pid, before)) / wall for name, pid in cpu_roots.items()}
    latencies = 1000 * np.array([latency for d in done for latency in d["latencies"]])
    p50, p95, p99 = np.percentile(latencies, [50, 95, 99]) if latencies.size else (np.nan,) * 3
    return {"W": count, "trials": trials, "rate": trials / (max(d["end"] for d in done) - start),
            "fit": 1000 * sum(d["fit"] for d in done) / max(trials, 1),
            "log": 1000 * sum(d["log"] for d in done) / max(trials, 1), "p50": p50, "p95": p95, "p99": p99,
            "errors": sum(d["errors"] for d in done),
            "last_error": next((d["last_error"] for d in done if d["last_error"]), ""),
            "server": cpu["server"], "postgres": cpu["postgres"],
            "workers": 100 * sum(d["cpu"] for d in done) / wall}


def print_rows(config: Configuration, rows: list[dict]) -> None:
    base = next((row["rate"] for row in rows if row["W"] == 1), None)
    print(f"{'configuration':40s} {'W':>2s} {'trials':>6s} {'trials/s':>8s} {'x W=1':>6s} {'fit ms':>7s} "
          f"{'log ms':>7s} {'p50':>6s} {'p95':>6s} {'p99':>6s} {'errors':>6s} {'server%':>7s} {'PG%':>5s} "
          f"{'workers%':>8s}")
    for row in rows:
        ratio = f"{row['rate'] / base:6.2f}" if base else f"{'-':>6s}"
        print(f"{config.label:40s} {row['W']:2d} {row['trials']:6d} {row['rate']:8.1f} {ratio} {row['fit']:7.1f} "
              f"{row['log']:7.1f} {row['p50']:6.0f} {row['p95']:6.0f} {row['p99']:6.0f} {row['errors']:6d} "
              f"{row['server']:7.0f} {row['postgres']:5.0f} {row['workers']:8.0f}", flush=True)
    for row in (row for row in rows if row["errors"]):
        print(f"  W={row['W']}: {row['errors']} failed writes, e.g. {row['last_error']}", flush=True)


def run_configuration(running: stack.Stack, pool, experiment_id: str, parent_id: str, config: Configuration,
                      args) -> None:
    """One configuration: its server and PostgreSQL setting, a run per W, the table rows."""
    extra_pid = None
    try:
        server_pid, uri = running.server_pid, running.tracking_uri
        if (config.server, config.server_workers) != ("uvicorn", 1):  # not what mtc.stack started
            host = urlsplit(running.tracking_uri).hostname
            extra_pid, uri = start_extra_server(running, config.server_workers, config.server, host,
                                                EXTRA_PORT if host != "127.0.0.1" else None)
            server_pid = extra_pid
        set_synchronous_commit(running, config.synchronous_commit)
        roots = {"server": server_pid, "postgres": postmaster_pid(Path(running.dir))}
        load = wait_until_quiet(args.max_load, args.load_wait)
        print(f"\n{config.label}: load average at start {load:.2f} ({time.strftime('%H:%M:%S')})", flush=True)
        measure(pool, uri, experiment_id, parent_id, config, max(args.workers), WARM_UP_SECONDS, roots)
        rows = [measure(pool, uri, experiment_id, parent_id, config, count, args.duration, roots)
                for count in args.workers]
        print_rows(config, rows)
        print(f"{config.label}: load average at end {load_average():.2f} ({time.strftime('%H:%M:%S')})", flush=True)
    finally:
        if extra_pid:
            stack.stop_process_group(extra_pid)
        set_synchronous_commit(running, "on")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8], help="concurrent workers W")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds each W runs")
    parser.add_argument("--config", type=parse_configuration, action="append",
                        help="server_workers=N,server=uvicorn|gunicorn,logging=batched|per-value,"
                             "synchronous_commit=on|off,run_links=on|off "
                             "(repeatable)")
    parser.add_argument("--samples-per-cluster", type=int, default=10, help="size of the fit's synthetic tasks")
    parser.add_argument("--auth", action="store_true", help="the server with basic auth, as --auth in mtc.stack")
    parser.add_argument("--max-load", type=float, default=1.0, help="measure only below this 1-minute load")
    parser.add_argument("--load-wait", type=float, default=1200.0, help="seconds to wait for that, at most")
    parser.add_argument("--netns", action="store_true",
                        help="the server on a host of its own and the workers on two others, each a network "
                             "namespace (tests/netns_cluster.py; root, iproute2)")
    args = parser.parse_args()
    if min(args.workers) < 1 or args.duration <= 0:
        parser.error("--workers must be >= 1 and --duration > 0")
    configs = args.config or [Configuration()]
    process_env()  # telemetry off and bounded HTTP retries, as a sweep's workers have
    if args.auth:
        password = secrets.token_urlsafe(16)
        os.environ.update(MTC_MLFLOW_USERNAME="admin", MTC_MLFLOW_PASSWORD=password,
                          MLFLOW_TRACKING_USERNAME="admin", MLFLOW_TRACKING_PASSWORD=password)
    fit_ms, trial_ms = one_fit_ms(args.samples_per_cluster)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; one trial alone: solver fit {fit_ms:.1f} ms, "
          f"run_trial (fit + scores) {trial_ms:.1f} ms (symmetric NMF, 2 synthetic tasks x "
          f"{4 * args.samples_per_cluster} samples, 1 BLAS thread, mean of 30)", flush=True)

    root = Path(tempfile.mkdtemp(prefix="mtc-throughput-", dir="/var/tmp"))
    os.chmod(root, 0o755)  # the postgres user reaches the stack folder
    context = mp.get_context("spawn")
    tasks = [context.Queue() for _ in range(max(args.workers))]
    results = context.Queue()
    processes = [context.Process(target=worker, args=(i, args.samples_per_cluster, queue, results), daemon=True)
                 for i, queue in enumerate(tasks)]
    try:
        with contextlib.ExitStack() as hosts:
            if args.netns:
                cluster = hosts.enter_context(namespaced_hosts(args.auth))
                running = cluster.stack
                hosts.enter_context(netns_cluster.entered(cluster.head.netns))  # the server's host
                where = (f"on host {cluster.head.netns} (namespace), the workers on hosts "
                         f"{', '.join(w.netns for w in cluster.workers)} in turn, over a bridge")
            else:
                running = stack.start(root / "stack", port=free_port(), db_port=free_port(), auth=args.auth)
                where = f"on loopback in {root}"
            print(f"stack {running.tracking_uri} (PostgreSQL 127.0.0.1:{running.db_port}) {where}; "
                  f"{args.duration:.0f} s per W; auth {'on' if args.auth else 'off'}", flush=True)
            client = tracking.client_for(running.tracking_uri)
            experiment_id = tracking.ensure_experiment(client, "server-throughput", None)
            parent_id = client.create_run(experiment_id, run_name="server throughput").info.run_id
            for i, process in enumerate(processes):
                with netns_cluster.entered(cluster.workers[i % len(cluster.workers)].netns) if args.netns \
                        else contextlib.nullcontext():
                    process.start()  # spawned from this thread: in its network namespace
            for _ in processes:
                results.get(timeout=300)  # a worker's index: imported, dataset built, one fit done
            for config in configs:
                run_configuration(running, (tasks, results, processes), experiment_id, parent_id, config, args)
    finally:
        for queue in tasks:
            queue.put(None)
        for process in (p for p in processes if p.pid is not None):  # the started ones
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
                process.join(timeout=10)
        if not args.netns:
            stack.stop(root / "stack")
        subprocess.run(["rm", "-rf", str(root)], check=False)


@contextlib.contextmanager
def namespaced_hosts(auth: bool):
    """The test cluster's hosts without Ray (tests/netns_cluster.py): the head's namespace with
    mtc.stack's PostgreSQL and server on its tracking address, two workers' namespaces, joined
    by a bridge; everything removed at the end, also on error."""
    why = netns_cluster.unavailable()
    if why:
        raise SystemExit(f"--netns: {why}")
    if auth:
        raise SystemExit("--netns runs without --auth")
    cluster = netns_cluster.NetnsCluster(dict(os.environ))
    try:
        netns_cluster.remove_stale()
        cluster.root.mkdir(parents=True)
        (cluster.root / "logs").mkdir()
        cluster.wire()
        cluster.start_tracking()
        yield cluster
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
