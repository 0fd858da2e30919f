"""The README's screenshots of the technician UI, taken in a real browser with the default models.

    python scripts/screenshots.py [--out docs]

Serves the app in this process on a free loopback port with the default models (trained first if
``runs/default/`` lacks them), drives Debian's Chromium with Playwright (ENVIRONMENT.md: no
``playwright install``) and writes, each a full-page PNG quantised to 256 colours to stay small:

- ``ui-alerts.png``: two example alerts and an out-of-scope one, beam 5 with three alternatives, their
  verdicts and past cases, the first alert's word-level heatmaps;
- ``ui-engine-health.png``: the bundled engine with the longest history, its RUL, figures and alerts;
- ``ui-batch.png``: an incident log (the first alerts of ``data/test.tsv``, column ``alert`` picked)
  translated, ready to download.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as gradio_app.py sets it, before torch loads OpenMP

from PIL import Image
from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # gradio_app.py lives at the repository root

import gradio_app  # noqa: E402
from seq2seq.cli import run_script  # noqa: E402
from seq2seq.rul.monitor import EngineMonitor  # noqa: E402
from seq2seq.serving.defaults import bundled_engines, default_rul_model, default_translator, load_translators  # noqa: E402
from seq2seq.serving.smoke import free_port  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 120_000
ALERTS = ["hpc outlet temperature rising sharply", "leakage detected on hyd system", "kitchen sink drain blocked"]
LOG_ROWS = 8


def capture(page: Page, path: Path) -> None:
    """Wait until no output is pending (else it is drawn faded), then save a full-page, 256-colour PNG."""
    page.wait_for_function("() => !document.querySelector('.pending, .generating')")
    page.wait_for_timeout(800)  # the last output's fade-in
    page.screenshot(path=str(path), full_page=True)
    Image.open(path).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"{path}: {path.stat().st_size / 1024:.0f} KB")


def alerts(page: Page, out: Path) -> None:
    page.locator("#alerts textarea").fill("\n".join(ALERTS))
    for slider, value in (("#beam", "5"), ("#n-best", "3")):
        page.locator(f"{slider} input[type=number]").fill(value)
        page.locator(f"{slider} input[type=number]").press("Tab")
    page.locator("#recommend").click()
    expect(page.locator("#heatmap-3 img")).to_be_visible(timeout=TIMEOUT_MS)
    capture(page, out / "ui-alerts.png")


def engine_health(page: Page, out: Path, unit: int) -> None:
    page.get_by_role("tab", name="Engine health").click()
    page.locator("#engine input").click()
    page.get_by_role("option", name=f"engine {unit} (").click()
    page.locator("#analyse").click()
    expect(page.locator("#engine-summary")).to_contain_text(f"Engine {unit}", timeout=TIMEOUT_MS)
    expect(page.locator("#alert-heatmap img")).to_be_visible(timeout=TIMEOUT_MS)
    capture(page, out / "ui-engine-health.png")


def batch(page: Page, out: Path, folder: Path) -> None:
    with (ROOT / "data" / "test.tsv").open(encoding="utf-8") as handle:
        sources = [line.split("\t")[0] for line in handle.read().splitlines()[1:LOG_ROWS + 1]]
    log = folder / "incidents.csv"
    with log.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ticket", "reported", "alert"])
        writer.writerows([f"T-{1040 + i}", f"2026-11-{i + 1:02d}", source] for i, source in enumerate(sources))
    page.get_by_role("tab", name="Batch").click()
    page.locator("#batch-file input[type=file]").set_input_files(str(log))
    expect(page.locator("#batch-file").get_by_role("cell", name=log.name)).to_be_visible(timeout=TIMEOUT_MS)
    page.locator("#batch-column input").click()
    page.get_by_role("option", name="alert", exact=True).click()
    page.locator("#translate-file").click()
    expect(page.locator("#batch-summary")).to_contain_text(f"{LOG_ROWS} rows", timeout=TIMEOUT_MS)
    capture(page, out / "ui-batch.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    translators = load_translators([str(default_translator())])
    engines = bundled_engines()
    demo = gradio_app.build(translators, EngineMonitor.from_checkpoint(default_rul_model()), engines)
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
                            max_file_size=gradio_app.MAX_FILE_SIZE)
    try:
        with sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)
            alerts(page, args.out)
            engine_health(page, args.out, max(engines, key=lambda engine: engine.length).unit)
            batch(page, args.out, Path(folder))
            browser.close()
    finally:
        demo.close(verbose=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "screenshots"))
