"""`optim bench`: latency and throughput of a model on OptimEP, optionally side by side with ONNX
Runtime's CPU EP (with or without its graph optimizations), measured so that the numbers can be
trusted: warm-up first, runs alternating between runtimes (A B A B) so drift hits all equally, no
thread spinning between them, and a warning when the machine is too noisy to compare."""

from __future__ import annotations

import os
import platform
import resource
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import onnxruntime as ort

from .bench_peers import PEERS, Peer, PeerFailed
from .placement import placement
from .runner import RunInputError, random_inputs
from .sessions import session

# Coefficient of variation of OptimEP's latencies above which the report warns that the machine is
# too noisy for the numbers (and the ratios) to mean much.
NOISY_CV = 0.10
VS_CHOICES = tuple(PEERS)
NO_SPIN = {"session.intra_op.allow_spinning": "0"}  # idle pool threads would steal the next run's cores
_timer = time.perf_counter  # replaced in tests to simulate a noisy machine


@dataclass
class LatencyStats:
    runs: int
    min_ms: float
    mean_ms: float
    median_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    cv: float  # standard deviation / mean
    throughput: float  # inferences per second (batch counted), from the median

    @property
    def noisy(self) -> bool:
        return self.cv > NOISY_CV


def percentile(sorted_ms: list[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (q in [0, 100])."""
    if not sorted_ms:
        raise ValueError("no timings")
    pos = (len(sorted_ms) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (pos - lo)


def summarize(seconds: list[float], batch: int = 1) -> LatencyStats:
    ms = sorted(s * 1e3 for s in seconds)
    mean = statistics.fmean(ms)
    median = statistics.median(ms)
    return LatencyStats(
        runs=len(ms), min_ms=ms[0], mean_ms=mean, median_ms=median, p90_ms=percentile(ms, 90),
        p95_ms=percentile(ms, 95), p99_ms=percentile(ms, 99), max_ms=ms[-1],
        cv=statistics.pstdev(ms) / mean if mean > 0 else 0.0,
        throughput=batch * 1e3 / median if median > 0 else float("inf"),
    )


@dataclass
class BatchResult:
    batch: int | None  # None: the shapes given, no batch override
    shapes: dict[str, list[int]]
    optim: LatencyStats
    others: dict[str, LatencyStats] = field(default_factory=dict)  # per --vs peer (bench_peers.PEERS)
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)  # raw, for plots

    def ratio(self) -> dict[str, float]:
        """Other runtime's median / OptimEP's median: above 1 means OptimEP is faster."""
        return {k: v.median_ms / self.optim.median_ms for k, v in self.others.items()}


@dataclass
class ConcurrencyResult:
    threads: int
    requests: int
    wall_s: float
    throughput: float  # requests * batch per second, all threads together
    latency: LatencyStats  # per request


@dataclass
class BenchReport:
    model: str
    options: dict
    machine: dict
    session_create_ms: dict[str, float]
    placement: dict
    results: list[BatchResult]
    concurrency: ConcurrencyResult | None
    peak_rss_mb: float
    notes: list[str] = field(default_factory=list)  # e.g. a runtime asked for but not installed
    peers: dict[str, str] = field(default_factory=dict)  # --vs peer -> what ran (versions, settings)

    def to_dict(self) -> dict:
        d = asdict(self)
        for r, rd in zip(self.results, d["results"]):
            rd["ratio"] = r.ratio()
            rd.pop("latencies_ms")
        d["ratio"] = self.results[0].ratio() if self.results else {}
        d["noisy"] = any(r.optim.noisy for r in self.results)
        return d


def machine_info() -> dict:
    cpu, flags = platform.processor() or "unknown", set()
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        optim_version = version("optim")
    except PackageNotFoundError:
        optim_version = "unknown"
    return {
        "cpu": cpu, "cores": os.cpu_count(), "isa_flags": sorted(f for f in flags if f in
                                                                ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni")),
        "onnxruntime": ort.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "optim": optim_version, "platform": platform.platform(),
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def shapes_with_batch(shapes: dict[str, list[int]], sess: ort.InferenceSession, batch: int) -> dict[str, list[int]]:
    """Every input's first dimension set to `batch`; refuses inputs whose first dim is fixed otherwise."""
    out = {}
    for i in sess.get_inputs():
        shape = list(shapes.get(i.name, i.shape))
        if not shape:
            raise RunInputError(f"input {i.name!r} is a scalar: --batch needs a first dimension")
        declared = i.shape[0] if i.shape else None
        if isinstance(declared, int) and declared != batch:
            raise RunInputError(f"input {i.name!r} has a fixed batch dimension {declared}; --batch {batch} cannot change it")
        shape[0] = batch
        if any(not isinstance(d, int) for d in shape):
            raise RunInputError(f"input {i.name!r} has dynamic dims {i.shape}; give the others with --input {i.name}:DIMS")
        out[i.name] = shape
    return out


def time_alternating(sessions: dict[str, ort.InferenceSession], feeds, warmup: int, runs: int,
                     duration: float | None, warmup_duration: float | None = None) -> dict[str, list[float]]:
    """Seconds per run for each session, runs alternating (A B A B) after each session's warm-up.
    A session whose run raises PeerFailed (a --vs peer) is dropped: the result has no entry for it."""
    live = dict(sessions)
    for k, s in sessions.items():
        try:
            for _ in range(warmup):
                s.run(None, feeds)
            if warmup_duration:
                end = time.perf_counter() + warmup_duration
                while time.perf_counter() < end:
                    s.run(None, feeds)
        except PeerFailed:
            del live[k]
    times: dict[str, list[float]] = {k: [] for k in live}
    deadline = None if duration is None else _timer() + duration
    n = 0
    while (deadline is None and n < runs) or (deadline is not None and (_timer() < deadline or n < 2)):
        for k, s in list(live.items()):
            t0 = _timer()
            try:
                s.run(None, feeds)
            except PeerFailed:
                del live[k], times[k]
                continue
            times[k].append(_timer() - t0)
        n += 1
    return times


def _concurrent(sess: ort.InferenceSession, feeds, threads: int, requests: int, batch: int) -> ConcurrencyResult:
    per_thread = [requests // threads + (1 if t < requests % threads else 0) for t in range(threads)]
    latencies: list[float] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    start = threading.Barrier(threads + 1)

    def worker(count: int) -> None:
        mine = []
        try:
            start.wait()
            for _ in range(count):
                t0 = _timer()
                sess.run(None, feeds)
                mine.append(_timer() - t0)
        except BaseException as e:  # reported after the join; a thread must not die silently
            errors.append(e)
        with lock:
            latencies.extend(mine)

    pool = [threading.Thread(target=worker, args=(c,)) for c in per_thread]
    for t in pool:
        t.start()
    start.wait()
    t0 = _timer()
    for t in pool:
        t.join()
    wall = _timer() - t0
    if errors:
        raise errors[0]
    return ConcurrencyResult(threads=threads, requests=requests, wall_s=wall,
                             throughput=requests * batch / wall if wall > 0 else float("inf"),
                             latency=summarize(latencies, batch))


def benchmark(
    model: str,
    *,
    shapes: dict[str, list[int]] | None = None,
    batches: list[int] | None = None,
    warmup: int = 10,
    runs: int = 100,
    duration: float | None = None,
    warmup_duration: float | None = None,
    threads: int | None = None,
    vs: list[str] | None = None,
    concurrency: int | None = None,
    seed: int = 0,
    isa: str = "auto",
    progress=None,
) -> BenchReport:
    """Times `model` on OptimEP (and, with vs, on the peers of bench_peers) for each batch size (or the given shapes).

    runs: timed runs per runtime, or run for `duration` seconds instead; warmup_duration adds that many
    seconds of warm-up per runtime after the `warmup` runs. concurrency: also run that
    many threads on one OptimEP session (runs requests in all). progress(str) gets a line per phase.
    """
    vs = list(vs or [])
    bad = [v for v in vs if v not in VS_CHOICES]
    if bad:
        raise RunInputError(f"--vs {bad[0]!r} is not one of {', '.join(VS_CHOICES)}")
    if warmup < 0 or runs < 1 or (duration is not None and duration <= 0) or (warmup_duration or 0) < 0:
        raise RunInputError("warm-up must be >= 0, runs >= 1 and durations > 0")
    if concurrency is not None and concurrency < 1:
        raise RunInputError("--concurrency must be >= 1")
    say = progress or (lambda _line: None)
    created: dict[str, float] = {}

    def timed(name, make):
        t0 = time.perf_counter()
        s = make()
        created[name] = (time.perf_counter() - t0) * 1e3
        return s

    sessions = {"optim": timed("optim", lambda: session(model, threads=threads, config=NO_SPIN, isa=isa))}
    notes, peers = [], {}
    for name in dict.fromkeys(vs):  # a peer that cannot load is one note; the others still run
        try:
            sessions[name] = timed(name, lambda: Peer(name, str(model), threads, NO_SPIN))
            peers[name] = sessions[name].description
        except PeerFailed as e:
            notes.append(str(e))
    optim_sess = sessions["optim"]
    plans = [(b, shapes_with_batch(shapes or {}, optim_sess, b)) for b in batches] if batches else [(None, dict(shapes or {}))]
    results = []
    feeds = None
    for batch, batch_shapes in plans:
        feeds = random_inputs(optim_sess, batch_shapes, seed)
        say(f"timing {'batch ' + str(batch) if batch else 'the given shapes'}: {warmup} warm-up run(s)"
            + (f" and {warmup_duration:g} s of warm-up" if warmup_duration else "") + ", then "
            + (f"{duration:g} s" if duration else f"{runs} run(s)") + f" on {', '.join(sessions)}")
        times = time_alternating(sessions, feeds, warmup, runs, duration, warmup_duration)
        for name in [k for k in sessions if k not in times]:  # a peer failed: say why, go on without it
            notes.append(f"{sessions.pop(name).failure}" + (f" (batch {batch})" if batch else ""))
        n = batch or 1
        results.append(BatchResult(
            batch=batch, shapes={k: list(v.shape) for k, v in feeds.items()}, optim=summarize(times["optim"], n),
            others={k: summarize(v, n) for k, v in times.items() if k != "optim"},
            latencies_ms={k: [t * 1e3 for t in v] for k, v in times.items()},
        ))
    conc = None
    if concurrency:
        say(f"concurrency: {concurrency} thread(s), {runs} request(s) on one OptimEP session")
        conc = _concurrent(optim_sess, feeds, concurrency, runs, plans[-1][0] or 1)
    return BenchReport(
        model=str(model),
        options={"warmup": warmup, "warmup_s": warmup_duration, "runs": runs, "duration_s": duration,
                 "threads": threads or f"{os.cpu_count()} (onnxruntime's default: one per core)",
                 "vs": vs, "batches": batches, "concurrency": concurrency, "isa": isa, "seed": seed,
                 "spinning": "off"},
        machine=machine_info(), session_create_ms=created, placement=placement(optim_sess).to_dict(),
        results=results, concurrency=conc, peak_rss_mb=peak_rss_mb(), notes=notes, peers=peers,
    )
