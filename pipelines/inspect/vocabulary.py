"""`bertkit inspect VOCAB_DIR`: what a vocabulary directory holds, checked as every stage
checks it before use (pipelines/io/vocabulary.py): a `bertkit vocab` directory from its
vocab.json and files, a released BERT's from its vocab.txt and the tokenizer files beside
it (its casing and where that came from, or that it does not say)."""

from __future__ import annotations

from pipelines.inspect.formatting import plural, shown_path
from pipelines.inspect.targets import InspectError
from pipelines.io import storage
from pipelines.io.released_vocab import CasingNotSaidError
from pipelines.io.vocabulary import (
    VocabError,
    Vocabulary,
    is_unused_token,
    load_vocab,
)
from schemas.manifest import MANIFEST_NAME
from schemas.vocab import (
    CONTINUATION_PREFIX,
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
)

SAMPLE_TOKENS = 10  # learned tokens shown, at evenly spaced ids


def describe_vocabulary(url: str) -> list[str]:
    """The summary of a vocabulary directory (or its vocab.json or vocab.txt): a `bertkit
    vocab` output, or a released BERT's (no vocab.json beside its vocab.txt)."""
    name = storage.basename(url)
    directory = storage.parent(url) if name in (VOCAB_METADATA_FILE, VOCAB_FILE) else url
    released_markers = (VOCAB_FILE, TOKENIZER_FILE)
    try:
        if storage.exists(storage.join(directory, VOCAB_METADATA_FILE)):
            return _bertkit_vocabulary(directory, load_vocab(directory))
        if not any(storage.exists(storage.join(directory, n)) for n in released_markers):
            raise InspectError(
                f"{storage.join(directory, VOCAB_FILE)} is missing: a vocabulary directory "
                f"holds {VOCAB_FILE} (and, from `bertkit vocab`, {TOKENIZER_FILE} and "
                f"{VOCAB_METADATA_FILE}; a released BERT's may hold {TOKENIZER_FILE} alone)"
            )
        try:
            return _released_vocabulary(directory, load_vocab(directory), said=True)
        except CasingNotSaidError:
            # Shown all the same: casing changes the tokenizer, not what the files hold.
            return _released_vocabulary(directory, load_vocab(directory, cased=False), said=False)
    except VocabError as error:
        raise InspectError(str(error)) from error


# A transformers model's files beside a released vocabulary: its config and its weights.
_MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")


def _bertkit_vocabulary(directory: str, vocab: Vocabulary) -> list[str]:
    metadata = vocab.metadata
    sample = metadata.sample
    learned = sample.get("learned_tokens")
    # The parts add up to the size: the special tokens, the alphabet, its "##" forms (each
    # character after the start of a word), the learned pieces and the [unusedN] slots.
    parts = [f"{len(SPECIAL_TOKENS)} special"]
    parts.append(f"{sample['alphabet']:,} characters" if "alphabet" in sample else None)
    pieces = sample.get("continuation_pieces")
    parts.append(f"{pieces:,} ##characters" if pieces is not None else None)
    parts.append(f"{learned:,} learned" if learned is not None else None)
    parts.append(f"{metadata.num_unused:,} [unusedN]")
    lines = [
        f"vocabulary {directory} ({VOCAB_METADATA_FILE})",
        f"record {metadata.record}, schema version {metadata.schema_version}, written by "
        f"bertkit {metadata.bertkit_version}",
        f"size: {plural(vocab.size, 'token')} ({', '.join(p for p in parts if p)})",
        _casing(vocab),
        f"{VOCAB_FILE} sha256: {vocab.sha256}",
        f"{TOKENIZER_FILE} sha256: {metadata.tokenizer_sha256}",
        _special_line(vocab.tokens),
        *_sample_lines(vocab.tokens),
    ]
    if sample:
        lines.append(
            f"trained on: {plural(sample.get('documents', 0), 'document')}, "
            f"{plural(sample.get('sentences', 0), 'sentence')}, "
            f"{sample.get('text_bytes', 0):,} bytes of text (of "
            f"{sample.get('total_text_bytes', 0):,}), seed {sample.get('seed')}"
        )
    lines.append(f"inputs: {len(metadata.inputs)}")
    for entry in metadata.inputs:
        digest = str(entry.get("manifest_sha256", ""))
        path = shown_path(str(entry.get("path", "")), directory, MANIFEST_NAME)
        lines.append(
            f"  {path} ({entry.get('stage', '?')}): "
            f"{plural(int(entry.get('documents', 0)), 'document')}, "
            f"{int(entry.get('text_bytes', 0)):,} bytes of text, manifest sha256 {digest[:16]}…"
        )
    lines.append(
        f"checked: {VOCAB_FILE} and {TOKENIZER_FILE} have the sha256 {VOCAB_METADATA_FILE} "
        "records and list the same tokens"
    )
    return lines


def _released_vocabulary(directory: str, vocab: Vocabulary, said: bool) -> list[str]:
    casing = (
        _casing(vocab) + f", from {vocab.cased_from}"
        if said
        else "casing: not said by the directory (no do_lower_case in tokenizer_config.json, "
        "no tokenizer.json normalizer): `bertkit examples` needs --cased or --no-cased"
    )
    lines = [
        f"vocabulary {directory} (a released BERT's: {', '.join(vocab.source_files)})",
        f"size: {plural(vocab.size, 'token')} ({vocab.metadata.num_unused:,} [unusedN])",
        casing,
        f"{VOCAB_FILE} sha256: {vocab.sha256}"
        + ("" if VOCAB_FILE in vocab.source_files else f" (the {VOCAB_FILE} its tokens make)"),
    ]
    if TOKENIZER_FILE in vocab.source_files:
        lines.append(f"{TOKENIZER_FILE} sha256: {vocab.metadata.tokenizer_sha256}")
    model = [name for name in _MODEL_FILES if storage.exists(storage.join(directory, name))]
    if "config.json" in model and len(model) > 1:
        lines.append(
            f"model: {', '.join(model)} beside it, a transformers model (a released BERT, or "
            "what `bertkit export-hf` writes): inspect shows its vocabulary; load the model "
            "with transformers"
        )
    lines += [_special_line(vocab.tokens), *_sample_lines(vocab.tokens)]
    checked = f"{VOCAB_FILE} has no empty line, no token twice and BERT's special tokens"
    if VOCAB_FILE not in vocab.source_files:
        checked = (
            f"{TOKENIZER_FILE} is BERT's WordPiece, its ids 0..{vocab.size - 1:,} once each, "
            "its added tokens its own, BERT's special tokens in it"
        )
    elif TOKENIZER_FILE in vocab.source_files:
        checked += f"; {TOKENIZER_FILE} is BERT's WordPiece over the same tokens and ids"
    lines.append(f"checked: {checked}")
    return lines


def _casing(vocab: Vocabulary) -> str:
    """The casing line; a released tokenizer may set accent stripping apart from case."""
    unusual = vocab.strip_accents is not None and vocab.strip_accents == vocab.cased
    if vocab.cased:
        text = "cased, accents stripped" if unusual else "cased (text kept as written)"
    else:
        text = (
            "uncased, accents kept (lower-cased only)"
            if unusual
            else "uncased (lower-cased, accents stripped, as BERT uncased)"
        )
    return f"casing: {text}"


def _special_line(tokens: list[str]) -> str:
    ids = {token: index for index, token in enumerate(tokens) if token in SPECIAL_TOKENS}
    return "special tokens: " + ", ".join(
        f"{token} {ids[token]}" if token in ids else f"{token} missing" for token in SPECIAL_TOKENS
    )


def _sample_lines(tokens: list[str]) -> list[str]:
    """SAMPLE_TOKENS learned tokens (neither special nor [unusedN]) at evenly spaced ids,
    from the single characters WordPiece starts with to the last merges it learned, and how
    many of them are `##` continuation pieces."""
    learned = [
        (index, token)
        for index, token in enumerate(tokens)
        if token not in SPECIAL_TOKENS and not is_unused_token(token)
    ]
    count = min(SAMPLE_TOKENS, len(learned))
    picked = [learned[i * (len(learned) - 1) // max(count - 1, 1)] for i in range(count)]
    continuation = sum(1 for _, token in learned if token.startswith(CONTINUATION_PREFIX))
    return [
        "sample tokens (id:token): " + " ".join(f"{index}:{token}" for index, token in picked),
        f"word pieces: {plural(len(learned) - continuation, 'word start')}, "
        f"{continuation:,} {CONTINUATION_PREFIX} continuations",
    ]
