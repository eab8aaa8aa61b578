"""The shard list a run reads, the first stage of trainer/data.py: `open_source` (in
pipelines/io/shards/source.py, shared with `bertkit inspect`) resolves a shards directory,
its manifest.json or shard URLs into shards with sample counts, and `check_source` refuses
shards the model cannot take.
"""

from __future__ import annotations

from pipelines.io.shards.source import (  # noqa: F401  (the trainer's names for them)
    DataConfigError,
    DataSource,
    ShardEntry,
    open_source,
    source_of,
)


def check_source(
    source: DataSource, max_position_embeddings: int, vocab_size: int, vocab_sha256: str | None
) -> None:
    """Refuse shards the model cannot take, before any step runs."""
    where = source.manifest_url or source.shards[0].url
    if source.max_seq_length is not None and source.max_seq_length > max_position_embeddings:
        raise DataConfigError(
            f"{where}: examples of up to {source.max_seq_length} tokens, the model has "
            f"{max_position_embeddings} positions; use shards of at most that length"
        )
    if source.manifest is None:
        return
    vocab = source.manifest.vocab
    if vocab.get("size") is not None and vocab["size"] > vocab_size:
        raise DataConfigError(
            f"{where}: the shards' vocabulary has {vocab['size']} tokens, the model "
            f"{vocab_size}; train with the shards' vocabulary"
        )
    if vocab_sha256 is not None and vocab.get("sha256") != vocab_sha256:
        raise DataConfigError(
            f"{where}: the shards were made with vocabulary sha256 {vocab.get('sha256')}, "
            f"the model was trained with {vocab_sha256}; token ids would mean different "
            "words. Rebuild the shards with the model's vocabulary, or start a new model"
        )
