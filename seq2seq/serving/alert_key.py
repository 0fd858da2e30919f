"""Which key of a JSONL incident log holds the alert: the one a user names, else the rule (source, else problem,
else alert, else the only key), which must take the same key over the whole log (``seq2seq.serving.batch``'s formats).
``incident_log`` reads the records; this module only judges their keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from seq2seq.corpus import SOURCE_NAMES
from seq2seq.errors import DataError, shown
from seq2seq.tables import choose_column

ALERT_COLUMNS = SOURCE_NAMES  # the default alert column, in order of preference: as train and evaluate read one


class AlertKey:
    """The alert key of a JSONL log, as its records come: ``named`` by the user, else chosen by the rule (source,
    else problem, else the only key) from the keys of the records up to the first readable one (all its bytes
    UTF-8: a record before it is a flagged row, never translated). A later record whose keys make the rule,
    applied to the keys of the log so far, take another key or none is a DataError, as a record with a 'source'
    after one without would have it. Seeing a record again changes nothing."""

    def __init__(self, path: Path, named: str | None) -> None:
        self.path, self.chosen, self.named = path, named, named is not None
        self.seen: dict[str, None] = {}
        self.line = 0  # where the rule chose the key

    def see(self, line: int, record: dict, readable: bool) -> str | None:
        """The alert key once chosen, None before."""
        if self.named:
            return self.chosen
        new = [name for name in record if name not in self.seen]
        self.seen.update(dict.fromkeys(new))
        if self.chosen is None and readable:
            self.chosen = choose_column(list(self.seen), None, ALERT_COLUMNS, f"{self.path}: line {line}", "key")
            self.line = line
        elif self.chosen is not None and new:
            try:
                again = choose_column(list(self.seen), None, ALERT_COLUMNS, str(self.path), "key")
            except DataError:
                again = None
            if again != self.chosen:
                raise DataError(f"{self.path}: line {line}: key {shown(again or new[0])!r} makes the alert key "
                                f"ambiguous: line {self.line} took {shown(self.chosen)!r} (source, else problem, "
                                "else the only key); name the key that holds the alert")
        return self.chosen


def check_all(path: Path, records: Iterator[tuple[int, dict, bool]]) -> None:
    """Every (line, record, readable) of a log seen by one ``AlertKey``: a DataError where the rule would change
    its key. A record ``records`` cannot give (a line that is no JSON object) ends the look: reading rows meets it
    in its turn, as it would without looking ahead."""
    alert_key = AlertKey(path, None)
    while True:
        try:
            found = next(records, None)
        except DataError:
            return
        if found is None:
            return
        alert_key.see(*found)
