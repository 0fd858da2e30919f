"""The technician UI in a real browser (Debian's Chromium driven by Playwright), on the tiny models.

Types an alert and reads the recommendation and its heatmap, analyses an engine, uploads a log in
the Batch tab and downloads the result; marks recommendations right or wrong and finds the verdict and
the correction in the feedback database. A screenshot of each tab is saved under the session's
temporary folder (``screenshots/``) for a person to look at.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import csv
import random
import re
import string
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright
from support import UI_ALERTS, launch, trained, trained_rul

import gradio_app
from seq2seq.config import SearchConfig
from seq2seq.recommender import Recommender
from seq2seq.rul.cmapss import read_cmapss, write_cmapss
from seq2seq.rul.monitor import EngineMonitor
from seq2seq.serving.app import MAX_REQUEST_BODY
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.serving.handlers import MAX_ALERTS, MAX_BEAM, MAX_CHARS, MAX_N_BEST
from seq2seq.trust import as_shown

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 60_000  # a shared two-core machine can be slow; this is a wait limit, not a speed test

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                       "(apt-get install -y chromium chromium-driver)"),
    pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning", "ignore::ResourceWarning"),
]


@pytest.fixture(scope="module")
def recommender(tmp_path_factory) -> Recommender:
    return Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)


@pytest.fixture(scope="module")
def feedback(tmp_path_factory) -> FeedbackStore:
    store = FeedbackStore(tmp_path_factory.mktemp("browser-feedback") / "feedback.sqlite")
    yield store
    store.close()


@pytest.fixture(scope="module")
def server(recommender, feedback, tmp_path_factory):
    rul = trained_rul(tmp_path_factory.getbasetemp())
    demo = gradio_app.build({"tiny": recommender}, EngineMonitor.from_checkpoint(rul.output_dir / "best.pt"),
                            read_cmapss(rul.train)[:4], feedback)
    yield launch(demo)
    demo.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server)
    yield page
    context.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots", numbered=False)


def settle_and_capture(page: Page, path: Path) -> None:
    """Wait until no output is pending (else it is drawn faded), then take a full-page screenshot."""
    page.wait_for_function("() => !document.querySelector('.pending, .generating')")
    page.wait_for_timeout(500)  # let the fade-in transition of the last output finish
    page.screenshot(path=str(path), full_page=True)


def test_typed_alert_shows_its_recommendation_and_heatmap(page, recommender, screenshots):
    page.locator("#alerts textarea").fill("\n".join(UI_ALERTS[:2]))
    for slider in ("#beam", "#n-best"):
        page.locator(f"{slider} input[type=number]").fill("3")
        page.locator(f"{slider} input[type=number]").press("Tab")
    page.locator("#recommend").click()
    best = recommender.recommend([UI_ALERTS[0]], SearchConfig(beam_size=3, n_best=3))[0]
    expect(page.locator("#summary")).to_contain_text(best.text, timeout=TIMEOUT_MS)
    expect(page.locator("#summary table").first).to_contain_text(best.candidates[-1].text)
    expect(page.locator("#heatmap img")).to_be_visible(timeout=TIMEOUT_MS)
    for k in range(2, len(best.candidates) + 1):
        expect(page.locator(f"#heatmap-{k} img")).to_be_visible(timeout=TIMEOUT_MS)
    settle_and_capture(page, screenshots / "alerts.png")


def test_the_page_never_posts_more_than_the_body_cap_even_for_the_largest_answer(page):
    """The largest answer the page can ask for (every alert it takes, long ones, beam 10 with 5 alternatives each)
    is megabytes of JSON with a real translator; the steps that draw it must not send it back, over the cap."""
    rng = random.Random(7)
    alerts = [" ".join("".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(20))
              for _ in range(MAX_ALERTS)]
    assert len("\n".join(alerts)) <= MAX_CHARS
    posted: list[bytes] = []
    page.on("request", lambda request: posted.append(request.post_data_buffer or b""))
    page.locator("#alerts textarea").fill("\n".join(alerts))
    for slider, value in (("#beam", MAX_BEAM), ("#n-best", MAX_N_BEST)):
        page.locator(f"{slider} input[type=number]").fill(str(value))
        page.locator(f"{slider} input[type=number]").press("Tab")
    page.locator("#recommend").click()
    expect(page.locator("#summary")).to_contain_text(f"{MAX_ALERTS}. {alerts[-1]}", timeout=TIMEOUT_MS)
    expect(page.locator("#heatmap img")).to_be_visible(timeout=TIMEOUT_MS)
    assert posted and max(map(len, posted)) <= MAX_REQUEST_BODY
    assert not any(b"word_attention" in body for body in posted), "an answer's JSON went back to the server"


def test_a_web_address_typed_in_an_alert_shows_as_written_and_is_no_link(page):
    """The page linked an address by itself, with the escapes that keep the rest of the text from being markup:
    "https://www\\.faa\\.gov/..." (found by a probe of the UI)."""
    typed = "see https://www.faa.gov/sb_72-01.pdf and tech.lead@example.com"
    page.locator("#alerts textarea").fill(typed)
    page.locator("#recommend").click()
    expect(page.locator("#summary")).to_contain_text(typed, timeout=TIMEOUT_MS)
    assert page.locator("#summary a").count() == 0


def test_wrong_with_a_correction_is_stored_in_the_feedback_database(page, recommender, feedback):
    page.locator("#alerts textarea").fill("\n".join(UI_ALERTS[:2]))
    page.locator("#recommend").click()
    second = recommender.recommend([UI_ALERTS[1]])[0]
    expect(page.locator("#summary")).to_contain_text(second.text, timeout=TIMEOUT_MS)
    page.locator("#alerts-feedback-choice input").click()
    page.get_by_role("option", name=f"2. {UI_ALERTS[1]}").click()
    correction = 'replaced the "B" belt — größer\nand re-tensioned'
    page.locator("#alerts-correction textarea").fill(correction)
    page.locator("#alerts-technician textarea, #alerts-technician input").first.fill("Zoë")
    page.locator("#alerts-wrong").click()
    expect(page.locator("#alerts-feedback-saved")).to_contain_text("saved as feedback record", timeout=TIMEOUT_MS)
    record = feedback.records()[-1]
    assert (record.feedback.alert, record.feedback.recommendation, record.feedback.verdict,
            record.feedback.correction, record.feedback.technician) == (UI_ALERTS[1], second.text, "wrong",
                                                                       correction, "Zoë")
    assert record.shown.translator and record.shown.score == pytest.approx(second.score, abs=1e-4)


def test_a_new_answer_leaves_no_correction_or_saved_message_of_the_answer_before(page, feedback):
    """A correction typed for one alert stayed in its box under the next answer, to be stored against it."""
    page.locator("#alerts textarea").fill(UI_ALERTS[0])
    page.locator("#recommend").click()
    expect(page.locator("#alerts-feedback-choice input")).to_have_value(re.compile(r"^1\. "), timeout=TIMEOUT_MS)
    page.locator("#alerts-correction textarea").fill("called a plumber")
    page.locator("#alerts-wrong").click()
    expect(page.locator("#alerts-feedback-saved")).to_contain_text("saved as feedback record", timeout=TIMEOUT_MS)
    page.locator("#alerts textarea").fill(UI_ALERTS[1])
    page.locator("#recommend").click()
    expect(page.locator("#alerts-feedback-choice input")).to_have_value(re.compile(rf"^1\. {UI_ALERTS[1]}"),
                                                                       timeout=TIMEOUT_MS)
    expect(page.locator("#alerts-correction textarea")).to_have_value("")
    expect(page.locator("#alerts-feedback-saved")).not_to_contain_text("saved")


def test_a_double_click_on_right_stores_one_record_and_a_click_after_it_says_it_is_already_saved(page, feedback):
    page.locator("#alerts textarea").fill(UI_ALERTS[0])
    page.locator("#recommend").click()
    expect(page.locator("#alerts-feedback-choice input")).to_have_value(re.compile(r"^1\. "), timeout=TIMEOUT_MS)
    before = len(feedback.records())
    page.locator("#alerts-right").dblclick()
    expect(page.locator("#alerts-feedback-saved")).to_contain_text("saved as feedback record", timeout=TIMEOUT_MS)
    page.wait_for_function("() => !document.querySelector('.pending, .generating')")
    page.locator("#alerts-right").click()
    expect(page.locator("#alerts-feedback-saved")).to_contain_text("Already saved as feedback record",
                                                                   timeout=TIMEOUT_MS)
    assert len(feedback.records()) == before + 1


def test_right_on_an_engine_alert_is_stored_in_the_feedback_database(page, feedback):
    page.get_by_role("tab", name="Engine health").click()
    page.locator("#analyse").click()
    expect(page.locator("#alert-heatmap img")).to_be_visible(timeout=TIMEOUT_MS)
    # The choices may arrive after the figures: wait for them rather than read an empty box
    expect(page.locator("#engine-feedback-choice input")).to_have_value(re.compile(r"^1\. .+ -> "), timeout=TIMEOUT_MS)
    chosen = page.locator("#engine-feedback-choice input").input_value()
    page.locator("#engine-right").click()
    expect(page.locator("#engine-feedback-saved")).to_contain_text("saved as feedback record", timeout=TIMEOUT_MS)
    record = feedback.records()[-1]
    assert record.feedback.verdict == "right" and record.feedback.correction == ""
    shown = as_shown(record.feedback.recommendation, record.shown.trust_verdict)  # a guess out of scope says so
    assert chosen == f"1. {record.feedback.alert} -> {shown}"


def test_empty_alerts_show_a_readable_message(page):
    page.locator("#recommend").click()
    expect(page.get_by_text("Type at least one alert").first).to_be_visible(timeout=TIMEOUT_MS)


def test_a_refused_request_leaves_nothing_of_the_answer_before_on_the_page(page, recommender):
    page.locator("#alerts textarea").fill(UI_ALERTS[0])
    page.locator("#recommend").click()
    answer = recommender.recommend([UI_ALERTS[0]])[0].text
    expect(page.locator("#summary")).to_contain_text(answer, timeout=TIMEOUT_MS)
    page.locator("#alerts textarea").fill("\n".join([UI_ALERTS[0]] * (MAX_ALERTS + 1)))
    page.locator("#recommend").click()
    expect(page.get_by_text("Too much input").first).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#summary")).not_to_contain_text(answer, timeout=TIMEOUT_MS)
    expect(page.locator("#heatmap img")).to_have_count(0, timeout=TIMEOUT_MS)


def test_engine_tab_shows_rul_figures_and_alert_heatmaps(page, screenshots):
    posted: list[bytes] = []
    page.on("request", lambda request: posted.append(request.post_data_buffer or b""))
    page.get_by_role("tab", name="Engine health").click()
    page.locator("#analyse").click()
    expect(page.locator("#engine-summary")).to_contain_text("RUL", timeout=TIMEOUT_MS)
    expect(page.locator("#engine-attention img")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#engine-deviations img")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#alert-heatmap img")).to_be_visible(timeout=TIMEOUT_MS)
    settle_and_capture(page, screenshots / "engine_health.png")
    assert not any(b"word_attention" in body for body in posted), "the report's JSON went back to the server"


def test_a_bundled_engine_picked_while_a_file_is_attached_is_the_one_analysed(page, tmp_path, tmp_path_factory):
    """The file was analysed again, the bundled choice ignored, and only "(the file's name)" in the summary said so."""
    engines = read_cmapss(trained_rul(tmp_path_factory.getbasetemp()).train)[:4]  # the server's bundled engines
    write_cmapss(tmp_path / "fleet.txt", engines[:1])
    page.get_by_role("tab", name="Engine health").click()
    page.locator("#cmapss-file input[type=file]").set_input_files(str(tmp_path / "fleet.txt"))
    expect(page.locator("#cmapss-file").get_by_role("cell", name="fleet.txt")).to_be_visible(timeout=TIMEOUT_MS)
    page.locator("#engine input").click()
    page.get_by_role("option", name=f"engine {engines[1].unit} (").click()
    expect(page.locator("#cmapss-file").get_by_role("cell", name="fleet.txt")).to_have_count(0, timeout=TIMEOUT_MS)
    page.locator("#analyse").click()
    expect(page.locator("#engine-summary")).to_contain_text(f"Engine {engines[1].unit}", timeout=TIMEOUT_MS)
    expect(page.locator("#engine-summary")).not_to_contain_text("fleet.txt")


def test_a_new_upload_clears_the_result_of_the_file_before(page, tmp_path):
    logs = []
    for name in ("first.txt", "second.txt"):
        logs.append(tmp_path / name)
        logs[-1].write_text("\n".join(UI_ALERTS) + "\n", encoding="utf-8")
    page.get_by_role("tab", name="Batch").click()
    page.locator("#batch-file input[type=file]").set_input_files(str(logs[0]))
    expect(page.locator("#batch-file").get_by_role("cell", name="first.txt")).to_be_visible(timeout=TIMEOUT_MS)
    page.locator("#translate-file").click()
    expect(page.locator("#batch-summary")).to_contain_text("3 rows", timeout=TIMEOUT_MS)
    page.locator("#batch-file button[aria-label='Clear']").click()
    page.locator("#batch-file input[type=file]").set_input_files(str(logs[1]))
    expect(page.locator("#batch-file").get_by_role("cell", name="second.txt")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#batch-summary")).not_to_contain_text("3 rows", timeout=TIMEOUT_MS)
    expect(page.locator("#batch-result a")).to_have_count(0)


def test_batch_tab_translates_an_upload_into_a_download(page, screenshots, tmp_path):
    log = tmp_path / "incidents.tsv"
    log.write_text("ticket\tsource\n" + "".join(f"{i}\t{alert}\n" for i, alert in enumerate(UI_ALERTS, 1)),
                   encoding="utf-8")
    page.get_by_role("tab", name="Batch").click()
    page.locator("#batch-file input[type=file]").set_input_files(str(log))
    expect(page.locator("#batch-file").get_by_role("cell", name=log.name)).to_be_visible(timeout=TIMEOUT_MS)
    page.locator("#translate-file").click()
    link = page.locator("#batch-result a").first
    expect(link).to_be_visible(timeout=TIMEOUT_MS)
    with page.expect_download() as download:
        link.click()
    saved = tmp_path / "result.tsv"
    download.value.save_as(saved)
    with saved.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert [row["source"] for row in rows] == UI_ALERTS
    assert all(row["recommendation"] for row in rows)
    expect(page.locator("#batch-summary")).to_contain_text("3 rows", timeout=TIMEOUT_MS)
    settle_and_capture(page, screenshots / "batch.png")
