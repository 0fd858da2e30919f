"""The feedback database (seq2seq/serving/feedback.py) and ``seq2seq feedback export | stats``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import unicodedata
from pathlib import Path

import pytest
from support import assert_one_line_error, file_states, run_cli

from seq2seq.corpus import read_parallel
from seq2seq.errors import DataError
from seq2seq.serving import feedback_store
from seq2seq.serving.feedback import MAX_NAME, MAX_TEXT, Feedback, Shown
from seq2seq.serving.feedback_store import SCHEMA_VERSION, FeedbackStore

ROOT = Path(__file__).resolve().parent.parent
AWKWARD = [  # (alert, recommendation, verdict, correction, technician): quotes, newlines, tabs, non-ASCII, SQL
    ('say "hi" it\'s', "replace 1/2\" bolt", "wrong", "two\nlines\r\nand\ttab", "Zoë Ørsted"),
    ("ÜBERDRUCK Ventil — 温度", "prüfen", "right", "", ""),
    ("x'); DROP TABLE feedback; --", "%s ? :alert", "wrong", "", "Robert'); --"),
    ("lines\rold\nand new\r\n", "a\u2028b\u00a0c", "right", "  ", "\t"),
]
CONTROLS = [chr(code) for code in range(0x110000) if unicodedata.category(chr(code)) == "Cc"]


@pytest.fixture
def store(tmp_path):
    opened = FeedbackStore(tmp_path / "feedback.sqlite")
    yield opened
    opened.close()


def post(store: FeedbackStore, *fields: str, shown: Shown | None = None) -> int:
    return store.add(Feedback.checked(*fields), shown)


def test_every_field_comes_back_exactly_as_posted(store, tmp_path):
    shown = Shown("ab" * 32, -0.25, 0.75, "confident")
    ids = [post(store, *fields, shown=shown) for fields in AWKWARD]
    reopened = FeedbackStore(tmp_path / "feedback.sqlite")  # from the file, not from a cache
    records = reopened.records()
    reopened.close()
    assert [r.id for r in records] == ids == sorted(set(ids))
    assert [(r.feedback.alert, r.feedback.recommendation, r.feedback.verdict, r.feedback.correction,
             r.feedback.technician) for r in records] == AWKWARD
    assert all(r.shown == shown for r in records)
    assert all(r.time.endswith("+00:00") for r in records)


def test_a_program_s_post_keeps_no_score_trust_or_translator(store):
    post(store, "pump vibration high", "inspect pump bearings", "right")
    assert store.records()[0].shown == Shown(None, None, None, None)


def test_the_file_is_in_wal_mode_with_the_current_schema_version(store):
    db = sqlite3.connect(store.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


@pytest.mark.parametrize(("fields", "words"), [
    (("pump", "inspect", "maybe"), ("verdict", "'right' or 'wrong'", "maybe")),
    (("pump", "inspect", None), ("verdict",)),
    ((["pump"], "inspect", "wrong"), ("alert", "text", "list")),
    (("pump", 3, "wrong"), ("recommendation", "text", "int")),
    (("  \n", "inspect", "wrong"), ("alert", "empty")),
    (("pump", " ", "right"), ("right", "recommendation")),
    (("x" * (MAX_TEXT + 1), "inspect", "wrong"), ("alert", f"at most {MAX_TEXT:,} are accepted; nothing was stored")),
    (("pump", "inspect", "wrong", "", "n" * (MAX_NAME + 1)), ("technician",)),
    (("pump\ud800", "inspect", "wrong"), ("alert", "surrogate at character 5")),
    (("pump\x00", "inspect", "wrong"), ("alert", "control character (U+0000) at character 5")),
    (("pump", "inspect", "wrong", "esc \x1b[31m red"), ("correction", "control character (U+001B) at character 5")),
    (("pump", "bell\x07", "right"), ("recommendation", "(U+0007) at character 5")),
    (("pump", "inspect", "wrong", "replace \u202eevlav"), ("correction", "bidirectional override (U+202E) at "
                                                             "character 9")),
    (("pump", "inspect", "wrong", "", "csi\x9b"), ("technician", "(U+009B) at character 4")),
])
def test_bad_feedback_is_a_one_line_error_naming_the_field(fields, words):
    with pytest.raises(DataError) as caught:
        Feedback.checked(*fields)
    assert "\n" not in str(caught.value)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize(("typed", "stored"), [("Wrong", "wrong"), (" WRONG ", "wrong"), ("Right", "right"),
                                              ("ｒｉｇｈｔ", "right")])
def test_a_verdict_in_other_case_or_spacing_is_stored_as_the_word_it_spells(typed, stored):
    assert Feedback.checked("pump", "inspect", typed).verdict == stored


def test_every_control_character_but_tab_and_line_breaks_is_refused_and_nothing_is_stored(store):
    fields = {"alert": "pump low", "recommendation": "inspect pump", "verdict": "wrong", "correction": "",
              "technician": ""}
    for control in CONTROLS:
        for name in ("alert", "recommendation", "correction", "technician"):
            posted = {**fields, name: "x" + control}.values()
            if control in "\t\n\r":
                post(store, *posted)
                continue
            with pytest.raises(DataError, match=rf"{name} holds a control character \(U\+{ord(control):04X}\) at "
                                                "character 2;"):
                post(store, *posted)
    assert len(store.records()) == 3 * 4  # tab, LF and CR in each of the four text fields


def test_a_wrong_verdict_may_come_without_a_correction_or_a_name(store):
    post(store, "pump", "inspect pump", "wrong")
    assert store.records()[0].feedback == Feedback("pump", "inspect pump", "wrong", "", "")


def test_a_file_written_by_a_newer_schema_is_refused_unchanged(tmp_path):
    path = tmp_path / "newer.sqlite"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = file_states(path)
    with pytest.raises(DataError, match="schema version"):
        FeedbackStore(path)
    assert file_states(path) == before


def test_an_sqlite_file_of_other_tables_is_refused_and_gets_no_feedback_table(tmp_path):
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE parts (name TEXT)")
    db.commit()
    db.close()
    with pytest.raises(DataError, match="other tables"):
        FeedbackStore(path)
    db = sqlite3.connect(path)
    assert [row[0] for row in db.execute("SELECT name FROM sqlite_master")] == ["parts"]
    db.close()


@pytest.mark.parametrize("content", [b"not a database at all\n" * 100, "ÿ".encode("latin-1") * 4096])
def test_a_file_that_is_no_database_is_a_one_line_error(tmp_path, content):
    path = tmp_path / "notes.sqlite"
    path.write_bytes(content)
    with pytest.raises(DataError, match="not a feedback database") as caught:
        FeedbackStore(path)
    assert "\n" not in str(caught.value) and path.read_bytes() == content


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_post_after_the_database_was_deleted_or_replaced_is_refused_not_acknowledged_into_nowhere(tmp_path, how):
    path = tmp_path / "feedback.sqlite"
    store = FeedbackStore(path)
    post(store, "pump", "inspect", "wrong")
    for name in ("feedback.sqlite", "feedback.sqlite-wal", "feedback.sqlite-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    if how == "replaced":
        FeedbackStore(path).close()
    with pytest.raises(DataError, match="feedback not stored: the database was deleted or replaced while the app ran"):
        post(store, "fan", "balance", "right")
    store.close()


def test_reopening_keeps_the_records_and_continues_the_ids(tmp_path):
    path = tmp_path / "feedback.sqlite"
    first = FeedbackStore(path)
    ids = [post(first, "pump", "inspect", "wrong") for _ in range(3)]
    first.close()
    second = FeedbackStore(path)
    assert post(second, "fan", "balance", "right") == ids[-1] + 1
    assert len(second.records()) == 4
    second.close()


def test_concurrent_threads_lose_no_record(store):
    def write(writer: int) -> None:
        for n in range(40):
            post(store, f"alert {writer} {n}", "inspect", "wrong", f"fix {writer} {n}")

    threads = [threading.Thread(target=write, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = store.records()
    assert sorted(r.feedback.alert for r in records) == sorted(f"alert {k} {n}" for k in range(8) for n in range(40))
    assert len({r.id for r in records}) == len(records)


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from seq2seq.serving.feedback import Feedback
    from seq2seq.serving.feedback_store import FeedbackStore
    path, writer, gate = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    store = FeedbackStore(path)
    while not gate.exists():  # every process imported and opened before any writes
        time.sleep(0.01)
    for n in range(60):
        print(store.add(Feedback.checked(f"alert {writer} {n}", "inspect", "wrong")), flush=True)
""")


@pytest.mark.slow
def test_concurrent_processes_lose_no_record_and_share_no_id(tmp_path):
    path, gate = tmp_path / "feedback.sqlite", tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(k), str(gate)], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True) for k in range(3)]
    time.sleep(0.5)
    gate.touch()
    acknowledged = [int(line) for writer in writers for line in writer.communicate(timeout=120)[0].split()]
    assert all(writer.returncode == 0 for writer in writers)
    store = FeedbackStore(path)
    records = store.records()
    store.close()
    assert sorted(r.id for r in records) == sorted(acknowledged) and len(set(acknowledged)) == 180
    assert {r.feedback.alert for r in records} == {f"alert {k} {n}" for k in range(3) for n in range(60)}


# -- seq2seq feedback export | stats ------------------------------------------------------------------
@pytest.fixture
def filled(store):
    post(store, "pump  vibration\nhigh", "inspect pump\tbearings", "right")  # -> the recommendation
    post(store, "fan speed low", "replace fan belt", "wrong", " check fan\nmotor relay ", "Ann")  # -> the correction
    post(store, "valve leak", "replace valve seal", "wrong")  # nothing to learn: skipped
    post(store, 'say "hi"', "inspect", "right", "inspect and re-torque", "Bo")  # a correction wins over 'right'
    return store


def test_export_writes_one_line_per_learnable_record_with_whitespace_collapsed(filled, tmp_path):
    output = tmp_path / "out" / "corrections.tsv"
    result = run_cli("feedback", "export", "--db", str(filled.path), "--output", str(output))
    assert result.status == 0, result.stderr
    assert output.read_text(encoding="utf-8").split("\n") == [
        "alert\taction", "pump vibration high\tinspect pump bearings", "fan speed low\tcheck fan motor relay",
        'say "hi"\tinspect and re-torque', ""]
    assert "3 alert/action pairs of 4 records" in result.stderr


@pytest.fixture
def revised(store):
    """An alert's story over a shift: posted twice (a retried post), corrected, corrected again, withdrawn."""
    post(store, "fan speed low", "replace fan belt", "right")
    post(store, "Fan  speed LOW", "replace fan belt", "right")  # the same pair, case and spacing aside: a repeat
    post(store, "hyd press lo", "replace pump", "wrong", "tighten return line")
    post(store, "fan speed low", "replace fan belt", "wrong", "check fan motor relay")  # supersedes the belt
    post(store, "hyd press lo", "tighten return line", "wrong")  # withdraws it: nothing to do instead
    post(store, "egt high", "inspect egt probes", "right")
    return store


def test_export_writes_each_alert_once_with_its_newest_action_and_says_what_became_of_the_rest(revised, tmp_path):
    output = tmp_path / "corrections.tsv"
    result = run_cli("feedback", "export", "--db", str(revised.path), "--output", str(output))
    assert result.status == 0, result.stderr
    assert output.read_text(encoding="utf-8").split("\n") == [
        "alert\taction", "fan speed low\tcheck fan motor relay", "egt high\tinspect egt probes", ""]
    assert ("2 alert/action pairs of 6 records" in result.stderr and "1 repeating an alert's pair" in result.stderr
            and "1 superseded by a newer action" in result.stderr and "1 of them withdrawing" in result.stderr)
    every = run_cli("feedback", "export", "--db", str(revised.path), "--output", str(output), "--every-record")
    assert every.status == 0, every.stderr
    assert len(output.read_text(encoding="utf-8").splitlines()) == 1 + 5  # each record with an action, as before
    assert "5 alert/action pairs of 6 records" in every.stderr


def test_train_reads_an_export_by_its_alert_and_action_columns(filled, tmp_path):
    output = tmp_path / "corrections.tsv"
    assert run_cli("feedback", "export", "--db", str(filled.path), "--output", str(output)).status == 0
    corpus = read_parallel(output)
    assert [(e.source, e.target) for e in corpus.examples] == [
        ("pump vibration high", "inspect pump bearings"), ("fan speed low", "check fan motor relay"),
        ('say "hi"', "inspect and re-torque")]


def test_an_export_names_its_columns_as_the_dev_file_does_so_one_pair_of_column_flags_reads_both(filled, tmp_path):
    """A history with its own column names (fault, fix): train's --source-column reads the export and the dev file
    alike, where the export's fixed alert/action refused one or the other (found by a probe of the feedback loop)."""
    output = tmp_path / "corrections.tsv"
    result = run_cli("feedback", "export", "--db", str(filled.path), "--output", str(output), "--source-column",
                     "fault", "--target-column", "fix")
    assert result.status == 0, result.stderr
    assert output.read_text(encoding="utf-8").split("\n")[0] == "fault\tfix"
    corpus = read_parallel(output, "fault", "fix")
    assert [e.source for e in corpus.examples] == ["pump vibration high", "fan speed low", 'say "hi"']
    for flags, words in ((["--source-column", "fix"], "both 'fix'"), (["--source-column", "a\tb"], "no tab")):
        refused = run_cli("feedback", "export", "--db", str(filled.path), "--output", str(tmp_path / "x.tsv"),
                          "--target-column", "fix", *flags)
        assert refused.status == 2 and words in refused.stderr and not (tmp_path / "x.tsv").exists()


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_export_never_writes_over_the_database(filled, suffix):
    target = filled.path.with_name(filled.path.name + suffix)
    before = file_states(filled.path, target)
    result = run_cli("feedback", "export", "--db", str(filled.path), "--output", str(target))
    assert_one_line_error(result, "--output", "feedback database")
    assert file_states(filled.path, target) == before


def test_export_never_writes_over_the_database_through_a_link_to_it(filled, tmp_path):
    link = tmp_path / "link.sqlite"
    link.symlink_to(filled.path)
    wal = filled.path.with_name(filled.path.name + "-wal")
    before = file_states(filled.path, wal)
    result = run_cli("feedback", "export", "--db", str(link), "--output", str(wal))
    assert_one_line_error(result, "--output is the feedback database -wal")
    assert file_states(filled.path, wal) == before


def test_stats_and_export_read_without_writing_or_waiting_for_a_writer(filled, tmp_path, monkeypatch):
    writer = sqlite3.connect(filled.path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a write transaction held open, as an app mid-post holds one
    writer.execute("INSERT INTO feedback (time, alert, recommendation, verdict, correction, technician) "
                   "VALUES ('t', 'a', 'r', 'right', '', '')")
    paths = [filled.path.with_name(filled.path.name + suffix) for suffix in ("", "-wal")]
    before = file_states(*paths)
    stats = run_cli("feedback", "stats", "--db", str(filled.path), "--json")
    exported = run_cli("feedback", "export", "--db", str(filled.path), "--output", str(tmp_path / "o.tsv"))
    assert stats.status == exported.status == 0, stats.stderr + exported.stderr
    assert json.loads(stats.stdout)["records"] == 4  # what was committed
    # The writer's lock is no reader's business (it waited 30 s): with no time to wait, reading still succeeds
    monkeypatch.setattr(feedback_store, "BUSY_TIMEOUT_S", 0.0)
    reader = FeedbackStore(filled.path, create=False)
    assert len(reader.records()) == 4
    reader.close()
    assert file_states(*paths) == before
    writer.execute("ROLLBACK")
    writer.close()


def test_stats_of_an_sqlite_file_without_tables_counts_nothing_and_leaves_it_as_it_was(tmp_path):
    path = tmp_path / "empty.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE gone (x)")
    db.execute("DROP TABLE gone")  # a real SQLite file, with pages and no table: it used to get a feedback table
    db.commit()
    db.close()
    before = file_states(path)
    result = run_cli("feedback", "stats", "--db", str(path), "--json")
    assert result.status == 0, result.stderr
    assert json.loads(result.stdout)["records"] == 0
    assert file_states(path) == before and before[path]


def test_records_only_in_the_log_of_a_database_that_cannot_be_opened_for_reading_are_never_left_out(
        filled, tmp_path, monkeypatch):
    copy = tmp_path / "copy"  # a read-only folder's file as SQLite sees it: the plain read-only open fails
    copy.mkdir()
    for suffix in ("", "-wal"):  # the app still open: its records are in the log
        (copy / f"feedback.sqlite{suffix}").write_bytes(filled.path.with_name(filled.path.name + suffix).read_bytes())
    opened = FeedbackStore._open

    def ro_open_fails(self, uri):
        if "immutable" not in uri:
            raise sqlite3.OperationalError("unable to open database file")
        return opened(self, uri)

    monkeypatch.setattr(FeedbackStore, "_open", ro_open_fails)
    with pytest.raises(DataError, match=r"records are still in feedback\.sqlite-wal beside it"):
        FeedbackStore(copy / "feedback.sqlite", create=False)
    (copy / "feedback.sqlite-wal").unlink()  # no log: the file alone is the whole database, read as it is
    assert FeedbackStore(copy / "feedback.sqlite", create=False).stats()["records"] == 0


@pytest.mark.parametrize("schema", ["", "CREATE TABLE feedback (id INTEGER PRIMARY KEY, alert TEXT)"])
def test_a_file_claiming_the_schema_without_its_table_is_one_line_not_a_traceback(tmp_path, schema):
    path = tmp_path / "v1.sqlite"
    db = sqlite3.connect(path)
    if schema:
        db.execute(schema)
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    for command in ("stats", "export"):
        output = ["--output", str(tmp_path / "o.tsv")] if command == "export" else []
        result = run_cli("feedback", command, "--db", str(path), *output)
        assert_one_line_error(result, "v1.sqlite: not a feedback database")
    with pytest.raises(DataError, match="not a feedback database"):
        FeedbackStore(path)  # the app: refused when opened, not at every click


def test_a_negative_schema_version_is_not_a_feedback_database(tmp_path):
    path = tmp_path / "neg.sqlite"
    FeedbackStore(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = -1")  # it read "table feedback already exists", a migration run again
    db.commit()
    db.close()
    assert_one_line_error(run_cli("feedback", "stats", "--db", str(path)), "neg.sqlite: an SQLite file holding "
                          "other tables, not a feedback database")


def test_an_alert_or_action_of_invisible_characters_only_is_empty(store):
    for invisible in ("\u200b", "\ufeff", "\u00ad\u2060"):
        with pytest.raises(DataError, match="the alert is empty"):
            Feedback.checked(invisible, "inspect pump", "wrong", "replace pump")
        assert Feedback.checked("pump noisy", "inspect pump", "wrong", invisible).action is None
    assert store.stats()["learnable"] == 0


@pytest.mark.parametrize("name", ["corrections.csv", "c.JSONL", "c.xlsx", "corrections.txt", "corrections"])
def test_export_under_a_name_train_would_not_read_as_tsv_is_refused(filled, tmp_path, name):
    result = run_cli("feedback", "export", "--db", str(filled.path), "--output", str(tmp_path / name))
    assert_one_line_error(result, f"{name}: export writes tab-separated pairs", "name it .tsv")
    assert not (tmp_path / name).exists()


def test_export_of_a_missing_database_is_a_one_line_error_and_creates_nothing(tmp_path):
    result = run_cli("feedback", "export", "--db", str(tmp_path / "none.sqlite"), "--output", str(tmp_path / "o.tsv"))
    assert_one_line_error(result, "none.sqlite", "not found")
    assert list(tmp_path.iterdir()) == []


def test_records_stored_before_control_characters_were_refused_are_exported_escaped_not_lost(store, tmp_path):
    kept = [Feedback("nul\x00 alert", "x", "wrong", "esc\x1b[2J clear\x07", "Ann"),  # as add() stored them before
            Feedback("fan\x9bslow", "replace\x0bfan belt", "right", "", "\x7f")]
    ids = [store.add(feedback) for feedback in kept]
    post(store, "pump low", "inspect pump", "right")
    output = tmp_path / "corrections.tsv"
    result = run_cli("feedback", "export", "--db", str(store.path), "--output", str(output))
    assert result.status == 0, result.stderr
    lines = output.read_text(encoding="utf-8").split("\n")
    assert lines == ["alert\taction", "nul\\x00 alert\tesc\\x1b[2J clear\\x07",
                     "fan\\x9bslow\treplace\\x0bfan belt", "pump low\tinspect pump", ""]
    assert all(char.isprintable() or char in "\t\n" for char in output.read_text(encoding="utf-8"))
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert f"2 records hold control characters (ids {ids[0]}, {ids[1]})" in warning
    assert [r.feedback for r in store.records()][:2] == kept  # the database keeps them as they were


def test_stats_json_is_one_object_counting_records_and_verdicts(filled):
    result = run_cli("feedback", "stats", "--db", str(filled.path), "--json")
    assert result.status == 0, result.stderr
    (line,) = result.stdout_lines
    stats = json.loads(line)
    assert {k: stats[k] for k in ("records", "right", "wrong", "corrected", "learnable", "technicians")} == {
        "records": 4, "right": 2, "wrong": 2, "corrected": 2, "learnable": 3, "technicians": 2}
    plain = run_cli("feedback", "stats", "--db", str(filled.path))
    assert "records: 4" in plain.stdout_lines and "wrong: 2" in plain.stdout_lines
