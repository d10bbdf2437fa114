"""A real headless Chromium (Debian's package) opens the report index and the reports: every image
loads, no console error or exception, nothing overflows a 1280 px window, every figure is shown at
least 800 px wide, no figure has an empty chart axes, and a screenshot of each page is kept in
test-artifacts/.

The pages are served by a loopback http.server the test starts and stops; Chromium is driven over
the DevTools protocol (websocket-client) and stopped in a finally.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from datetime import date
from pathlib import Path

import pytest

from acme.jobs.ingest import JobInput, ingest_job_file
from acme.lake import Lake
from acme.report.build import build_report
from tests.debian_packages import ensure_commands
from tests.integration.conftest import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def ensure_chromium() -> str:
    """Debian's chromium, installed with apt-get when missing."""
    ensure_commands(["chromium"], ["chromium"])
    return shutil.which("chromium")


REPORTS = [("seren", "2023-07"), ("kalos", "all"), ("kalos", "2023-07-01")]


@pytest.fixture(scope="module")
def report_lake(tmp_path_factory) -> Lake:
    """The bundled days of both clusters, a day of seren telemetry, and one Unknown kalos diagnosis
    without a category (what the diagnosis writes when nothing decided)."""
    from acme.metrics.ingest import ingest_metrics_file
    from acme.metrics.synth import write_synth_metrics
    from tests.unit.report.conftest import diagnosis, failed_jobs, write_diagnoses

    folder = tmp_path_factory.mktemp("browser")
    lake = Lake(str(folder / "lake"))
    for cluster in ("seren", "kalos"):
        for day in ("2023-07-01", "2023-07-02"):
            path = ROOT / "include" / "sample_data" / "jobs" / cluster / f"{day}.csv"
            ingest_job_file(lake, JobInput(cluster, "acmetrace", str(path)), path)
    write_synth_metrics("seren", 1, date(2023, 7, 1), 1, "acmetrace-csv", folder / "metrics", seed=2)
    ingest_metrics_file(lake, "acmetrace-csv", "seren", str(folder / "metrics"), date(2023, 7, 1))
    job = failed_jobs(lake, "kalos", 1)[0]
    write_diagnoses(lake, "kalos", [diagnosis("kalos", job, "Unknown", None)])
    return lake


@pytest.fixture(scope="module")
def report_site(report_lake, tmp_path_factory) -> Path:
    """The reports of REPORTS and their index in a local folder."""
    site = tmp_path_factory.mktemp("site")
    for cluster, period in REPORTS:
        build_report(report_lake, cluster, period, out_dir=str(site))
    return site


@contextlib.contextmanager
def serve(folder: Path):
    """A loopback HTTP server for ``folder``; shut down on exit."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def headless_chromium(binary: str, profile: Path):
    """Chromium with a DevTools port; the process is stopped (TERM, then KILL) in a finally."""
    port = free_port()
    process = subprocess.Popen(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         f"--user-data-dir={profile}", f"--remote-debugging-port={port}", "--remote-debugging-address=127.0.0.1",
         "--window-size=1280,900", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/version", timeout=2) as answer:
                    json.load(answer)
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("chromium did not open its DevTools port") from None
                time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=20)


class DevTools:
    """A minimal DevTools-protocol client of one page: commands, and the events seen so far."""

    def __init__(self, port: int):
        import websocket

        request = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(request, timeout=10) as answer:
            target = json.load(answer)
        self.socket = websocket.create_connection(
            target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True
        )
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_for(self, event: str, timeout_s: float = 60) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv())
            self.events.append(message)
            if message.get("method") == event:
                return message
        raise TimeoutError(event)

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads reported so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        return found

    def close(self) -> None:
        self.socket.close()


IMAGES = "Array.from(document.images).map(i => ({src: i.src, complete: i.complete, width: i.naturalWidth}))"


def test_index_and_a_report_load_every_image_without_console_errors(report_site):
    binary = ensure_chromium()
    with serve(report_site) as base, headless_chromium(binary, report_site.parent / "profile") as port:
        page = DevTools(port)
        try:
            for domain in ("Page", "Runtime", "Log"):
                page.call(f"{domain}.enable")
            page.open(f"{base}/index.html")
            links = page.evaluate(
                "Array.from(document.querySelectorAll('td a')).map(a => a.getAttribute('href'))"
            )
            assert sorted(links) == sorted(f"cluster={c}/period={p}/index.html" for c, p in REPORTS)
            page.screenshot(ARTIFACTS / "report_index.png")

            page.open(f"{base}/cluster=seren/period=2023-07/index.html")
            images = page.evaluate(IMAGES)
            assert len(images) >= 10
            broken = [image["src"] for image in images if not image["complete"] or image["width"] == 0]
            assert broken == []
            title = page.evaluate("document.querySelector('h1').textContent")
            assert title == "Characterization of seren: month 2023-07"
            findings = page.evaluate(
                "Array.from(document.querySelectorAll('.finding')).map(f => f.textContent)"
            )
            # sections 1-11 (10: ETTR, 11: lemon nodes)
            assert len(findings) == 14 and all(len(f) > 10 for f in findings)
            page.screenshot(ARTIFACTS / "report_seren_2023-07.png")
            back = page.evaluate("document.querySelector('.links a').getAttribute('href')")
            assert back == "../../index.html"
            assert page.problems() == []
        finally:
            page.close()
    for name in ("report_index.png", "report_seren_2023-07.png"):
        assert (ARTIFACTS / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


LAYOUT = """(() => {
  const width = window.innerWidth;
  return {
    page: document.documentElement.scrollWidth,
    client: document.documentElement.clientWidth,
    beyond: Array.from(document.querySelectorAll('body *'))
      .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth)
      .slice(0, 5).map(e => e.tagName + ' ' + (e.className || '') + ' ' + (e.textContent || '').trim().slice(0, 60)),
    width: width,
    boxes: Array.from(document.querySelectorAll('.scroll, table')).map(e => ({
      what: e.tagName + ' ' + (e.textContent || '').trim().slice(0, 40), scroll: e.scrollWidth,
      client: e.clientWidth, right: e.getBoundingClientRect().right})),
    figures: Array.from(document.querySelectorAll('figure img')).map(i => ({
      src: i.getAttribute('src'), shown: i.clientWidth,
      right: i.getBoundingClientRect().right, natural: i.naturalWidth})),
  };
})()"""


def empty_axes(report) -> dict[str, int]:
    """Figure name -> how many of its chart axes show no data (no finite line point, no bar with an
    area, no filled area or marker)."""
    import math

    from matplotlib.patches import Rectangle

    def has_data(ax) -> bool:
        lines = any(any(math.isfinite(float(y)) for y in line.get_ydata()) for line in ax.lines)
        bars = any(isinstance(p, Rectangle) and p.get_width() * p.get_height() != 0 for p in ax.patches)
        areas = any(
            extent.width > 0 and extent.height > 0
            for c in ax.collections
            for extent in (path.get_extents() for path in c.get_paths())
        )  # a stack plot over a single day is a polygon without area
        return lines or bars or areas

    found = {}
    for spec in report.figures:
        draw = report.sections[spec.section].drawers.get(spec.name)
        if spec.drawn and draw is not None:
            figure = draw(report)
            found[spec.name] = sum(not has_data(ax) for ax in figure.axes)
    return found


def test_report_pages_fit_1280_px_with_page_wide_figures_and_no_empty_axes(report_lake, report_site):
    from acme.report.characterize import characterize
    from acme.report.periods import parse_period

    binary = ensure_chromium()
    with serve(report_site) as base, headless_chromium(binary, report_site.parent / "profile-layout") as port:
        page = DevTools(port)
        try:
            for domain in ("Page", "Runtime", "Log"):
                page.call(f"{domain}.enable")
            page.call(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=900,
                deviceScaleFactor=2,
                mobile=False,
            )
            for cluster, period in [(None, None), *REPORTS]:
                path = "index.html" if cluster is None else f"cluster={cluster}/period={period}/index.html"
                page.open(f"{base}/{path}")
                layout = page.evaluate(LAYOUT)
                assert layout["width"] == 1280
                assert layout["page"] <= layout["client"], (
                    f"{path}: the page scrolls sideways: {layout['beyond']}"
                )
                wide = [
                    b
                    for b in layout["boxes"]
                    if b["scroll"] > b["client"] + 1 or b["right"] > layout["client"]
                ]
                assert wide == [], f"{path}: overflowing tables"
                if cluster is None:
                    continue
                small = [f for f in layout["figures"] if f["shown"] < 800 or f["right"] > layout["client"]]
                assert layout["figures"] and small == [], f"{path}: figures narrower than 800 px or cut off"
                # Drawn at twice the CSS pixels: sharp at this device scale factor.
                assert all(f["natural"] >= 2 * f["shown"] for f in layout["figures"]), path
                report = characterize(report_lake, cluster, parse_period(period))
                empty = empty_axes(report)
                assert {f["src"] for f in layout["figures"]} == {f"figures/{name}.png" for name in empty}
                assert {name: n for name, n in empty.items() if n} == {}, f"{path}: empty chart axes"
                page.screenshot(ARTIFACTS / f"report_{cluster}_{period}_1280.png")
            assert page.problems() == []
        finally:
            page.close()


def test_the_failure_table_counts_an_unknown_diagnosis_with_its_coverage(report_site):
    html = (report_site / "cluster=kalos" / "period=all" / "index.html").read_text()
    assert (
        "1 of " in html and " failed jobs diagnosed (Unknown 1): too few for shares to be a finding" in html
    )
    assert "<td>Unknown</td>" in html
