"""Fine-tuning a trained translator on new pairs: ``seq2seq train --init-from CHECKPOINT``.

The run starts from the checkpoint's weights with its tokenizer and model configuration: other
vocabularies or shapes could not take those weights, so a model or tokenizer setting that contradicts
the checkpoint is a ConfigError naming the setting. The new pairs (e.g. the technicians' corrections,
``seq2seq feedback export``) are mixed with the checkpoint's own distinct training pairs, which its case
memory carries (``seq2seq.memory``), so that the model keeps what it knew while it learns them
("replay", as in continual learning: Robins 1995, "Catastrophic forgetting, rehearsal and
pseudorehearsal"). Being few, the new pairs are repeated until they are about NEW_SHARE of what is
trained on, or each would be seen once per epoch among thousands. An old pair whose alert a new pair
also has is not replayed: the new pair says what is done now for that alert, and the old answers would
pull the model back to what a technician just marked wrong (MaintNet repeats an alert with up to 16
actions). It stays in the case memory, behind the new pair.

When the epochs are done, the last weights are blended with the start's, (1 - a) x start + a x last for
each share a in BLENDS, and each blend is validated as an epoch is and may become best.pt (weight-space
ensembling, Wortsman et al. 2022, "Robust fine-tuning of zero-shot models"). Fine-tuning learns the new
pairs well before it forgets much, and on the straight line back to the start the forgetting recedes
faster than the learning: on MaintNet a blend kept 98% of 50 corrections 0.84 BLEU below the start,
where no epoch had more than 86% within 1 BLEU of it (docs/feedback.md).

The case memory of the run's best.pt holds the new pairs first, then the old ones: an alert that was
corrected finds its correction ahead of an equally similar old case, replay or not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seq2seq.checkpoint import load_model
from seq2seq.config import SearchConfig
from seq2seq.config_checks import from_dict
from seq2seq.corpus import Example, ParallelCorpus
from seq2seq.errors import ConfigError, DataError, counted, shown
from seq2seq.model import Seq2Seq
from seq2seq.recommender import Recommender
from seq2seq.tokenizer import Tokenizer, normalize
from seq2seq.trust import read_memory

NEW_SHARE = 0.1  # the new pairs' least share of a replaying run's training pairs (by repetition)
# Shares of the last weights in the blends with the start's. On MaintNet (3 seeds, 12 epochs) these kept 100%
# to 78% of 50 corrections while dev BLEU recovered 1-2 points of the 2 that the last epoch had lost.
BLENDS = (0.95, 0.9, 0.85, 0.8, 0.75, 0.7)


@dataclass(frozen=True)
class Start:
    """What a fine-tuning run starts from: a checkpoint's model and tokenizer and its training pairs."""

    path: Path
    model: Seq2Seq
    tokenizer: Tokenizer
    old: list[Example]  # the checkpoint's distinct training pairs; empty without a case memory

    @classmethod
    def load(cls, path: str | Path) -> Start:
        model, tokenizer, payload = load_model(path)
        if not isinstance(model, Seq2Seq):
            raise ConfigError(f"{path}: --init-from takes one model, not an ensemble (fine-tune each member, "
                              "DIR/member-K/best.pt, then seq2seq ensemble the results)")
        memory, _ = read_memory(payload, path)
        old = [] if memory is None else [Example(alert, action, i) for i, (alert, action)
                                         in enumerate(zip(memory.alerts, memory.actions, strict=True), 1)]
        return cls(Path(path), model, tokenizer, old)

    def check_kept(self, settings: dict[tuple[str, str], tuple[Any, str]]) -> None:
        """ConfigError for the first model or tokenizer setting, ``(section, field) -> (value, where it was
        set)``, that differs from the checkpoint's."""
        kept = {"model": self.model.config, "tokenizer": self.tokenizer.config}
        for (section, name), (value, origin) in settings.items():
            if section not in kept:
                continue
            wanted = getattr(from_dict(type(kept[section]), {name: value}, origin), name)
            if wanted != getattr(kept[section], name):
                raise ConfigError(f"{origin} sets {section} {name} to {wanted!r}, but --init-from {self.path} has "
                                  f"{getattr(kept[section], name)!r}; fine-tuning keeps the checkpoint's model and "
                                  "tokenizer, so leave it out")

    def corpora(self, new: ParallelCorpus, replay: bool, log: Callable[[str], None], max_target_length: int
                ) -> tuple[ParallelCorpus, ParallelCorpus, ParallelCorpus]:
        """What the run trains on (``new``, with the old pairs unless ``replay`` is off), the cases its best.pt
        keeps (``new``, then the old pairs) and the new pairs it can learn. A new pair whose action is over
        ``max_target_length`` pieces, or that the vocabulary cannot write, is not trained on (the model would learn
        to say "⁇" for what it cannot spell: "⁇ eplaced backup alarm ⁇ 55-1032"), so it does not push its alert's
        old pairs out of the replay either."""
        cases = ParallelCorpus(new.path, [*new.examples, *self.old], [])
        left_out = set()
        for example in new.examples:  # fine-tuning keeps the vocabulary: what it cannot write is never learned
            pieces = self.tokenizer.encode_target(example.target)
            if len(pieces) > max_target_length:
                left_out.add(example.line)
                log(f"warning: {new.path}: line {example.line}: the action is {len(pieces)} pieces, over "
                    f"train.max_target_length ({max_target_length}), so it is not trained on; its alert's old "
                    "answers stay in the replay")
                continue
            written = self.tokenizer.decode_target(pieces)
            if normalize(written) != normalize(self.tokenizer.normalize_target(example.target)):
                left_out.add(example.line)
                log(f"warning: {new.path}: line {example.line}: the vocabulary of {self.path} cannot write the action "
                    f"{shown(repr(example.target))} (it reads {shown(repr(written))}), so it is not trained on; its "
                    "alert's old answers stay in the replay")
        answers: dict[str, set[str]] = {}
        for example in new.examples:
            answers.setdefault(self.tokenizer.normalize_source(example.source), set()).add(normalize(example.target))
        torn = [alert for alert, targets in answers.items() if len(targets) > 1]
        if torn:  # a model gives an alert one answer: at most one of them can be learned
            log(f"warning: {new.path}: corrections disagree about {counted(len(torn), 'alert')} "
                f"({shown(repr(torn[0]))} has {len(answers[torn[0]])} answers); a model learns one answer for each")
        learnable = [e for e in new.examples if e.line not in left_out]  # named above; not counted again below
        learn = ParallelCorpus(new.path, learnable, new.skipped)
        if not learnable:
            raise DataError(f"{new.path}: no new pair can be learned (each action is over train.max_target_length "
                            f"({max_target_length}), or has characters the vocabulary of {self.path} cannot write)")
        if not self.old:  # a last.pt never carries one; a best.pt written before cases were kept neither
            log(f"{self.path} carries no case memory (a last.pt, or a best.pt written before cases were kept; a run's "
                f"best.pt has one): nothing is mixed in, training on the {len(learnable)} new pairs alone, and the "
                "result's past cases are the new pairs only")
            return learn, cases, learn
        if not replay:
            return learn, cases, learn
        read = self.tokenizer.normalize_source  # as the model reads an alert: "phi a bit high" is "PHI A BIT HIGH"
        corrected = {read(e.source) for e in learnable}
        kept = [e for e in self.old if read(e.source) not in corrected]
        repeats = max(1, math.ceil(NEW_SHARE * len(kept) / ((1 - NEW_SHARE) * len(learnable))))
        log(f"mixing {counted(len(learnable), 'new pair')} (x{repeats}) with {counted(len(kept), 'training pair')} "
            f"of {self.path}"
            + (f" ({left} of its pairs {'has' if left == 1 else 'have'} a new pair's alert, and "
               f"{'is' if left == 1 else 'are'} left out)" if (left := len(self.old) - len(kept)) else ""))
        return ParallelCorpus(new.path, [*learnable * repeats, *kept], new.skipped), cases, learn


@dataclass(frozen=True)
class Learning:
    """A fine-tuning run's new pairs, and how they choose its best.pt: the checkpoint that answers the most
    of them exactly, among those whose dev BLEU is at least a floor (the start's, less ``forget_tolerance``:
    the most corrections learned without forgetting); dev BLEU when none is."""

    answers: tuple[tuple[str, frozenset[str]], ...]  # each distinct alert of the new pairs, its actions (normalised)

    @classmethod
    def of(cls, new: ParallelCorpus, read: Callable[[str], str]) -> Learning:
        """The alerts of ``new``, the pairs a run can learn (``Start.corpora``): an alert two pairs answer two ways
        counts once, learned when it gets either, since a model gives one answer. ``read``: the alert as the model
        reads it (``Tokenizer.normalize_source``), as ``Start.corpora`` groups alerts: "oil leak" and "OIL LEAK"
        are one alert to a model that reads upper case, and were two here."""
        actions: dict[str, tuple[str, set[str]]] = {}
        for example in new.examples:  # the alert as first typed stands for its group
            actions.setdefault(read(example.source), (example.source, set()))[1].add(normalize(example.target))
        return cls(tuple(sorted((alert, frozenset(found)) for alert, found in actions.values())))

    def share(self, recommender: Recommender) -> float:
        """The share of the alerts whose greedy answer is one of their actions (normalised)."""
        found = recommender.translate([alert for alert, _ in self.answers], SearchConfig(beam_size=1), batch_size=128)
        return sum(normalize(a) in actions for a, (_, actions) in zip(found, self.answers, strict=True)) \
            / len(self.answers)

    @staticmethod
    def key(bleu: float, learned: float, floor: float) -> tuple[float, ...]:
        """What best.pt maximises, given a validation's dev BLEU and share learned."""
        return (1.0, learned, bleu) if bleu >= floor else (0.0, bleu, learned)
