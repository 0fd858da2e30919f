"""Text normalisation and SentencePiece subword vocabularies for alerts (source) and recommendations (target).

``normalize`` is the one normalisation used everywhere (training, translation, evaluation, UI, batch
job), so an alert typed into the UI and the same alert read from a file become the same pieces.
SentencePiece's own normaliser is switched off (``normalization_rule_name="identity"``) so that no
second, different normalisation can creep in.

The SentencePiece models are trained in memory (Kudo & Richardson 2018, "SentencePiece: A simple
and language independent subword tokenizer", https://arxiv.org/abs/1808.06226) with one thread, so
the model bytes are identical run to run, and travel inside the checkpoint (``state_dict``).
"""

from __future__ import annotations

import dataclasses
import io
import re
import unicodedata
from collections.abc import Sequence

import sentencepiece as spm

from seq2seq.config import TokenizerConfig
from seq2seq.config_checks import from_dict
from seq2seq.errors import CheckpointError, ConfigError, DataError, checkpoint_fault

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3  # fixed at SentencePiece training
EOS_PIECE = "</s>"
WORD_START = "\u2581"  # SentencePiece marks a piece that starts a word with it
STATE_VERSION = 1
ONE_CASE = 0.95  # share of a source vocabulary's letters in one case above which alerts are read in that case

# Unicode category Cc is exactly U+0000-U+001F and U+007F-U+009F (tabs and newlines included).
_CONTROL_TO_SPACE = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)], " ")


def normalize(text: str, lowercase: bool = False, uppercase: bool = False) -> str:
    """Unicode NFKC, format characters removed, control characters to spaces, whitespace collapsed and
    stripped, optionally lower- or upper-cased.

    Format characters (category Cf: a byte-order mark where two files were joined, a zero-width space or a soft
    hyphen pasted from a web page or Word, bidirectional marks) are invisible, and NFKC keeps them: "egt high"
    and "egt high" followed by U+200B read alike to a technician, so they read alike to the model too.

    Idempotent: ``normalize(normalize(x, lc, uc), lc, uc) == normalize(x, lc, uc)``. NFKC runs again after
    a change of case because it can leave text that NFKC would still change.
    """
    if not text.isascii():  # every format character is beyond ASCII
        text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    text = unicodedata.normalize("NFKC", text)
    if lowercase or uppercase:  # a Turkish keyboard's capital İ lowered is i and a combining dot: a piece unseen
        text = text.translate(_DOTTED_I)
    if lowercase:
        text = unicodedata.normalize("NFKC", text.lower())
    elif uppercase:
        text = unicodedata.normalize("NFKC", text.upper())
    return " ".join(text.translate(_CONTROL_TO_SPACE).split())


def same_text(text: str) -> str:
    """``text`` as two texts are compared wherever the project says "case and spacing aside" (an alert and its past
    case, an answer and the history's action, two feedback records): Unicode's equivalent spellings, case and
    spacing aside."""
    return normalize(text, lowercase=True)


_DOTTED_I = str.maketrans({"\u0130": "I", "\u0131": "i"})  # İ and ı read as I and i once case is folded


def piece_label(piece: str) -> str:
    """How a piece reads in a figure: SentencePiece's word-start mark (U+2581) dropped, "␣" for a bare one."""
    return piece.replace(WORD_START, "") or "\u2423"


def _train_model(sentences: list[str], config: TokenizerConfig, side: str) -> bytes:
    """Serialized SentencePiece model trained on the non-empty ``sentences``."""
    sentences = [s for s in sentences if s]
    if not sentences:
        raise DataError(f"tokenizer: no non-empty {side} sentences to train on")
    buffer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=buffer,
            vocab_size=config.vocab_size,
            model_type=config.model_type,
            character_coverage=1.0,
            hard_vocab_limit=False,  # vocab_size is an upper bound; a small corpus gets fewer pieces
            # SentencePiece leaves out, without a word, sentences over 4,192 bytes (its default): their words went
            # missing from the vocabulary, and a corpus of only such rows failed with "INTERNAL: ... sentences_"
            max_sentence_length=max(4192, max(len(sentence.encode("utf-8")) for sentence in sentences)),
            normalization_rule_name="identity",  # ``normalize`` has already run
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            num_threads=1,  # identical bytes run to run
            minloglevel=2,
        )
    except RuntimeError as err:
        counts = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(err))
        if counts:
            raise ConfigError(
                f"tokenizer: vocab_size {counts[1]} is too small: the {side} text needs at least "
                f"{counts[2]} pieces (one per distinct character, plus 4 special pieces)"
            ) from None
        message = " ".join(str(err).split())
        raise ConfigError(f"tokenizer: SentencePiece training failed for the {side} side: {message}") from None
    return buffer.getvalue()


def _load_model(model: bytes, where: str, side: str) -> spm.SentencePieceProcessor:
    """A processor for ``model``; CheckpointError if the bytes do not load or the special ids differ."""
    try:
        processor = spm.SentencePieceProcessor(model_proto=model)
    except (RuntimeError, TypeError, ValueError):
        raise CheckpointError(f"{where}: the {side} SentencePiece model is corrupt (its bytes do not load)") from None
    specials = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
    if specials != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        raise CheckpointError(
            f"{where}: the {side} SentencePiece model has pad/unk/bos/eos ids {specials}, "
            f"expected {(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}"
        )
    return processor


def vocabulary_case(processor: spm.SentencePieceProcessor) -> str | None:
    """"upper" or "lower" when (nearly) all the cased letters of the pieces are in that case, else None.

    A vocabulary trained on logbooks written in capitals (MaintNet) has no lower-case pieces, so "oil
    leak" typed in lower case would read as unknown spans: such a tokenizer reads every alert in
    capitals, and one of lower-case pieces in lower case (docs/architecture.md).
    """
    upper = lower = 0
    for i in range(processor.get_piece_size()):
        if not (processor.is_control(i) or processor.is_unknown(i)):
            piece = processor.id_to_piece(i)
            upper += sum(char.isupper() for char in piece)
            lower += sum(char.islower() for char in piece)
    if upper + lower == 0:
        return None
    share = upper / (upper + lower)
    return "upper" if share >= ONE_CASE else "lower" if share <= 1 - ONE_CASE else None


def seed_sampling(seed: int) -> None:
    """Seed SentencePiece's one (process-wide) generator of sampled segmentations."""
    spm.set_random_generator_seed(seed)


def sample_options(alpha: float) -> dict:
    """SentencePiece's options for one sampled segmentation: subword regularisation (Kudo 2018) for a
    unigram model, where ``alpha`` smooths the distribution over all segmentations, and BPE-dropout
    (Provilkov et al. 2020) for a BPE model, where it is the probability of dropping a merge; none for 0."""
    return {"enable_sampling": True, "alpha": alpha, "nbest_size": -1} if alpha > 0 else {}


def _cut_at_eos(ids: Sequence[int]) -> tuple[list[int], bool]:
    """Ids before the first EOS without PAD and BOS, and whether an EOS was found."""
    if hasattr(ids, "tolist"):  # a tensor or an array
        ids = ids.tolist()
    kept = []
    for token in ids:
        if token == EOS_ID:
            return kept, True
        if token not in (PAD_ID, BOS_ID):
            kept.append(int(token))
    return kept, False


class Tokenizer:
    """One joint SentencePiece vocabulary for both sides, or one for the source and one for the target.

    Build one with ``Tokenizer.train`` or ``Tokenizer.from_state_dict``. Sources are encoded as
    ``pieces + [EOS]`` (the encoder reads the EOS too); targets as bare pieces, the batching adds
    BOS / EOS. Every method normalises its input with ``normalize`` first.
    """

    def __init__(
        self, config: TokenizerConfig, source_model: bytes, target_model: bytes | None = None, where: str = "tokenizer"
    ) -> None:
        """Load serialized models; ``target_model`` is None for a joint vocabulary."""
        if config.joint != (target_model is None):
            raise ValueError("a joint tokenizer takes one model, a separate one takes two")
        self._config = config
        self._source_model = source_model
        self._target_model = target_model
        self._source = _load_model(source_model, where, "joint" if config.joint else "source")
        self._target = self._source if target_model is None else _load_model(target_model, where, "target")
        self._source_case = "lower" if config.lowercase_source else vocabulary_case(self._source)

    @classmethod
    def train(cls, sources: list[str], targets: list[str], config: TokenizerConfig) -> Tokenizer:
        """Train on normalised ``sources`` (lower-cased if ``config.lowercase_source``) and ``targets``.

        Joint: one model on sources + targets. Separate: one model per side. The result is a pure
        function of the inputs (identical model bytes every run).
        """
        normalized_sources = [normalize(text, config.lowercase_source) for text in sources]
        normalized_targets = [normalize(text) for text in targets]
        if config.joint:
            return cls(config, _train_model(normalized_sources + normalized_targets, config, "joint"))
        return cls(
            config,
            _train_model(normalized_sources, config, "source"),
            _train_model(normalized_targets, config, "target"),
        )

    def state_dict(self) -> dict:
        """Plain data (str, int, bool, bytes, dict) for a checkpoint: version, config and model bytes."""
        state = {
            "version": STATE_VERSION,
            "config": dataclasses.asdict(self._config),
            "source_model": self._source_model,
        }
        if self._target_model is not None:
            state["target_model"] = self._target_model
        return state

    @classmethod
    def from_state_dict(cls, state: dict, where: str = "tokenizer state") -> Tokenizer:
        """Rebuild from ``state_dict()``; a malformed state is a one-line CheckpointError prefixed by ``where``."""
        if not isinstance(state, dict):
            raise CheckpointError(f"{where}: expected a dict, found {type(state).__name__}")
        if state.get("version") != STATE_VERSION:
            raise CheckpointError(
                f"{where}: tokenizer format version {state.get('version')!r} is not supported "
                f"(expected {STATE_VERSION})"
            )
        with checkpoint_fault():
            config = from_dict(TokenizerConfig, state.get("config"), where=f"{where}: tokenizer config")
        names = ("source_model",) if config.joint else ("source_model", "target_model")
        models = [state.get(name) for name in names]
        for name, model in zip(names, models, strict=True):
            if not isinstance(model, bytes):
                raise CheckpointError(f"{where}: {name} must be bytes, found {type(model).__name__}")
        return cls(config, *models, where=where)

    @property
    def config(self) -> TokenizerConfig:
        return self._config

    @property
    def src_vocab_size(self) -> int:
        return self._source.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self._target.get_piece_size()

    @property
    def source_case(self) -> str | None:
        """The case every alert is read in: "lower" (``lowercase_source``, or a vocabulary of lower-case
        pieces), "upper" (a vocabulary of capitals) or None (as written)."""
        return self._source_case

    def normalize_source(self, text: str) -> str:
        return normalize(text, lowercase=self._source_case == "lower", uppercase=self._source_case == "upper")

    def normalize_target(self, text: str) -> str:
        return normalize(text)

    def encode_source(self, text: str, alpha: float = 0.0) -> list[int]:
        """Ids of the normalised source's pieces followed by EOS_ID (no BOS); ``alpha`` > 0 samples a
        segmentation instead of the best one (see ``sample_options``)."""
        return [*self._source.encode(self.normalize_source(text), out_type=int, **sample_options(alpha)), EOS_ID]

    def source_pieces(self, text: str) -> list[str]:
        """The pieces behind ``encode_source(text)``, same length, ending in "</s>" (heatmap labels).

        An unknown span shows its own text rather than "<unk>".
        """
        return [*self._source.encode(self.normalize_source(text), out_type=str), EOS_PIECE]

    def encode_target(self, text: str, alpha: float = 0.0) -> list[int]:
        """Ids of the normalised target's pieces, without BOS or EOS; ``alpha`` as for ``encode_source``."""
        return self._target.encode(self.normalize_target(text), out_type=int, **sample_options(alpha))

    def decode_target(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` up to the first EOS, ignoring PAD and BOS; an unknown piece reads " ⁇ ". Spaces are
        collapsed and trimmed as ``normalize`` wrote the training targets: a lone word-start piece decodes to a
        space of its own ("inspect valve trim " beside "inspect valve trim" in one n-best list)."""
        kept, _ = _cut_at_eos(ids)
        return " ".join(self._target.decode(kept).split())

    def target_pieces(self, ids: Sequence[int]) -> list[str]:
        """Piece strings of ``ids`` with ``decode_target``'s stopping rule, ending in "</s>" if an EOS was present."""
        kept, found_eos = _cut_at_eos(ids)
        pieces = [self._target.id_to_piece(token) for token in kept]
        return [*pieces, EOS_PIECE] if found_eos else pieces

    def __repr__(self) -> str:
        kind = "joint" if self._config.joint else "separate"
        return f"Tokenizer({kind}, {self._config.model_type}, vocab {self.src_vocab_size}/{self.tgt_vocab_size})"
