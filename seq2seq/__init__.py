"""Maintenance-explanation generator: sensor alerts in, repair recommendations out.

A GRU encoder-decoder with switchable cross-attention (Bahdanau additive; Luong dot, general,
concat) translates alert phrases into recommendations and returns, for every output, the
alignment matrix between the alert's pieces and the recommendation's pieces. An RUL model on
turbofan sensor data decides which sensors look wrong; those become the alerts it explains.

Start here::

    from seq2seq import Recommender, SearchConfig
    recommender = Recommender.from_checkpoint("runs/default/translator.pt")
    [r] = recommender.recommend(["hpc outlet temperature rising sharply"], SearchConfig(beam_size=5))
    r.text, r.candidates[0].attention        # text, (target pieces x source pieces)

    from seq2seq import EngineMonitor, read_cmapss
    report = EngineMonitor.from_checkpoint("runs/default/rul.pt").analyse(read_cmapss(path)[0], recommender)

Layout: the translator core flat in this folder, in data-flow order (config, files, tables, tokenizer,
corpus, data, attention, encoder, decoder, model, checkpoint, search, recommender, evaluate, and
the training loop train with optimizer, averaging, report and distributed); ``fast/`` the faster equivalents
of torch primitives and of a trained model (no import from the core but its errors and config names);
``catalog/`` the alert phrases and repair actions the corpus is made from; ``rul/`` the sensor side and
the engine monitor that joins it to the translator; ``serving/`` file jobs, JSON views, figures and
default models, built on both; ``cli/`` the command line. Imports point that way only.

Shape legend, one meaning per letter across the package:
    B batch                      S source length            T target length, decoding steps
    N real (unpadded) target positions, packed              E embedding
    R recurrent hidden per direction (encoder GRU, RUL BiLSTM)    M memory = 2R
    H decoder hidden             A attention hidden         Q attention query size
    V vocabulary                 K beam size                D recurrent layers
    X the first decoder layer's non-token input             L cycles of an engine's history
    W window (cycles)            F sensors (features)       C convolution channels
    Y health classes
"""

from importlib import import_module

__version__ = "0.1.0"
# Each public name and the module it comes from, imported on first use (PEP 562): importing the package itself
# costs nothing, so the command line (seq2seq.cli) is running, and answers Ctrl-C in words, before torch loads.
_HOMES = {**dict.fromkeys(["ModelConfig", "RulConfig", "SearchConfig", "TokenizerConfig", "TrainConfig"], "config"),
          **dict.fromkeys(["CheckpointError", "ConfigError", "DataError", "Seq2SeqError"], "errors"),
          **dict.fromkeys(["Candidate", "Recommendation", "Recommender"], "recommender"),
          **dict.fromkeys(["Engine", "read_cmapss"], "rul.cmapss"),
          **dict.fromkeys(["EngineMonitor", "EngineReport"], "rul.monitor")}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'seq2seq' has no attribute {name!r}")
    return getattr(import_module(f"seq2seq.{_HOMES[name]}"), name)

