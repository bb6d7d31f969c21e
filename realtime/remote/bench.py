"""What the network path costs: the remote call against the local engine, on loopback, with the
model doubles (so the figures are the transport's: VP8 both ways, WebRTC, the hand-offs).

`main.py bench --remote [--json] [--duration S]` prints them: per picture size the returned
picture's PSNR and SSIM against the input where the swap does not touch it
(realtime/remote/picture.py; the server's invisible watermark included, and again from a server
started with --no-watermark: the transport's own loss), the bitrate each way and the latency the
call adds; the same at
1280x720 over a link shaped to 2 Mbit/s each way (realtime/remote/link_shaper.py); concurrent
streams; memory; with `--duration`, also what one 1280x720 stream at 30 fps loses over S seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Self, TextIO

import cv2

from realtime.api import (
    Engine,
    FrameSink,
    FrameSource,
    ModelOptions,
    NullSink,
    Summary,
    TestPatternSource,
    load_preset,
    prepare_face_swap,
    write_model_doubles,
)
from realtime.remote.client import ClientStats, RemoteClient
from realtime.remote.link_shaper import ShapedLink
from realtime.remote.options import RemoteOptions
from realtime.remote.picture import FaceScene, MeteredSink, MeteredSource, PictureMeter, PictureScore
from realtime.remote.runner import free_port

TOKEN = "bench-token"


@dataclass(frozen=True, slots=True)
class SizeFigures:
    size: str
    local_ms: dict[str, float]
    remote_ms: dict[str, float]
    added_latency_ms: dict[str, float]
    server_cpu_per_stream: float | None  # cores the server used for one stream
    frames_back: float  # share of captured frames that came back (the call's setup counts as lost)
    frames_back_linked: float  # share of the frames handed to the server that came back
    # The returned picture where the swap does not touch it, after the call's first second: mean
    # PSNR (dB), its 5th percentile, SSIM; the longest wait between two returned frames.
    psnr_db: float
    psnr_db_p5: float
    ssim: float
    longest_gap_ms: float
    bitrate_kbps: dict[str, float]  # the video each way: "up" to the server, "down" back


@dataclass(frozen=True, slots=True)
class LinkFigures:
    """One 1280x720 call over a link shaped to `link_kbps` each way (a drop-tail queue of 200 ms)."""

    link_kbps: int
    seconds: float
    psnr_db: float
    psnr_db_p5: float
    ssim: float
    longest_gap_ms: float  # a freeze shows here
    bitrate_kbps: dict[str, float]
    latency_ms: dict[str, float]
    frames_back_linked: float
    datagrams_dropped: dict[str, int]  # by the shaped link's queues, "up" and "down"


@dataclass(frozen=True, slots=True)
class SustainedFigures:
    """One 1280x720 stream at 30 fps held for `seconds`: what went, what came back."""

    seconds: float
    frames_sent: int  # handed to the server (the frames captured during the call's setup are not)
    frames_back: int  # returned by the server, shown or left out behind a newer one on arrival
    dropped: int  # sent and never returned, though frames sent after them were
    dropped_settled: int  # of those, once the call had run a second (not in its start-up)
    # Sent before the first frame came back (the server starting the stream) or still on their way
    # when the call ended: never back, but not drops of a running call.
    unreturned_at_edges: int
    dropped_by_client: int  # of those never back: left out before the client's encoder took them
    # The server's own count by place (its /metrics, read each second: as of <= 1 s before the end).
    dropped_at_server: dict[str, int]
    load_average: tuple[float, float, float]  # the machine's 1, 5 and 15 min load at the end


@dataclass
class RemoteBench:
    machine: str
    seconds: float
    sizes: list[SizeFigures] = field(default_factory=list)
    streams_held_640x480_30fps: int = 0
    added_latency_ms: dict[str, float] = field(default_factory=dict)  # at 640x480
    # Per number of concurrent 640x480 streams: the worst stream's share back, p50 (ms) and drops.
    concurrent: list[dict[str, float]] = field(default_factory=list)
    sustained_720p: SustainedFigures | None = None  # with `--duration S`
    psnr_db: dict[str, float] = field(default_factory=dict)  # by size, as in `sizes`
    # The same calls to a server started with --no-watermark: the transport's own loss, by size
    # (PSNR, its 5th percentile, SSIM); `sizes` is the picture as served, mark included.
    unmarked: dict[str, dict[str, float]] = field(default_factory=dict)
    constrained_720p: LinkFigures | None = None
    # Memory: the server's peak resident set over the whole bench, and while N 640x480 streams ran
    # at once (the models are shared, so a stream adds only its buffers); this process's peak.
    server_peak_rss_mb: float = 0.0
    server_rss_mb_by_streams: dict[str, float] = field(default_factory=dict)
    client_peak_rss_mb: float = 0.0
    # The shared swapper service: per number of concurrent 640x480 streams, the model calls a
    # second and the faces per call, with batching (the server's default) and without (--max-batch 1).
    batching: list[dict[str, float]] = field(default_factory=list)
    faces_per_call: dict[str, float] = field(default_factory=dict)  # streams -> faces per call, batched

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def _figures(s: Summary) -> dict[str, float]:
    return {"p50": round(s.p50, 1), "p99": round(s.p99, 1)}


def _status_mb(pid: int, key: str) -> float:
    """A memory line of /proc/PID/status (VmRSS now, VmHWM the peak) in MB; 0 where unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        return 0.0
    return 0.0


class Sampler:
    """Calls `sample()` every `period_s` on a thread of its own while the `with` block runs."""

    def __init__(self, period_s: float) -> None:
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self._period_s):
                return

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


class RssPeak(Sampler):
    """The highest resident set a process reaches while the block runs."""

    def __init__(self, pid: int) -> None:
        super().__init__(0.2)
        self._pid = pid
        self.peak_mb = 0.0

    def sample(self) -> None:
        self.peak_mb = max(self.peak_mb, _status_mb(self._pid, "VmRSS"))


def _own_peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return round(kb / 1024, 1)


def _cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _local(models: Path, photo: Path, w: int, h: int, seconds: float) -> Summary:
    settings = load_preset("balanced").with_overrides({"pipeline.provider": "cpu"})
    stages = prepare_face_swap([photo], settings, ModelOptions(models_dir=models, allow_unverified=True))
    engine = Engine(FaceScene(w, h, 30.0), NullSink(), settings, stages)
    engine.start()
    time.sleep(seconds)
    engine.stop()
    return Summary.of(engine.metrics.latencies_ms(whole_run=True))


def _serve(port: int, folder: Path, models: Path, *extra: str) -> subprocess.Popen[bytes]:
    tokens = folder / "tokens.txt"
    tokens.write_text(f"bench:{TOKEN}\n")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "realtime.remote", "serve", "--no-tls", "--host", "127.0.0.1",
         "--port", str(port), "--data-dir", str(folder / "data"), "--token-file", str(tokens),
         "--models-dir", str(models), "--allow-unverified", "--provider", "cpu", "--max-streams", "8",
         *extra],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("the bench server did not start")


def _client(
    port: int,
    photo: Path,
    seconds: float,
    source: FrameSource,
    sink: FrameSink,
    link: ShapedLink | None = None,
) -> RemoteClient:
    options = RemoteOptions(
        url=f"http://127.0.0.1:{port}", token=TOKEN, photos=(photo,), consent=True, duration_s=seconds
    )
    return RemoteClient(options, source, sink, lambda _: None, link=None if link is None else link.apply)


def _run_all(clients: list[RemoteClient], seconds: float) -> list[RemoteClient]:
    threads = [threading.Thread(target=c.run, daemon=True) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    return clients


def _clients(port: int, photo: Path, w: int, h: int, seconds: float, n: int) -> list[RemoteClient]:
    made = [_client(port, photo, seconds, TestPatternSource(w, h, 30.0), NullSink()) for _ in range(n)]
    return _run_all(made, seconds)


def _measured(
    port: int, photo: Path, w: int, h: int, seconds: float, link: ShapedLink | None = None
) -> tuple[ClientStats, PictureScore]:
    """One call of the still-face scene, each returned frame scored against its original."""
    scene = FaceScene(w, h, 30.0)
    meter = PictureMeter(scene.mask())
    client = _client(port, photo, seconds, MeteredSource(scene, meter), MeteredSink(NullSink(), meter), link)
    _run_all([client], seconds)
    return client.stats, meter.score()


def _kbps(stats: ClientStats) -> dict[str, float]:
    up, down = stats.bitrate_bps()
    return {"up": round(up / 1000), "down": round(down / 1000)}


LINK_KBPS = 2000


def _constrained(port: int, photo: Path, seconds: float) -> LinkFigures:
    link = ShapedLink(LINK_KBPS * 1000)
    stats, score = _measured(port, photo, 1280, 720, seconds, link)
    return LinkFigures(
        LINK_KBPS, seconds, score.psnr_db, score.psnr_db_p5, score.ssim, score.longest_gap_ms, _kbps(stats),
        _figures(stats.latency_ms), round(stats.remote_frames / max(stats.frames_linked, 1), 3),
        {"up": link.up.dropped, "down": link.down.dropped},
    )  # fmt: skip


SIZES = ((640, 480), (1280, 720))


class ServerDrops(Sampler):
    """The server's drop counters by place for its one stream, read from /metrics every second
    while the block runs (the stream's series leave /metrics when it ends)."""

    def __init__(self, port: int) -> None:
        super().__init__(1.0)
        self._request = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        self.by_place: dict[str, int] = {}

    def sample(self) -> None:
        try:
            text = urllib.request.urlopen(self._request, timeout=2).read().decode()
        except OSError:
            return  # the next second's reading will do
        found = {}
        for line in text.splitlines():
            if line.startswith("facecast_stream_frames_dropped_total{") and 'at="' in line:
                place = line.split('at="', 1)[1].split('"', 1)[0]
                found[place] = int(float(line.rsplit(" ", 1)[1]))
        if found:
            self.by_place = found


def _inference_counts(port: int) -> tuple[int, int]:
    """The server's model calls and requests (faces) so far, all shared services together."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    text = urllib.request.urlopen(request, timeout=5).read().decode()
    calls = requests = 0
    for line in text.splitlines():
        if line.startswith("facecast_inference_calls_total{"):
            calls += int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("facecast_inference_requests_total{"):
            requests += int(float(line.rsplit(" ", 1)[1]))
    return calls, requests


def _batching(port: int, photo: Path, seconds: float, counts: tuple[int, ...]) -> list[dict[str, float]]:
    """Per number of streams: model calls a second and faces per call while they ran."""
    figures = []
    for n in counts:
        calls0, faces0 = _inference_counts(port)
        t0 = time.monotonic()
        _clients(port, photo, 640, 480, seconds, n)
        elapsed = time.monotonic() - t0
        calls1, faces1 = _inference_counts(port)
        calls, faces = calls1 - calls0, faces1 - faces0
        figures.append(
            {
                "streams": n,
                "model_calls_per_s": round(calls / elapsed, 1),
                "faces_per_call": round(faces / calls, 2) if calls else 0.0,
            }
        )
    return figures


def _sustained(port: int, photo: Path, seconds: float) -> SustainedFigures:
    with ServerDrops(port) as server:
        (client,) = _clients(port, photo, 1280, 720, seconds, 1)
    stats = client.stats
    back = stats.remote_frames + stats.remote_skipped
    one, five, fifteen = os.getloadavg()
    return SustainedFigures(
        seconds,
        stats.frames_linked,
        back,
        stats.frames_lost,
        stats.frames_lost_settled,
        max(stats.frames_linked - back - stats.frames_lost, 0),
        stats.frames_unsent,
        server.by_place,
        (round(one, 2), round(five, 2), round(fifteen, 2)),
    )


def run_remote_bench(
    seconds: float = 6.0,
    max_streams: int = 4,
    out: TextIO | None = None,
    sizes: tuple[tuple[int, int], ...] = SIZES,
    sustained_s: float = 0.0,
    link_s: float | None = None,
    batching_streams: tuple[int, ...] = (1, 2, 4),
) -> RemoteBench:
    """Each figure over `seconds`; the call over a slow link over `link_s` (default 2.5 x
    `seconds`: its estimator needs a few seconds; 0 leaves it out); with `sustained_s`, also one
    1280x720 stream held that long."""
    link_s = 2.5 * seconds if link_s is None else link_s
    result = RemoteBench(machine=f"{os.cpu_count()} CPUs, the CPU provider", seconds=seconds)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        models = folder / "models"
        write_model_doubles(models)
        photo = folder / "photo.png"
        source = TestPatternSource(640, 480, 30.0)
        source.open()
        frame = source.read()
        source.close()
        assert frame is not None
        cv2.imwrite(str(photo), frame.image)
        port = free_port()
        server = _serve(port, folder, models)
        try:
            for w, h in sizes:
                local = _local(models, photo, w, h, seconds)
                before = _cpu_s(server.pid)
                t0 = time.monotonic()
                stats, score = _measured(port, photo, w, h, seconds)
                after = _cpu_s(server.pid)
                cpu = None if before is None or after is None else (after - before) / (time.monotonic() - t0)
                remote = stats.latency_ms
                figures = SizeFigures(
                    f"{w}x{h}", _figures(local), _figures(remote),
                    {"p50": round(remote.p50 - local.p50, 1), "p99": round(remote.p99 - local.p99, 1)},
                    None if cpu is None else round(cpu, 2),
                    round(stats.remote_frames / max(stats.frames_captured, 1), 3),
                    round(stats.remote_frames / max(stats.frames_linked, 1), 3),
                    score.psnr_db, score.psnr_db_p5, score.ssim, score.longest_gap_ms, _kbps(stats),
                )  # fmt: skip
                result.sizes.append(figures)
                result.psnr_db[figures.size] = figures.psnr_db
                if out is not None:
                    added_p50 = figures.added_latency_ms["p50"]
                    print(f"{figures.size}: PSNR {figures.psnr_db} dB, added p50 {added_p50} ms",
                          file=out, flush=True)  # fmt: skip
            result.added_latency_ms = dict(result.sizes[0].added_latency_ms)
            if link_s > 0:
                result.constrained_720p = _constrained(port, photo, link_s)
            for n in range(1, max_streams + 1):
                with RssPeak(server.pid) as rss:
                    clients = _clients(port, photo, 640, 480, seconds, n)
                result.server_rss_mb_by_streams[str(n)] = rss.peak_mb
                result.concurrent.append(
                    {
                        "streams": n,
                        "worst_frames_back_linked": round(
                            min(c.stats.remote_frames / max(c.stats.frames_linked, 1) for c in clients), 3
                        ),
                        "worst_p50_ms": round(max(c.stats.latency_ms.p50 for c in clients), 1),
                        "worst_dropped": max(c.stats.frames_lost for c in clients),
                        "worst_dropped_settled": max(c.stats.frames_lost_settled for c in clients),
                    }
                )
                # Held: no stream dropped a frame once its call had settled (its first second, while
                # the engine and the codecs of every new stream start, is reported apart) and each
                # got at least 95% of the frames it handed over back.
                if all(
                    c.stats.frames_lost_settled == 0
                    and c.stats.remote_frames >= 0.95 * c.stats.frames_linked > 0
                    for c in clients
                ):
                    result.streams_held_640x480_30fps = n
                else:
                    break
            if sustained_s > 0:
                result.sustained_720p = _sustained(port, photo, sustained_s)
            result.server_peak_rss_mb = _status_mb(server.pid, "VmHWM")
            batched = _batching(port, photo, seconds, batching_streams) if batching_streams else []
            result.client_peak_rss_mb = _own_peak_rss_mb()
        finally:
            server.terminate()
            server.wait(20)
        port = free_port()
        plain_server = _serve(port, folder, models, "--no-watermark")
        try:
            for w, h in sizes:
                _, score = _measured(port, photo, w, h, seconds)
                result.unmarked[f"{w}x{h}"] = {
                    "psnr_db": score.psnr_db, "psnr_db_p5": score.psnr_db_p5, "ssim": score.ssim,
                }  # fmt: skip
        finally:
            plain_server.terminate()
            plain_server.wait(20)
        if batching_streams:
            port = free_port()
            unbatched_server = _serve(port, folder, models, "--max-batch", "1")
            try:
                unbatched = _batching(port, photo, seconds, batching_streams)
            finally:
                unbatched_server.terminate()
                unbatched_server.wait(20)
            for with_service, without in zip(batched, unbatched, strict=True):
                result.batching.append(
                    {
                        "streams": with_service["streams"],
                        "batched_calls_per_s": with_service["model_calls_per_s"],
                        "batched_faces_per_call": with_service["faces_per_call"],
                        "unbatched_calls_per_s": without["model_calls_per_s"],
                        "unbatched_faces_per_call": without["faces_per_call"],
                    }
                )
                result.faces_per_call[str(int(with_service["streams"]))] = with_service["faces_per_call"]
    return result


def run_remote_bench_cli(args: argparse.Namespace, out: TextIO) -> int:
    streams = tuple(int(n) for n in str(getattr(args, "streams", "1,2,4")).split(",") if n.strip())
    result = run_remote_bench(
        out=None if args.json else out,
        sustained_s=float(getattr(args, "duration", 0) or 0.0),
        batching_streams=streams,
    )
    if args.json:
        print(result.to_json(), file=out)
    else:
        for s in result.sizes:
            added, rate = s.added_latency_ms, s.bitrate_kbps
            print(f"{s.size}: picture PSNR {s.psnr_db} dB (5th percentile {s.psnr_db_p5}), SSIM {s.ssim}; "
                  f"video {rate['up']:.0f} kbit/s up, {rate['down']:.0f} down; "
                  f"local p50 {s.local_ms['p50']} / p99 {s.local_ms['p99']} ms; remote p50 "
                  f"{s.remote_ms['p50']} / p99 {s.remote_ms['p99']} ms; added p50 {added['p50']} / "
                  f"p99 {added['p99']} ms; server CPU {s.server_cpu_per_stream} cores; "
                  f"{s.frames_back:.0%} of frames back ({s.frames_back_linked:.0%} of those sent)",
                  file=out)  # fmt: skip
            plain = result.unmarked.get(s.size)
            if plain is not None:
                print(f"{s.size} from a server without the watermark (serve --no-watermark): picture PSNR "
                      f"{plain['psnr_db']} dB (5th percentile {plain['psnr_db_p5']}), SSIM {plain['ssim']}",
                      file=out)  # fmt: skip
        link = result.constrained_720p
        if link is not None:
            print(f"1280x720 over a {link.link_kbps} kbit/s link for {link.seconds:g} s: picture PSNR "
                  f"{link.psnr_db} dB (5th percentile {link.psnr_db_p5}), SSIM {link.ssim}; video "
                  f"{link.bitrate_kbps['up']:.0f} kbit/s up, {link.bitrate_kbps['down']:.0f} down; "
                  f"latency p50 {link.latency_ms['p50']} / p99 {link.latency_ms['p99']} ms; longest wait "
                  f"for a frame {link.longest_gap_ms:.0f} ms; {link.frames_back_linked:.0%} of frames back",
                  file=out)  # fmt: skip
        print(f"640x480 streams at 30 fps without drops: {result.streams_held_640x480_30fps}", file=out)
        by_streams = ", ".join(f"{n} at once {mb:.0f}" for n, mb in result.server_rss_mb_by_streams.items())
        print(f"memory: server peak RSS {result.server_peak_rss_mb:.0f} MB (streams {by_streams} MB); "
              f"client and local engine peak RSS {result.client_peak_rss_mb:.0f} MB", file=out)  # fmt: skip
        for b in result.batching:
            print(f"{b['streams']:.0f} stream(s) of 640x480: the shared swapper took "
                  f"{b['batched_faces_per_call']} faces per call ({b['batched_calls_per_s']} calls/s); "
                  f"without batching {b['unbatched_faces_per_call']} ({b['unbatched_calls_per_s']} calls/s)",
                  file=out)  # fmt: skip
        held = result.sustained_720p
        if held is not None:
            print(f"1280x720 at 30 fps for {held.seconds:g} s: {held.frames_sent} frames sent, "
                  f"{held.frames_back} back, {held.dropped} dropped ({held.dropped_settled} after the first "
                  f"second, {held.dropped_by_client} by the "
                  f"client; the server's: {held.dropped_at_server}), {held.unreturned_at_edges} not back "
                  f"at the start or end (load average "
                  f"{' '.join(str(v) for v in held.load_average)})", file=out)  # fmt: skip
    return 0
