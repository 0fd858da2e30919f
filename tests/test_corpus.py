"""Reading parallel files: formats, column choice, physical line numbers and one-line errors."""

import json

import pytest

from seq2seq.corpus import EMBEDDED_DATA, Example, read_parallel
from seq2seq.errors import DataError


def pairs_of(corpus):
    return [(example.source, example.target) for example in corpus.examples]


def one_line_error(call, *args, **kwargs) -> str:
    with pytest.raises(DataError) as error:
        call(*args, **kwargs)
    message = str(error.value)
    assert message and "\n" not in message
    return message


# reading: every format round-trips


def test_embedded_data_points_at_the_repository_data_folder():
    assert EMBEDDED_DATA.name == "data" and (EMBEDDED_DATA.parent / "seq2seq" / "data.py").is_file()


def test_tsv_round_trips_pairs_with_physical_line_numbers(tmp_tsv, tiny_pairs):
    corpus = read_parallel(tmp_tsv(tiny_pairs))
    assert pairs_of(corpus) == tiny_pairs
    assert [example.line for example in corpus.examples] == list(range(2, len(tiny_pairs) + 2))
    assert corpus.skipped == []


def test_csv_round_trips_quoted_commas_quotes_and_newlines(write_file):
    text = 'id,source,target\n1,"pump, main","say ""hi"""\n2,"two\nlines",fix it\n3,fan hot,cool fan\n'
    corpus = read_parallel(write_file("pairs.csv", text))
    assert pairs_of(corpus) == [("pump, main", 'say "hi"'), ("two\nlines", "fix it"), ("fan hot", "cool fan")]
    assert [example.line for example in corpus.examples] == [2, 3, 5]


def test_jsonl_round_trips_and_ignores_extra_keys_and_blank_lines(write_file, tiny_pairs):
    lines = [json.dumps({"id": i, "source": s, "target": t}) for i, (s, t) in enumerate(tiny_pairs)]
    corpus = read_parallel(write_file("pairs.jsonl", "\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:])))
    assert pairs_of(corpus) == tiny_pairs
    assert corpus.examples[3].line == 5


def test_aligned_src_and_tgt_files_round_trip(write_file, tiny_pairs):
    source = write_file("pairs.src", "\n".join(s for s, _ in tiny_pairs) + "\n")
    write_file("pairs.tgt", "\n".join(t for _, t in tiny_pairs) + "\n")
    assert pairs_of(read_parallel(source)) == tiny_pairs


def test_aligned_files_with_an_explicit_target_path_round_trip(write_file, tiny_pairs):
    source = write_file("alerts.txt", "\n".join(s for s, _ in tiny_pairs))
    target = write_file("advice.txt", "\n".join(t for _, t in tiny_pairs))
    assert pairs_of(read_parallel(source, target_path=target)) == tiny_pairs


def test_maintnet_header_ident_problem_action_is_picked_automatically(tmp_tsv):
    rows = [("17", "PUMP LEAKING", "REPLACED SEAL"), ("18", "FAN NOISY", "LUBED FAN")]
    corpus = read_parallel(tmp_tsv(rows, header=("ident", "problem", "action")))
    assert pairs_of(corpus) == [("PUMP LEAKING", "REPLACED SEAL"), ("FAN NOISY", "LUBED FAN")]


def test_explicit_columns_win_and_names_match_ignoring_case(tmp_tsv):
    path = tmp_tsv([("a", "b", "c")], header=("Source", "Alt", "TARGET"))
    assert pairs_of(read_parallel(path)) == [("a", "c")]
    assert pairs_of(read_parallel(path, source_column="alt", target_column="Source")) == [("b", "a")]


def test_a_column_named_in_either_of_unicodes_spellings_is_found(tmp_tsv):
    """A Mac writes "Störung" as o and U+0308; typed composed, it was "no column 'Störung' (columns found: Nr,
    Störung, ...)", the two names alike on screen."""
    path = tmp_tsv([("1", "Öldruck niedrig", "Sensor prüfen")], header=("Nr", "Sto\u0308rung", "Massnahme"))
    assert pairs_of(read_parallel(path, source_column="St\u00f6rung", target_column="MASSNAHME")) == [
        ("Öldruck niedrig", "Sensor prüfen")]


@pytest.mark.parametrize(("name", "text", "columns"), [
    ("pairs.tsv", "source\ttarget\noil leak\tcheck seals\n", {"source_column": "target"}),  # target's default too
    ("pairs.tsv", "source\ttarget\noil leak\tcheck seals\n", {"source_column": "source", "target_column": "SOURCE"}),
    ("pairs.jsonl", '{"source": "oil leak", "target": "check seals"}\n', {"source_column": "target"}),
])
def test_one_column_as_both_source_and_target_is_refused_in_one_line(write_file, name, text, columns):
    """A model would learn to copy its input, and a score would compare the references with themselves."""
    with pytest.raises(DataError, match=r"is the source (column|key) already; the source and the target must be two"):
        read_parallel(write_file(name, text), **columns)


def test_tsv_keeps_stray_double_quotes_and_reads_the_next_lines(tmp_tsv):
    rows = [('BOLT 1/2" LOOSE', "TIGHTENED BOLT"), ('"B" NUT MISSING', 'REPLACED 3/4" NUT'), ("FAN", "FIXED")]
    corpus = read_parallel(tmp_tsv(rows))
    assert pairs_of(corpus) == rows
    assert [example.line for example in corpus.examples] == [2, 3, 4]


def test_crlf_line_endings_and_a_byte_order_mark_are_accepted(write_file):
    path = write_file("pairs.tsv", b"\xef\xbb\xbfsource\ttarget\r\npump hot\tcool pump\r\n")
    assert pairs_of(read_parallel(path)) == [("pump hot", "cool pump")]


def test_raw_text_is_kept_only_stripped(tmp_tsv):
    corpus = read_parallel(tmp_tsv([("  PUMP   Hot ", " Cool  the pump ")]))
    assert corpus.examples == [Example("PUMP   Hot", "Cool  the pump", 2)]


def test_empty_pairs_are_skipped_counted_and_reported(tmp_tsv):
    rows = [("pump hot", "cool pump"), ("", "orphan"), ("fan hot", " \u3000 "), ("fan", "fix")]
    corpus = read_parallel(tmp_tsv(rows))
    assert pairs_of(corpus) == [("pump hot", "cool pump"), ("fan", "fix")]
    assert corpus.skipped == [(3, "empty source"), (4, "empty target")]
    assert "skipped 2 of 4 pairs" in corpus.summary() and "lines 3, 4" in corpus.summary()


@pytest.mark.parametrize("name", ["joined.csv", "joined.tsv"])
def test_a_header_repeated_where_two_files_were_joined_is_skipped_and_said_not_trained_on(write_file, name):
    sep = "," if name.endswith(".csv") else "\t"
    text = f"\ufeffsource{sep}target\npump hot{sep}cool pump\n\ufeffsource{sep}target\nfan hot{sep}check fan\n"
    corpus = read_parallel(write_file(name, text))
    assert pairs_of(corpus) == [("pump hot", "cool pump"), ("fan hot", "check fan")]
    assert corpus.skipped == [(3, "repeats the header row (two files joined into one?)")]
    assert corpus.summary().endswith("skipped 1 of 3 pairs: 1 that repeats the header row (two files joined into "
                                     "one?) (line 3)")  # not "with an empty source or target", as it once said
    mixed = read_parallel(write_file(name, text + f"{sep}\n" + f"source{sep}target\n"))
    assert mixed.summary().endswith("skipped 3 of 5 pairs: 2 that repeat the header row (two files joined into one?) "
                                    "(lines 3, 6); 1 with an empty source or target (line 5)")


# reading: every bad input is a one-line DataError naming the file and the line


def test_missing_file_is_reported(tmp_path):
    assert one_line_error(read_parallel, tmp_path / "x.tsv") == f"{tmp_path / 'x.tsv'}: file not found"


def test_missing_column_lists_the_columns_found(tmp_tsv):
    path = tmp_tsv([("1", "a", "b")], header=("ident", "problem", "action"))
    message = one_line_error(read_parallel, path, source_column="src")
    assert message == f"{path}: no column 'src' (columns found: ident, problem, action)"


def test_missing_default_columns_name_every_default(tmp_tsv):
    message = one_line_error(read_parallel, tmp_tsv([("a", "b")], header=("message", "target")))
    assert "'source' or 'problem' or 'alert'" in message and "message, target" in message


def test_a_target_is_never_the_column_left_over_but_named_or_given(tmp_tsv):
    """An ids-and-alerts file was scored against its ids (BLEU 0.00, status 0), and trained on them likewise."""
    path = tmp_tsv([("17", "oil leak")], header=("ident", "problem"))
    assert one_line_error(read_parallel, path) == f"{path}: no column 'target' or 'action' (columns found: ident, " \
                                                  "problem)"
    assert pairs_of(read_parallel(path, target_column="ident")) == [("oil leak", "17")]  # given, it is taken


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("x.tsv", "source\ttarget\tid\na\tb\t1\nc\td\n", "line 3: expected 3 tab-separated fields, found 2"),
        ("x.csv", "source,target\na,b,c\n", "line 2: expected 2 comma-separated fields, found 3"),
        ("x.csv", 'source,target\na,b\n"open,never closed\n', "line 3: malformed comma-separated record"),
        ("x.tsv", "source\ttarget\na\rb\tc\n", "line 2: expected 2 tab-separated fields, found 1"),  # CR ends a line
        ("x.jsonl", '{"source": "a", "target": "b"}\n{"source": "a",\n', "line 2: invalid JSON"),
        ("x.jsonl", '{"source": "a", "target": "b"}\n["a", "b"]\n', "line 2: expected a JSON object"),
        ("x.jsonl", '{"source": "a", "target": "b"}\n{"source": "a"}\n', "line 2: no key 'target'"),
        ("x.jsonl", '{"source": "a", "target": 7}\n', "line 1: 'target' must be a string, found a number"),
        ("x.jsonl", '{"message": "a", "target": "b"}\n', "line 1: no key 'source' or 'problem' or 'alert'"),
        ("x.tsv", "", "empty file"),
        ("x.tsv", "source\ttarget\n", "no usable pairs"),
        ("x.tsv", "source\ttarget\n\t\n \tb\n",
         "no usable pairs (all 2 skipped with an empty source or target (lines 2, 3))"),
        ("x.src", "a\n", "unknown format"),
        ("x.xlsx", "a\n", "unknown format"),
    ],
)
def test_malformed_input_is_a_one_line_data_error_naming_file_and_line(write_file, name, content, expected):
    path = write_file(name, content)
    message = one_line_error(read_parallel, path)
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_invalid_utf8_names_line_byte_and_character_column(write_file):
    path = write_file("x.tsv", b"source\ttarget\nok\tfine\n" + "né\t".encode() + b"\xff bad\n")
    assert one_line_error(read_parallel, path) == f"{path}: line 3: not valid UTF-8 (byte 0xff at column 4)"


def test_aligned_files_with_different_line_counts_are_rejected(write_file):
    source = write_file("x.src", "a\nb\nc\n")
    target = write_file("x.tgt", "a\nb\n")
    message = one_line_error(read_parallel, source)
    assert str(source) in message and str(target) in message and "line 3" in message


def test_blank_lines_in_aligned_files_are_skipped_pairs_not_misalignment(write_file):
    source = write_file("x.src", "pump hot\n\nfan hot\n")
    write_file("x.tgt", "cool pump\norphan\ncool fan\n")
    corpus = read_parallel(source)
    assert [example.line for example in corpus.examples] == [1, 3]
    assert corpus.skipped == [(2, "empty source")]


# masks


@pytest.mark.parametrize("name", ["history", "history.tsv"])
def test_a_folder_given_as_a_training_file_is_named_as_one(tmp_path, name):
    (tmp_path / name).mkdir()
    assert one_line_error(read_parallel, tmp_path / name) == f"{tmp_path / name}: is a directory, not a file"
