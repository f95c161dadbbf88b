"""`optim bench`: latency and throughput of a model on OptimEP, optionally side by side with ONNX
Runtime's CPU EP (with or without its graph optimizations), measured so that the numbers can be
trusted: warm-up first, runs alternating between runtimes (A B A B) so drift hits all equally, no
thread spinning between them, and a warning when the machine is too noisy to compare."""

from __future__ import annotations

import platform
import resource
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import onnxruntime as ort

from optim.common.machine import core_count, cpu_model, isa_flags

from ..inputs import RunInputError, random_inputs, shapes_with_batch
from ..placement import placement
from ..sessions import session
from ..timing import NO_SPIN, LatencyStats, now, summarize, time_alternating
from .bench_peers import PEERS, Peer, PeerFailed

VS_CHOICES = tuple(PEERS)


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
    """The machine and the software versions a report was measured with."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        optim_version = version("optim")
    except PackageNotFoundError:
        optim_version = "unknown"
    return {
        "cpu": cpu_model(), "cores": core_count(), "isa_flags": sorted(isa_flags()),
        "onnxruntime": ort.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "optim": optim_version, "platform": platform.platform(),
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


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
                t0 = now()
                sess.run(None, feeds)
                mine.append(now() - t0)
        except BaseException as e:  # reported after the join; a thread must not die silently
            errors.append(e)
        with lock:
            latencies.extend(mine)

    pool = [threading.Thread(target=worker, args=(c,)) for c in per_thread]
    for t in pool:
        t.start()
    start.wait()
    t0 = now()
    for t in pool:
        t.join()
    wall = now() - t0
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
    precision: str = "fp32",
    progress=None,
) -> BenchReport:
    """Times `model` on OptimEP (and, with vs, on the peers of bench_peers) for each batch size (or the given shapes).

    runs: timed runs per runtime, or run for `duration` seconds instead; warmup_duration adds that many
    seconds of warm-up per runtime after the `warmup` runs. concurrency: also run that
    many threads on one OptimEP session (runs requests in all). isa, precision: OptimEP's EP options.
    progress(str) gets a line per phase.
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

    sessions = {"optim": timed("optim", lambda: session(model, threads=threads, config=NO_SPIN, isa=isa,
                                                        precision=precision))}
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
                 "threads": threads or f"{core_count()} (onnxruntime's default: one per core)",
                 "vs": vs, "batches": batches, "concurrency": concurrency, "isa": isa, "precision": precision,
                 "seed": seed,
                 "spinning": "off"},
        machine=machine_info(), session_create_ms=created, placement=placement(optim_sess).to_dict(),
        results=results, concurrency=conc, peak_rss_mb=peak_rss_mb(), notes=notes, peers=peers,
    )
