"""The feedback records (``seq2seq.serving.feedback``), kept in one SQLite file (Python's ``sqlite3``);
``seq2seq feedback stats`` counts them and ``export`` reads them.

Durability and concurrency: the file is in WAL mode, each record is one INSERT committed before
``add`` returns, with ``synchronous=FULL``, so the WAL is fsynced at every commit: a record the app
acknowledged survives the app being killed and the machine losing power (NORMAL would survive only
the former; a technician's click costs one fsync, which feedback rates afford). Several processes may
write at once: a writer waits up to BUSY_TIMEOUT_S for the lock instead of failing. Every value a user
typed is bound as a parameter, never interpolated into SQL.

The schema is versioned by ``PRAGMA user_version``: MIGRATIONS[k] takes a file from version k to
k + 1, applied in one transaction when the store opens. A file a newer program wrote, or an SQLite file
holding other tables, is refused rather than altered.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from seq2seq.errors import DataError, shown
from seq2seq.files import utf8_fault
from seq2seq.serving.feedback import Feedback, Record, Shown
from seq2seq.tokenizer import same_text as folded

SIDECARS = ("", "-wal", "-shm", "-journal")  # the database and the files SQLite keeps beside it
BUSY_TIMEOUT_S = 30.0  # a writer waits this long for another's lock before giving up
MAX_ASKED = 500  # recommendations looked up at once (SQLite binds at most 999 parameters in a statement)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # version 1
        """CREATE TABLE feedback (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: an acknowledged id names one record forever
            time TEXT NOT NULL,                    -- UTC, ISO 8601 with milliseconds
            alert TEXT NOT NULL,
            translator TEXT,                       -- model digest; NULL when this app did not show the recommendation
            recommendation TEXT NOT NULL,
            score REAL,                            -- log-probability of the recommendation, as shown
            trust REAL,                            -- in [0, 1], as shown
            trust_verdict TEXT,                    -- confident | uncertain | out-of-scope, as shown
            verdict TEXT NOT NULL CHECK (verdict IN ('right', 'wrong')),
            correction TEXT NOT NULL,              -- what the technician did instead; may be empty
            technician TEXT NOT NULL               -- may be empty
        )""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
COLUMNS: dict[str, tuple[type, ...]] = {  # as records() reads them, with the types each may hold
    "id": (int,), "time": (str,), "alert": (str,), "recommendation": (str,), "verdict": (str,),
    "correction": (str,), "technician": (str,), "translator": (str, type(None)),
    "score": (float, int, type(None)), "trust": (float, int, type(None)), "trust_verdict": (str, type(None))}
SQLITE_TYPES = {bytes: "a BLOB", str: "text", int: "an integer", float: "a real number", type(None): "NULL"}


class FeedbackStore:
    """One SQLite file of feedback records; safe to share between threads, and between processes."""

    def __init__(self, path: str | Path, create: bool = True) -> None:
        """Open (``create``: or create) the file at ``path`` and bring its schema to SCHEMA_VERSION.
        DataError when it cannot be opened, is no feedback database, or a newer program wrote it."""
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise DataError(f"{path}: feedback database not found" if not self.path.exists() else f"{path}: not a file")
        if self.path.is_dir():
            raise DataError(f"{path}: is a directory, not a feedback database")
        if not create and self.path.stat().st_size == 0:  # SQLite would take it for a new database and write to it
            raise DataError(f"{path}: empty file, not a feedback database")
        self._lock = threading.Lock()  # one connection shared by the app's worker threads
        if not create:
            self._db = self._read_only()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: each INSERT commits by itself; migrations open their own transaction.
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                       check_same_thread=False)
        except (OSError, sqlite3.Error) as err:
            raise DataError(f"{path}: cannot open the feedback database ({err})") from None
        try:
            self._version()  # before WAL mode changes the file's header: a refused file stays as it was
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise DataError(f"{path}: SQLite cannot use WAL mode here (journal mode {mode}); "
                                "put the feedback database on a local disk")
            self._db.execute("PRAGMA synchronous=FULL")
            self._migrate()
            self._identity = _identity(self.path)
        except sqlite3.OperationalError as err:  # locked past the timeout, read-only, disk I/O
            self._db.close()
            raise DataError(f"{path}: cannot use the feedback database ({err})") from None
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise DataError(f"{path}: not a feedback database ({err})") from None
        except BaseException:
            self._db.close()
            raise

    def _read_only(self) -> sqlite3.Connection:
        """A connection that reads the file and never writes it (``seq2seq feedback stats`` and ``export``): no
        journal mode set, no lock taken, so a read-only copy or a file another process is writing reads at once.
        A folder this user cannot write (no shared-memory file for WAL) is read as an immutable file; an older
        schema is brought up to date in a copy in memory."""
        uri = f"file:{quote(os.path.realpath(self.path))}?mode=ro"
        try:
            try:
                version = self._open(uri)
            except sqlite3.OperationalError as err:
                # Read as immutable, SQLite ignores the log beside the file: records still in it would be left out
                # without a word. Only a file with no such log is read that way.
                if log := next((log for log in (sidecar(self.path, "-wal"), sidecar(self.path, "-journal"))
                                if log.is_file() and log.stat().st_size), None):
                    raise DataError(f"{self.path}: cannot read the feedback database ({err}), and records are still in "
                                    f"{log.name} beside it; read it where SQLite may write (a copy of the folder), or "
                                    "once the app has closed it") from None
                version = self._open(uri + "&immutable=1")
            if version < SCHEMA_VERSION:
                memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                self._db.backup(memory)
                self._db.close()
                self._db = memory
                self._migrate()
            return self._db
        except sqlite3.OperationalError as err:
            raise DataError(f"{self.path}: cannot read the feedback database ({err})") from None
        except sqlite3.DatabaseError as err:
            raise DataError(f"{self.path}: not a feedback database ({err})") from None

    def _open(self, uri: str) -> int:
        """``self._db`` connected to ``uri``, and the schema version (``_version``); on an error, closed again."""
        self._db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        try:
            return self._version()
        except BaseException:
            self._db.close()
            raise

    def _version(self) -> int:
        """The file's schema version; DataError for a newer one, or for another program's SQLite file."""
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise DataError(f"{self.path}: feedback schema version {version}, this program reads up to "
                            f"{SCHEMA_VERSION}; use a newer seq2seq")
        tables = self._db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        if (version == 0 and tables) or version < 0:
            raise DataError(f"{self.path}: an SQLite file holding other tables, not a feedback database; "
                            "choose another path")
        if version == SCHEMA_VERSION:  # another program may have set the number alone
            found = {row[1] for row in self._db.execute("PRAGMA table_info(feedback)")}
            if missing := [name for name in COLUMNS if name not in found]:
                raise DataError(f"{self.path}: not a feedback database (schema version {version}, but "
                                + ("no table feedback)" if not found else f"its feedback table has no column "
                                                                          f"{missing[0]!r})"))
        return version

    def _migrate(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")  # another process opening the file at once waits, then sees our version
        try:
            version = self._version()
            for number in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[number]:
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {number + 1:d}")  # our own integer: PRAGMA takes no parameter
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, feedback: Feedback, shown_with: Shown | None = None) -> int:
        """Store one record, committed and synced before returning its id."""
        row = {**asdict(feedback), **asdict(shown_with or Shown()), "time": _now()}
        return self._write(
            "INSERT INTO feedback (time, alert, translator, recommendation, score, trust, trust_verdict, verdict,"
            " correction, technician) VALUES (:time, :alert, :translator, :recommendation, :score, :trust,"
            " :trust_verdict, :verdict, :correction, :technician)", row).lastrowid

    def revise(self, record: int, feedback: Feedback) -> int:
        """Record ``record`` given ``feedback``'s verdict, correction and technician (its technician's second
        thought on the same recommendation), committed and synced; DataError when no record ``record`` holds that
        alert and recommendation."""
        changed = self._write(
            "UPDATE feedback SET time = ?, verdict = ?, correction = ?, technician = ? WHERE id = ? AND alert = ? AND"
            " recommendation = ?", (_now(), feedback.verdict, feedback.correction, feedback.technician, record,
                                    feedback.alert, feedback.recommendation)).rowcount
        if not changed:
            raise DataError(f"{self.path}: feedback not stored: record {record} of this recommendation is gone")
        return record

    def _write(self, statement: str, parameters: dict | tuple) -> sqlite3.Cursor:
        """One statement, committed by itself (and synced, synchronous=FULL); a DataError, nothing written, when
        it fails or the file is no longer the one opened."""
        with self._lock:
            try:
                if _identity(self.path) != self._identity:  # SQLite would go on writing the deleted file's inode
                    raise DataError(f"{self.path}: feedback not stored: the database was deleted or replaced while "
                                    "the app ran; restart the app to open it again")
                return self._db.execute(statement, parameters)
            except sqlite3.Error as err:
                raise DataError(f"{self.path}: feedback not stored ({err})") from None

    def records(self) -> list[Record]:
        """Every record, oldest first; DataError for a value of the wrong type, which only another program
        can have written (SQLite keeps any type in any column)."""
        query = f"SELECT {', '.join(COLUMNS)} FROM feedback ORDER BY id"
        with self._lock:
            try:
                rows = self._db.execute(query).fetchall()
            except sqlite3.OperationalError:  # "Could not decode to UTF-8 column ...": found again, as bytes
                self._db.text_factory = bytes
                try:
                    raise self._undecodable(self._db.execute(query).fetchall()) from None
                finally:
                    self._db.text_factory = str
        for row in rows:
            for name, value in zip(COLUMNS, row, strict=True):
                if not isinstance(value, COLUMNS[name]) or isinstance(value, bool):
                    what = "text" if str in COLUMNS[name] else "a number"
                    found = SQLITE_TYPES.get(type(value), type(value).__name__)
                    raise DataError(f"{self.path}: record {shown(str(row[0]))}: {name} is not {what} (found {found})")
        return [Record(row[0], row[1], Feedback(*row[2:7]), Shown(*row[7:])) for row in rows]

    def marked_wrong(self, recommendations: list[str]) -> list[tuple[str, str, str, str]]:
        """(alert, recommendation, correction, time) of each record that marked one of ``recommendations`` wrong,
        case and spacing aside (``same_text``), newest first: what the app shows beside an answer it gives again
        (``seq2seq.serving.marked``)."""
        wanted = list(dict.fromkeys(same_text(r) for r in recommendations))[:MAX_ASKED]
        if not wanted:
            return []
        query = ("SELECT alert, recommendation, correction, time FROM feedback WHERE verdict = 'wrong' AND "
                 f"same_text(recommendation) IN ({', '.join('?' * len(wanted))}) ORDER BY id DESC")
        with self._lock:
            try:
                self._db.create_function("same_text", 1, same_text, deterministic=True)
                rows = self._db.execute(query, wanted).fetchall()
            except sqlite3.Error:  # another program's undecodable text: records() names it; nothing to show here
                return []
        return [row for row in rows if all(isinstance(value, str) for value in row)]

    def _undecodable(self, rows: list[tuple]) -> DataError:
        """The DataError for the first text value in ``rows`` (read as bytes) that is not UTF-8, which only another
        program can have written; SQLite's own error names neither the record nor the byte."""
        for row in rows:
            for name, value in zip(COLUMNS, row, strict=True):
                if isinstance(value, bytes) and str in COLUMNS[name]:
                    try:
                        value.decode("utf-8")
                    except UnicodeDecodeError as err:
                        return DataError(f"{self.path}: record {row[0]}: {name} is {utf8_fault(value, err)}")
        return DataError(f"{self.path}: a text value is not valid UTF-8")

    def stats(self) -> dict[str, int | str | None]:
        """Counts over all records: records, right, wrong, corrected (a correction typed), learnable (with
        an action for ``export``), translators and technicians (distinct), the first and last time."""
        records = self.records()
        feedback = [record.feedback for record in records]
        return {"records": len(records), "right": sum(f.verdict == "right" for f in feedback),
                "wrong": sum(f.verdict == "wrong" for f in feedback),
                "corrected": sum(bool(f.correction.split()) for f in feedback),
                "learnable": sum(f.action is not None for f in feedback),
                "translators": len({r.shown.translator for r in records if r.shown.translator}),
                "technicians": len({f.technician.strip() for f in feedback if f.technician.strip()}),
                "first": records[0].time if records else None, "last": records[-1].time if records else None}


def same_text(text: object) -> object:
    """``tokenizer.same_text`` as an SQL function of the store's connection: another program's value that is not
    text is compared as it is."""
    return folded(text) if isinstance(text, str) else text


def _now() -> str:
    """A record's time: UTC, ISO 8601 with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def sidecar(path: Path, suffix: str) -> Path:
    """The file SQLite keeps beside the database ``path`` under ``suffix``, one of SIDECARS ("": the database)."""
    return path.with_name(path.name + suffix)


def _identity(path: Path) -> tuple[int, int] | None:
    """The file ``path`` names now (device, inode); None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
