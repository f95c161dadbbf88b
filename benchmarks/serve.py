"""Load benchmark of `optim serve`: throughput and p50/p99 latency at 1, 8 and 32 concurrent clients, with and
without dynamic batching, on ResNet-18 (224x224) and MiniLM-L6 (sequence 128; and 16, short queries).

    .venv/bin/python benchmarks/serve.py [--models resnet18,minilm,minilm16] [--clients 1,8,32]
        [--duration 10] [--warmup 1] [--max-batch 8] [--max-delay-ms 5] [--threads 1] [--json out.json]
        [--no-markdown]

The models come from realsize_prepare's cache (exported by optim, MiniLM as `optim export minilm` does, and
optimized; fp32). Per model and mode, `optim serve` runs as a child process (--threads intra-op threads; "off" is
--max-batch 1, "on" is --max-batch/--max-delay-ms); closed-loop clients (tritonclient over HTTP, binary tensors,
one sample per request, one thread and connection each) send requests back to back, timing each request at the
client. Both servers run at once and are driven in turn, off then on, ROUNDS times per client count (each slot
--warmup seconds not counted, then --duration / ROUNDS seconds counted): both modes see the same machine. The
server's own metrics give the mean batch and the mean compute time of a batch during the row.

The latency bound each row is checked against: with C clients in batches of b rows (the row's mean), a request waits
at most max_delay, then for the batch running when it arrived and for the ceil(C/b) batches that C clients can have
queued up to and including its own, and, as server and clients share the CPU, for the C requests' overhead o: p99 <=
max_delay + (ceil(C/b) + 1) * t + C * o (without batching max_delay = 0, b = 1), t the row's mean batch compute time
(the server's metrics), o the median latency of one client without batching less its mean compute (HTTP, protocol,
the client's own work). The session-alone batch times T(1) and T(max_batch) are reported too: T(B) / B against T(1)
is what batching can gain. A measurement during which this process was stopped (SIGSTOP: shared machines' timing
scripts pause the other work on a core) is taken again (PauseWatch). Rewrites the serve table in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from optim.common.machine import core_count, cpu_summary
from realsize_models import BY_NAME, model_inputs
from realsize_prepare import prepare
from run import HERE, _replace_between

MARKERS = ("<!-- serve:begin -->", "<!-- serve:end -->")
SHORT_SEQUENCE = 16  # MiniLM on short queries: where a batch-1 run leaves the kernels room to gain from batching


@dataclass(frozen=True)
class Served:
    prepared: str  # realsize_prepare's model name (the file served)
    label: str
    sequence: int | None = None  # MiniLM's tokens per request (None: realsize_models' inputs)

    def sample(self, seed: int) -> dict:
        if self.sequence is None:
            return model_inputs(self.prepared, 1, seed=seed)
        from optim.models import minilm

        return minilm.examples(seed=seed, batch=1, length=self.sequence)


MODELS = {"resnet18": Served("resnet18", "ResNet-18 (224x224)"),
          "minilm": Served("minilm", BY_NAME["minilm"].label),
          "minilm16": Served("minilm", f"MiniLM-L6 (seq {SHORT_SEQUENCE})", SHORT_SEQUENCE)}
DEFAULT_MODELS = "resnet18,minilm,minilm16"
SAMPLES = 16  # distinct inputs the clients cycle through
T_RUNS = 7  # session runs timed per batch size for T(b)
OVERHEAD_S = 3.0  # seconds of one client without batching that measure a request's overhead o
MAX_TRIES = 5  # measurements taken again after a pause of the process (PauseWatch)
ROUNDS = 2  # alternating off/on slots per row: each slot is --duration / ROUNDS seconds
START_TIMEOUT_S = 120.0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated subset of {', '.join(MODELS)}")
    ap.add_argument("--clients", default="1,8,32", help="comma-separated concurrent client counts")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of counted requests per row")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of uncounted requests before each slot")
    ap.add_argument("--max-batch", type=int, default=8, help="the server's --max-batch with batching on")
    ap.add_argument("--max-delay-ms", type=float, default=5.0, help="the server's --max-delay-ms with batching on")
    ap.add_argument("--threads", type=int, default=1, help="the server's --threads (intra-op threads)")
    ap.add_argument("--cache", default=str(HERE / ".cache"), help="realsize_prepare's cache folder")
    ap.add_argument("--json", help="also write every result to this file")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite BENCHMARKS.md")
    args = ap.parse_args(argv)
    args.names = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.names if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    args.client_counts = [int(c) for c in args.clients.split(",")]
    return args


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`optim serve MODEL` as a child process (it inherits this process's CPU affinity)."""

    def __init__(self, model: Path, threads: int, max_batch: int, max_delay_ms: float):
        self.port = free_port()
        self.url = f"127.0.0.1:{self.port}"
        optim = Path(sys.executable).with_name("optim")
        self.process = subprocess.Popen(
            [optim, "serve", model, "--port", str(self.port), "--threads", str(threads), "--max-batch", str(max_batch),
             "--max-delay-ms", str(max_delay_ms), "--max-queue", "4096", "--timeout-s", "600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait_ready(self) -> None:
        import tritonclient.http as triton

        client = triton.InferenceServerClient(self.url)
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"optim serve exited: {self.process.communicate()[1]}")
                try:
                    if client.is_server_ready():
                        return
                except Exception:  # noqa: BLE001 - not listening yet
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("optim serve did not start")
                time.sleep(0.2)
        finally:
            client.close()

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://{self.url}/metrics") as r:
            return r.read().decode()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def metric_sum(text: str, name: str) -> float:
    """The sum over labels of one sample name in Prometheus text."""
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))


class PauseWatch:
    """Notices this process being stopped (SIGSTOP, as a shared machine's timing scripts do to keep a core quiet):
    a thread that wakes every TICK_S sees a gap of more than PAUSE_S. A measurement that saw one is taken again,
    as the server (a child on the same core) was stopped too and its numbers mean nothing."""

    TICK_S, PAUSE_S = 0.01, 0.25

    def __init__(self):
        self._pauses = 0
        thread = threading.Thread(target=self._watch, name="pause-watch", daemon=True)
        thread.start()

    def _watch(self) -> None:
        last = time.monotonic()
        while True:
            time.sleep(self.TICK_S)
            now = time.monotonic()
            if now - last > self.PAUSE_S:
                self._pauses += 1
            last = now

    def measure(self, what: str, work, tries: int = MAX_TRIES):
        """work() until a call sees no pause (at most `tries` calls; the last result stands, flagged)."""
        for attempt in range(1, tries + 1):
            before = self._pauses
            result = work()
            if self._pauses == before:
                return result, False
            print(f"{what}: the process was paused, measuring again ({attempt}/{tries})", flush=True)
        return result, True


def mean_compute(before: str, after: str) -> float:
    """Mean seconds of a batch run between two scrapes of the server's metrics."""
    count = metric_sum(after, "optim_compute_seconds_count") - metric_sum(before, "optim_compute_seconds_count")
    return (metric_sum(after, "optim_compute_seconds_sum") - metric_sum(before, "optim_compute_seconds_sum")) / count


def load(url: str, model: str, samples: list[dict], clients: int, seconds: float) -> list[float]:
    """Closed-loop clients for `seconds`: the latency in seconds of each request answered within them (those still
    in flight at the end are waited for, not counted, so that throughput is answers / seconds)."""
    import tritonclient.http as triton

    latencies: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def client(index: int) -> None:
        conn = triton.InferenceServerClient(url, network_timeout=600.0, connection_timeout=60.0)
        tensors = []
        for feeds in samples:
            row = []
            for name, array in feeds.items():
                t = triton.InferInput(name, list(array.shape), triton.np_to_triton_dtype(array.dtype))
                t.set_data_from_numpy(array, binary_data=True)
                row.append(t)
            tensors.append(row)
        barrier.wait()
        k = index
        while time.perf_counter() < stop_at[0]:
            start = time.perf_counter()
            conn.infer(model, tensors[k % len(tensors)])
            end = time.perf_counter()
            if end <= stop_at[0]:
                latencies[index].append(end - start)
            k += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + seconds + 60.0  # set for real once every client is connected
    barrier.wait()
    stop_at[0] = time.perf_counter() + seconds
    for t in threads:
        t.join()
    return [x for per_client in latencies for x in per_client]


def batch_time(model: Path, feeds: dict, rows: int, threads: int) -> float:
    """Median seconds of one session run at `rows` rows (after one warm-up run)."""
    import optim

    sess = optim.session(model, threads=threads, config={"session.intra_op.allow_spinning": "0"})
    batch = {k: np.concatenate([v] * rows) for k, v in feeds.items()}
    sess.run(None, batch)
    times = []
    for _ in range(T_RUNS):
        start = time.perf_counter()
        sess.run(None, batch)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def overhead_of(server: Server, model: str, samples: list[dict]) -> float:
    """One client, no batching: a request's median latency less its mean compute (the server's metrics)."""
    before = server.metrics()
    latency = float(np.median(load(server.url, model, samples, 1, OVERHEAD_S)))
    return max(0.0, latency - mean_compute(before, server.metrics()))


@dataclass
class Slot:
    """One timed window on one server: the latencies answered inside it and the server's batches meanwhile."""

    latencies: list[float]
    seconds: float
    batches: float
    rows: float
    compute_s: float


def measure_slot(server: Server, model: str, samples: list[dict], clients: int, seconds: float, warmup: float) -> Slot:
    load(server.url, model, samples, clients, warmup)
    before = server.metrics()
    latencies = load(server.url, model, samples, clients, seconds)
    after = server.metrics()

    def delta(name: str) -> float:
        return metric_sum(after, name) - metric_sum(before, name)

    return Slot(latencies, seconds, delta("optim_batch_size_count"), delta("optim_batch_size_sum"),
                delta("optim_compute_seconds_sum"))


def row_of(slots: list[Slot], clients: int, delay_ms: float, overhead: float) -> dict:
    """A table row from one mode's slots: throughput, percentiles, mean batch b, its mean compute t, the bound."""
    latencies = np.array([x for slot in slots for x in slot.latencies])
    batches = sum(slot.batches for slot in slots)
    b, t = sum(slot.rows for slot in slots) / batches, sum(slot.compute_s for slot in slots) / batches
    bound = delay_ms / 1e3 + (math.ceil(clients / b - 1e-9) + 1) * t + clients * overhead
    return {"clients": clients, "requests": int(latencies.size),
            "throughput": latencies.size / sum(slot.seconds for slot in slots),
            "p50_ms": float(np.percentile(latencies, 50) * 1e3), "p99_ms": float(np.percentile(latencies, 99) * 1e3),
            "mean_batch": b, "batch_ms": t * 1e3, "bound_ms": bound * 1e3}


def bench_model(name: str, args, watch: PauseWatch) -> list[dict]:
    """Both servers (batching off and on) up at once; per client count, ROUNDS of an off slot then an on slot, so
    that both modes see the same machine (the load of a shared machine drifts over minutes)."""
    served = MODELS[name]
    prepared = prepare(served.prepared, Path(args.cache), say=lambda line: print(f"{name}: {line}", flush=True),
                       with_int8=False)
    model = prepared.fp32
    samples = [served.sample(i) for i in range(SAMPLES)]
    (t1, tb), _ = watch.measure(f"{name} T(b)", lambda: (batch_time(model, samples[0], 1, args.threads),
                                                        batch_time(model, samples[0], args.max_batch, args.threads)))
    print(f"{name}: T(1) {t1 * 1e3:.1f} ms, T({args.max_batch}) {tb * 1e3:.1f} ms", flush=True)
    modes = {False: (1, 0.0), True: (args.max_batch, args.max_delay_ms)}  # batching -> (max_batch, max_delay_ms)
    servers = {batching: Server(model, args.threads, *mode) for batching, mode in modes.items()}
    rows = []
    try:
        for server in servers.values():
            server.wait_ready()
        overhead, _ = watch.measure(f"{name} overhead", lambda: overhead_of(servers[False], model.stem, samples))
        print(f"{name}: a request's overhead (HTTP, protocol, client) {overhead * 1e3:.2f} ms", flush=True)
        for clients in args.client_counts:
            slots: dict[bool, list[Slot]] = {False: [], True: []}
            paused = False
            for _ in range(ROUNDS):
                for batching, server in servers.items():
                    slot, was_paused = watch.measure(
                        f"{name} batching {'on' if batching else 'off'} clients {clients}",
                        lambda: measure_slot(server, model.stem, samples, clients, args.duration / ROUNDS,
                                             args.warmup))
                    slots[batching].append(slot)
                    paused |= was_paused
            for batching in (False, True):
                row = row_of(slots[batching], clients, modes[batching][1], overhead)
                row.update(model=served.label, batching=batching, paused=paused, overhead_ms=overhead * 1e3,
                           T1_ms=t1 * 1e3, TB_ms=tb * 1e3)
                rows.append(row)
                print(f"{name} batching {'on' if batching else 'off'} clients {clients}: {row['throughput']:.1f} req/s, "
                      f"p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms (bound {row['bound_ms']:.1f}), "
                      f"mean batch {row['mean_batch']:.2f}" + (" (paused: not trustworthy)" if paused else ""),
                      flush=True)
    finally:
        for server in servers.values():
            server.stop()
    return sorted(rows, key=lambda r: (r["batching"], r["clients"]))


def table(rows: list[dict]) -> list[str]:
    lines = ["| model | batching | clients | requests | throughput (req/s) | p50 (ms) | p99 (ms) | mean batch (rows) | "
             "batch compute (ms) | p99 bound (ms) | within |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['model']} | {'on' if r['batching'] else 'off'} | {r['clients']} | {r['requests']} | "
                     f"{r['throughput']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['mean_batch']:.2f} | "
                     f"{r['batch_ms']:.1f} | {r['bound_ms']:.0f} | {'yes' if r['p99_ms'] <= r['bound_ms'] else 'NO'}"
                     f"{' (paused)' if r['paused'] else ''} |")
    return lines


def gains(rows: list[dict]) -> list[str]:
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        by = {(r["batching"], r["clients"]): r for r in rows if r["model"] == model}
        for clients in sorted({c for _, c in by}):
            if (False, clients) in by and (True, clients) in by and clients > 1:
                on, off = by[(True, clients)], by[(False, clients)]
                out.append(f"{model}, {clients} clients: batching gives {on['throughput'] / off['throughput']:.2f}x "
                           f"the throughput (p99 {off['p99_ms']:.0f} -> {on['p99_ms']:.0f} ms)")
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    import onnxruntime as ort

    watch = PauseWatch()
    rows = [row for name in args.names for row in bench_model(name, args, watch)]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    for line in gains(rows):
        print(line)
    if not args.no_markdown:
        shown = " ".join(argv if argv is not None else sys.argv[1:])
        b = args.max_batch
        t_lines = list(dict.fromkeys(f"{r['model']} T(1) {r['T1_ms']:.1f} ms, T({b}) {r['TB_ms']:.1f} ms "
                                     f"({r['TB_ms'] / b:.1f} ms a sample), o {r['overhead_ms']:.2f} ms" for r in rows))
        cores = sorted(os.sched_getaffinity(0))  # what this run (and the server it started) could use
        pinned = len(cores) < core_count()
        prefix = f"taskset -c {','.join(map(str, cores))} " if pinned else ""
        command = f"{prefix}.venv/bin/python benchmarks/serve.py {shown}".strip()
        where = f"pinned to core(s) {','.join(map(str, cores))}" if pinned else "sharing all of them"
        lines = ["", f"Command: `{command}`  ",
                 f"Machine: {cpu_summary()}, {core_count()} cores, everything (server and clients) {where}; "
                 f"onnxruntime {ort.__version__}; server `--threads {args.threads}`, batching on = `--max-batch "
                 f"{args.max_batch} --max-delay-ms {args.max_delay_ms:g}`, off = `--max-batch 1`, both servers up and "
                 f"driven in turn (off, on) {ROUNDS} times per client count, each slot {args.warmup:g} s warm-up "
                 f"then {args.duration / ROUNDS:g} s counted ({args.duration:g} s per row); one sample per request "
                 "(binary tensors).  ",
                 f"Batch compute on a session alone (median) and request overhead o: {'; '.join(t_lines)}.", "",
                 *table(rows), "",
                 *[f"- {line}" for line in gains(rows)], ""]
        md = HERE / "BENCHMARKS.md"
        md.write_text(_replace_between(md.read_text(), MARKERS, lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
