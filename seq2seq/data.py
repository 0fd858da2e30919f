"""Parallel data: reading alert/recommendation pairs, encoding them once, and batching them by tokens.

Shapes: B batch, S source length, T target length. One mask convention: a bool tensor, True = real
token, built only by ``lengths_to_mask``.

Formats read by ``read_parallel``:

- ``.tsv``: a header row, then one record per physical line, fields split on tabs. No quoting
  (``csv.QUOTE_NONE``, the IANA text/tab-separated-values convention): MaintNet fields such as
  ``BOLT 1/2" LOOSE`` or ``"B" NUT MISSING`` contain bare quotes, and csv quoting would swallow a
  field that starts with one (and every line after it) until the next quote.
- ``.csv``: a header row, standard csv quoting (quoted fields may hold commas and newlines).
- ``.jsonl``: one JSON object per line.
- two aligned plain-text files, one sentence per line (``x.src`` with ``x.tgt``, or any file with an
  explicit ``target_path``).

Columns (keys) are chosen by name: ``source`` / ``target`` by default, or MaintNet's ``problem`` /
``action`` when those are absent; exact names first, then ignoring case. Blank lines are ignored
in the tabular and JSONL formats. Line numbers in messages are physical lines of the file.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from seq2seq.errors import ConfigError, DataError
from seq2seq.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer, normalize

EMBEDDED_DATA = Path(__file__).resolve().parent.parent / "data"
SOURCE_NAMES = ("source", "problem")  # default source column / key, in order of preference
TARGET_NAMES = ("target", "action")


@dataclass(frozen=True)
class Example:
    source: str  # raw text, stripped
    target: str  # raw text, stripped
    line: int  # 1-based physical line where the record starts (or record number), for messages


@dataclass
class ParallelCorpus:
    path: str
    examples: list[Example]
    skipped: list[tuple[int, str]]  # (line, reason) of pairs with an empty source or target

    def summary(self) -> str:
        """One line, e.g. "x.tsv: skipped 3 of 120 pairs with an empty source or target (lines 4, 9, 12)"."""
        total = len(self.examples) + len(self.skipped)
        if not self.skipped:
            return f"{self.path}: read {total} pairs, none skipped"
        lines = [str(line) for line, _ in self.skipped[:10]]
        if len(self.skipped) > 10:
            lines.append(f"... {len(self.skipped) - 10} more")
        word = "line" if len(self.skipped) == 1 else "lines"
        return (
            f"{self.path}: skipped {len(self.skipped)} of {total} pairs with an empty source or target "
            f"({word} {', '.join(lines)})"
        )


def read_parallel(
    path: str | Path,
    source_column: str | None = None,
    target_column: str | None = None,
    target_path: str | Path | None = None,
) -> ParallelCorpus:
    """Read alert/recommendation pairs from ``path`` (see the module docstring for the formats).

    Empty pairs (after ``normalize``) are skipped and listed in ``skipped``; every other problem
    is a one-line DataError naming the file and the line.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    suffix = path.suffix.lower()
    if target_path is None and suffix in (".tsv", ".csv"):
        delimiter, quoting = ("\t", csv.QUOTE_NONE) if suffix == ".tsv" else (",", csv.QUOTE_MINIMAL)
        records = _read_table(path, delimiter, quoting, source_column, target_column)
    elif target_path is None and suffix == ".jsonl":
        records = _read_jsonl(path, source_column, target_column)
    else:
        if target_path is None:
            target_path = path.with_suffix(".tgt")
            if suffix != ".src" or not target_path.exists():
                raise DataError(
                    f"{path}: unknown format: expected .tsv, .csv, .jsonl, or a .src file with a .tgt beside it"
                )
        records = _read_aligned(path, Path(target_path))
    return _collect(path, records)


def _collect(path: Path, records: Iterator[tuple[int, str, str]]) -> ParallelCorpus:
    examples, skipped = [], []
    for line, source, target in records:
        empty = [side for side, text in (("source", source), ("target", target)) if not normalize(text)]
        if empty:
            skipped.append((line, f"empty {' and '.join(empty)}"))
        else:
            examples.append(Example(source.strip(), target.strip(), line))
    if not examples:
        why = f"all {len(skipped)} have an empty source or target" if skipped else "it holds no records"
        raise DataError(f"{path}: no usable pairs ({why})")
    return ParallelCorpus(str(path), examples, skipped)


def _read_lines(path: Path) -> list[str]:
    """Physical lines of a UTF-8 file without their endings; a bad byte is reported by line and column."""
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a file") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None
    data = data.removeprefix(codecs.BOM_UTF8)
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        raw = raw.removesuffix(b"\r")
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            column = len(raw[: err.start].decode("utf-8")) + 1  # in characters, as an editor counts
            raise DataError(
                f"{path}: line {number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {column})"
            ) from None
    return lines


def _choose(available: list[str], wanted: str | None, defaults: tuple[str, ...], where: str, what: str) -> str:
    """The name in ``available`` matching ``wanted`` (or the first default present), exactly or ignoring case."""
    candidates = (wanted,) if wanted is not None else defaults
    for name in candidates:
        if name in available:
            return name
    for name in candidates:
        for found in available:
            if found.casefold() == name.casefold():
                return found
    names = " or ".join(repr(name) for name in candidates)
    raise DataError(f"{where}: no {what} {names} ({what}s found: {', '.join(available)})")


def _read_table(
    path: Path, delimiter: str, quoting: int, source_column: str | None, target_column: str | None
) -> Iterator[tuple[int, str, str]]:
    lines = _read_lines(path)
    reader = csv.reader((line + "\n" for line in lines), delimiter=delimiter, quoting=quoting, strict=True)
    kind = "tab-separated" if delimiter == "\t" else "comma-separated"
    header, columns, previous_end = None, (0, 0), 0
    while True:
        start = previous_end + 1
        try:
            row = next(reader, None)
        except csv.Error as err:
            raise DataError(f"{path}: line {start}: malformed {kind} record ({err})") from None
        if row is None:
            break
        previous_end = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if header is None:
            header = [name.strip() for name in row]
            source = _choose(header, source_column, SOURCE_NAMES, str(path), "column")
            target = _choose(header, target_column, TARGET_NAMES, str(path), "column")
            columns = (header.index(source), header.index(target))
        elif len(row) != len(header):
            raise DataError(f"{path}: line {start}: expected {len(header)} {kind} fields, found {len(row)}")
        else:
            yield start, row[columns[0]], row[columns[1]]
    if header is None:
        raise DataError(f"{path}: empty file (expected a header row naming the columns)")


_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _read_jsonl(path: Path, source_key: str | None, target_key: str | None) -> Iterator[tuple[int, str, str]]:
    keys = None
    for number, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{where}: invalid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object, found {_JSON_TYPES[type(record)]}")
        if keys is None:  # the first record chooses the keys; every other record must have them
            keys = (
                _choose(list(record), source_key, SOURCE_NAMES, where, "key"),
                _choose(list(record), target_key, TARGET_NAMES, where, "key"),
            )
        texts = []
        for key in keys:
            if key not in record:
                raise DataError(f"{where}: no key {key!r} (keys found: {', '.join(record)})")
            value = record[key]
            if value is not None and not isinstance(value, str):
                raise DataError(f"{where}: {key!r} must be a string, found {_JSON_TYPES[type(value)]}")
            texts.append(value or "")
        yield number, texts[0], texts[1]


def _read_aligned(source_path: Path, target_path: Path) -> Iterator[tuple[int, str, str]]:
    if not target_path.exists():
        raise DataError(f"{target_path}: file not found")
    sources, targets = _read_lines(source_path), _read_lines(target_path)
    if len(sources) != len(targets):
        raise DataError(
            f"{source_path}: {len(sources)} lines but {target_path} has {len(targets)}; "
            f"line {min(len(sources), len(targets)) + 1} has no partner"
        )
    yield from ((number, s, t) for number, (s, t) in enumerate(zip(sources, targets, strict=True), 1))


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """(B,) lengths -> (B, max_len) bool mask, True = real token; max_len defaults to the longest."""
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    return torch.arange(max_len, device=lengths.device) < lengths.unsqueeze(1)  # (B, max_len)


def truncate_source(ids: list[int], max_length: int) -> list[int]:
    """``ids`` (ending in EOS) cut to at most ``max_length`` ids, EOS kept last."""
    return ids if len(ids) <= max_length else [*ids[: max_length - 1], EOS_ID]


class ParallelDataset(torch.utils.data.Dataset):
    """Pairs encoded once: items are ``(src_ids, tgt_ids)`` LongTensors.

    ``src_ids`` = source pieces + EOS, at most ``max_source_length`` ids (longer sources are cut,
    EOS kept, and counted in ``truncated_sources``). ``tgt_ids`` = target pieces, no BOS/EOS; a pair
    whose target has more than ``max_target_length`` pieces is dropped and its line recorded in
    ``dropped_long_targets``. ``examples`` holds the kept examples, aligned with the items.
    """

    def __init__(
        self, examples: list[Example], tokenizer: Tokenizer, max_source_length: int, max_target_length: int
    ) -> None:
        if max_source_length < 1 or max_target_length < 1:
            raise ConfigError(
                f"max_source_length and max_target_length must be at least 1, "
                f"got {max_source_length} and {max_target_length}"
            )
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length
        self.examples: list[Example] = []
        self.truncated_sources = 0
        self.dropped_long_targets: list[int] = []
        self._items: list[tuple[Tensor, Tensor]] = []
        for example in examples:
            target = tokenizer.encode_target(example.target)
            if len(target) > max_target_length:
                self.dropped_long_targets.append(example.line)
                continue
            source = tokenizer.encode_source(example.source)
            if len(source) > max_source_length:
                self.truncated_sources += 1
                source = truncate_source(source, max_source_length)
            self.examples.append(example)
            self._items.append((torch.tensor(source, dtype=torch.long), torch.tensor(target, dtype=torch.long)))

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        return self._items[index]

    def source_lengths(self) -> list[int]:
        """Source ids per item, EOS included."""
        return [len(source) for source, _ in self._items]

    def target_lengths(self) -> list[int]:
        """Target pieces per item, without BOS/EOS (the decoder runs one step more)."""
        return [len(target) for _, target in self._items]

    def batch_lengths(self) -> list[int]:
        """``max(source, target + 1)`` per item: the lengths ``TokenBatchSampler`` budgets with."""
        return [max(len(source), len(target) + 1) for source, target in self._items]

    def summary(self) -> str:
        """One line on truncated sources and dropped targets."""
        dropped = self.dropped_long_targets
        lines = ", ".join(str(line) for line in dropped[:10]) + (", ..." if len(dropped) > 10 else "")
        return (
            f"{len(self)} pairs; {self.truncated_sources} sources truncated to {self.max_source_length} pieces; "
            f"{len(dropped)} pairs dropped with a target over {self.max_target_length} pieces"
            + (f" (lines {lines})" if dropped else "")
        )


@dataclass
class Batch:
    src: Tensor  # (B, S) long, source ids + EOS, PAD-padded
    src_lengths: Tensor  # (B,) long, EOS included
    src_mask: Tensor  # (B, S) bool, True = real token
    tgt_in: Tensor  # (B, T) long, BOS + target, PAD-padded (decoder input)
    tgt_out: Tensor  # (B, T) long, target + EOS, PAD-padded (what the decoder must predict)
    tgt_mask: Tensor  # (B, T) bool, True = real token (of tgt_in and tgt_out alike)
    n_tokens: int  # real target tokens, tgt_mask.sum()

    def _map(self, convert) -> Batch:
        tensors = {f.name: convert(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "n_tokens"}
        return Batch(**tensors, n_tokens=self.n_tokens)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """A copy with every tensor on ``device`` (src_lengths too; pack_padded_sequence copies it back)."""
        return self._map(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """A copy in pinned memory, called by ``DataLoader(pin_memory=True)``."""
        return self._map(Tensor.pin_memory)


def _pad(sequences: list[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    lengths = torch.tensor([len(sequence) for sequence in sequences], dtype=torch.long)  # (B,)
    padded = pad_sequence(sequences, batch_first=True, padding_value=PAD_ID)  # (B, L)
    return padded, lengths, lengths_to_mask(lengths, padded.size(1))


def source_batch(id_lists: list[list[int]]) -> tuple[Tensor, Tensor, Tensor]:
    """Encoded sources (each ending in EOS) -> ``(src (B, S), src_lengths (B,), src_mask (B, S))`` for inference."""
    if any(len(ids) == 0 for ids in id_lists):
        raise ValueError("every source needs at least one id (encode_source ends each in EOS)")
    return _pad([torch.tensor(ids, dtype=torch.long) for ids in id_lists])


def collate(items: list[tuple[Tensor, Tensor]]) -> Batch:
    """Dataset items -> a Batch: PAD-padded sources, ``tgt_in`` = BOS + target, ``tgt_out`` = target + EOS."""
    sources, targets = zip(*items, strict=True)
    src, src_lengths, src_mask = _pad(list(sources))
    bos, eos = torch.tensor([BOS_ID]), torch.tensor([EOS_ID])
    tgt_in, _, tgt_mask = _pad([torch.cat([bos, target]) for target in targets])
    tgt_out, _, _ = _pad([torch.cat([target, eos]) for target in targets])
    return Batch(src, src_lengths, src_mask, tgt_in, tgt_out, tgt_mask, n_tokens=int(tgt_mask.sum()))


class TokenBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Batches of indices whose padded size ``max length * count`` stays within ``batch_tokens``.

    Without shuffling, all indices are sorted by length and packed in order (deterministic). With
    shuffling, each epoch permutes the indices with ``generator``, cuts them into chunks of about
    ``bucket_batches * batch_tokens`` tokens (roughly ``bucket_batches`` batches), sorts each chunk
    by length so a batch holds similar lengths, packs it, then shuffles the order of all batches.
    Every index appears exactly once per epoch; an item longer than the budget gets a batch alone.
    The batches are a function of the generator's state, which each epoch advances.

    ``__len__`` is exact: during an epoch, that epoch's batch count; otherwise the count the next
    epoch will have, computed on a copy of the generator (so asking does not change the shuffle).
    When shuffling, the count may differ slightly from one epoch to the next.
    """

    def __init__(
        self,
        lengths: list[int],
        batch_tokens: int,
        shuffle: bool,
        generator: torch.Generator | None = None,
        bucket_batches: int = 100,
    ) -> None:
        if batch_tokens < 1 or bucket_batches < 1:
            raise ConfigError(f"batch_tokens and bucket_batches must be positive, got {batch_tokens}, {bucket_batches}")
        self.lengths = list(lengths)
        self.batch_tokens = batch_tokens
        self.shuffle = shuffle
        self.bucket_batches = bucket_batches
        if shuffle and generator is None:
            generator = torch.Generator().manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
        self.generator = generator
        self._epoch_length: int | None = None
        self._sorted_plan: list[list[int]] | None = None

    def _pack(self, order: list[int]) -> list[list[int]]:
        batches, batch, longest = [], [], 0
        for index in order:
            length = self.lengths[index]
            if batch and max(longest, length) * (len(batch) + 1) > self.batch_tokens:
                batches.append(batch)
                batch, longest = [], 0
            batch.append(index)
            longest = max(longest, length)
        if batch:
            batches.append(batch)
        return batches

    def _chunks(self, order: list[int]) -> Iterator[list[int]]:
        budget = self.bucket_batches * self.batch_tokens
        chunk, tokens = [], 0
        for index in order:
            chunk.append(index)
            tokens += self.lengths[index]
            if tokens >= budget:
                yield chunk
                chunk, tokens = [], 0
        if chunk:
            yield chunk

    def _plan(self, generator: torch.Generator | None) -> list[list[int]]:
        by_length = self.lengths.__getitem__
        if not self.shuffle:
            if self._sorted_plan is None:
                self._sorted_plan = self._pack(sorted(range(len(self.lengths)), key=by_length))
            return self._sorted_plan
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        batches = [batch for chunk in self._chunks(order) for batch in self._pack(sorted(chunk, key=by_length))]
        return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]

    def __iter__(self) -> Iterator[list[int]]:
        plan = self._plan(self.generator)
        self._epoch_length = len(plan)
        try:
            yield from plan
        finally:
            self._epoch_length = None

    def __len__(self) -> int:
        if self._epoch_length is not None:
            return self._epoch_length
        if not self.shuffle:
            return len(self._plan(None))
        peek = torch.Generator()
        peek.set_state(self.generator.get_state())
        return len(self._plan(peek))
