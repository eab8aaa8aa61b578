"""A released BERT's vocabulary directory, read as Google and transformers ship it. Beam-free.

`pipelines.io.vocabulary.load_vocab` comes here for a directory without vocab.json. What
is read, and how it gives the tokenizer transformers' BertTokenizerFast would use there:

- vocab.txt: the tokens, line number = id. An empty line, a token on two lines or a missing
  [PAD]/[UNK]/[CLS]/[SEP]/[MASK] is refused naming the file and the line.
- or, without vocab.txt (transformers 5 saves none; many hub repositories ship none),
  tokenizer.json's WordPiece model vocab, in id order: its ids must be 0..n-1, once each,
  and its added tokens must be vocabulary tokens with their ids. The vocabulary's sha256 is
  then that of the vocab.txt those tokens make in Google's format (`vocab_txt_bytes`): the
  file transformers 4 would have saved, so both kinds of directory of one model record one
  sha256.
- tokenizer_config.json (if present): `do_lower_case`, `strip_accents` (null: as casing
  says) and `tokenize_chinese_chars`, which transformers applies over tokenizer.json's own;
  the special tokens it names must be BERT's.
- tokenizer.json (if present): must be BERT's pipeline (BertNormalizer, BertPreTokenizer,
  WordPiece with `##`) and list vocab.txt's tokens with vocab.txt's ids; its normalizer
  gives the casing when tokenizer_config.json does not, and its `max_input_chars_per_word`
  the longest word (else transformers' 100: a longer word is one [UNK]).
- special_tokens_map.json (if present): its special tokens must be BERT's.

A directory that does not say its casing takes the caller's (`--cased` / `--no-cased`);
without one it is refused, since transformers' silent default (lower-case) would be a guess.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container, Mapping
from typing import Any

from tokenizers import Tokenizer

from pipelines.io import storage
from pipelines.io.vocabulary import (
    VocabError,
    Vocabulary,
    build_tokenizer,
    check_agreement,
    given_tokens_metadata,
    loaded_once,
    parse_vocab_txt,
    vocab_txt_bytes,
)
from schemas.checks import MAX_RECORD_BYTES, MAX_VOCAB_FILE_BYTES, load_json
from schemas.vocab import (
    CASED_FROM_TOKENIZER,
    CASED_FROM_TOKENIZER_CONFIG,
    CLS_TOKEN,
    CONTINUATION_PREFIX,
    MASK_TOKEN,
    PAD_TOKEN,
    RELEASED_FILES,
    SEP_TOKEN,
    SPECIAL_TOKENS,
    SPECIAL_TOKENS_MAP_FILE,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
    UNK_TOKEN,
    VOCAB_FILE,
)

# transformers' WordPiece default, used when no tokenizer.json says otherwise (Google's
# FullTokenizer, and `bertkit vocab`, use 200).
TRANSFORMERS_MAX_CHARS = 100
# The names transformers gives BERT's special tokens, and the tokens bertkit needs there.
_SPECIAL_KEYS = {
    "pad_token": PAD_TOKEN,
    "unk_token": UNK_TOKEN,
    "cls_token": CLS_TOKEN,
    "sep_token": SEP_TOKEN,
    "mask_token": MASK_TOKEN,
}


class CasingNotSaidError(VocabError):
    """A released directory that does not say its casing, and no casing given."""


def checked_tokens(data: bytes, url: str) -> list[str]:
    """vocab.txt's tokens, refused in one line naming the file and the line (1-based) of
    the first token bertkit cannot use, or the special tokens it lacks."""
    try:
        tokens = parse_vocab_txt(data)
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise VocabError(
            f"{url} line {line}: not UTF-8 ({error.reason}); a vocab.txt is UTF-8"
        ) from error
    first_line: dict[str, int] = {}
    for line, token in enumerate(tokens, start=1):
        if not token.strip():
            raise VocabError(
                f"{url} line {line}: an empty token, which no text can give; a vocab.txt "
                "holds one token per line (remove the line only if the model was not "
                "trained with it: every later id would move)"
            )
        if token in first_line:
            raise VocabError(
                f"{url} line {line}: {token!r} is on line {first_line[token]} too; a token "
                "must have one id: this is not a vocabulary bertkit (or BERT) can use"
            )
        first_line[token] = line
    _require_special_tokens(url, first_line, f"{len(tokens):,} lines")
    return tokens


def _require_special_tokens(url: str, present: Container[str], size: str) -> None:
    """Refuses, in one line naming the file and its `size`, a vocabulary without BERT's
    special tokens (`present`: its tokens)."""
    missing = [t for t in SPECIAL_TOKENS if t not in present]
    if missing:
        raise VocabError(
            f"{url} lacks {', '.join(missing)} ({size}): bertkit needs BERT's special tokens "
            f"{' '.join(SPECIAL_TOKENS)} in the vocabulary"
        )


def tokenizer_json_tokens(data: bytes, url: str) -> list[str]:
    """The tokens of a released tokenizer.json's WordPiece model, id order, refused in one
    line naming the file when it is another model (BPE, Unigram), when its ids are not
    0..n-1 once each, when an added token is not the vocabulary's token with that id, or
    when a token cannot be a vocab.txt line or a special token is missing."""
    try:
        config = load_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:  # RecordError: nested too deep
        raise VocabError(f"{url}: not valid JSON ({error}); restore the released file") from error
    model = config.get("model") if isinstance(config, dict) else None
    kind = model.get("type") if isinstance(model, dict) else None
    if kind != "WordPiece":
        what = f"a {kind} tokenizer" if isinstance(kind, str) else "no tokenizer model"
        raise VocabError(
            f"{url} is {what}, not BERT's WordPiece: bertkit makes examples with BERT's "
            "WordPiece vocabulary only (give a BERT model's directory)"
        )
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(type(i) is int and i >= 0 for i in vocab.values()):
        raise VocabError(
            f"{url}: its model's vocab is not an object of tokens to ids (whole numbers from "
            "0); restore the released file"
        )
    by_id: dict[int, str] = {}
    for token, index in vocab.items():
        if index in by_id:
            raise VocabError(
                f"{url}: id {index} is given to {by_id[index]!r} and to {token!r}; a token's id "
                "is its row in the model's embeddings, so each id must be one token's"
            )
        by_id[index] = token
    missing = next((i for i in range(len(by_id)) if i not in by_id), None)
    if missing is not None:
        raise VocabError(
            f"{url}: its model's vocab has no token with id {missing} ({len(by_id):,} tokens, "
            f"ids up to {max(by_id):,}); ids must run 0..{len(by_id) - 1:,} with no gap"
        )
    tokens = [by_id[i] for i in range(len(by_id))]
    added_tokens = config.get("added_tokens") or []
    if not isinstance(added_tokens, list) or not all(isinstance(a, dict) for a in added_tokens):
        raise VocabError(
            f"{url}: added_tokens is not a list of objects (content, id); restore the released file"
        )
    for added in added_tokens:
        content, index = added.get("content"), added.get("id")
        if type(index) is int and index >= len(tokens) and content not in vocab:
            raise VocabError(_added_tokens_unsupported(url, content, index, len(tokens)))
        if type(index) is not int or not 0 <= index < len(tokens) or tokens[index] != content:
            theirs = (
                f"{tokens[index]!r}"
                if type(index) is int and 0 <= index < len(tokens)
                else "no token"
            )
            raise VocabError(
                f"{url}: the added token {content!r} has id {index!r}, where the model's vocab "
                f"has {theirs}; bertkit takes a vocabulary whose added tokens are its own "
                "(restore the released file)"
            )
    for index, token in enumerate(tokens):
        if not token.strip() or "\n" in token or token.endswith("\r"):
            raise VocabError(
                f"{url}: the token with id {index} is {token!r}, which cannot be a line of a "
                "vocab.txt (one token per line): not a vocabulary bertkit (or BERT) can use"
            )
    _require_special_tokens(url, vocab, f"{len(tokens):,} tokens")
    return tokens


def _added_tokens_unsupported(url: str, content: object, index: int, size: int) -> str:
    """The refusal of a token added past the vocabulary (`tokenizer.add_tokens`): not damage,
    a tokenizer bertkit does not reproduce (transformers matches added tokens before it cuts
    words; bertkit's tokenizer is WordPiece over the vocabulary alone)."""
    return (
        f"{url}: the added token {content!r} (id {index}) is outside the model's WordPiece "
        f"vocabulary of {size:,} tokens: tokens added with `tokenizer.add_tokens` are not "
        "supported (a released tokenizer's added tokens must be its vocabulary's tokens with "
        "their ids); use the tokenizer files as released, before the tokens were added (the "
        "model's extra embedding rows then go unused), or make them vocabulary tokens: write "
        "them into vocab.txt (over [unusedN] lines, or appended in id order) and save the "
        "tokenizer again from that file"
    )


def vocab_txt_of(directory: str) -> tuple[str, bytes]:
    """The file a vocabulary directory's tokens are read from and its vocab.txt's bytes:
    its own vocab.txt, or else the one its tokenizer.json's tokens make (what transformers
    4 saved beside it, whose sha256 is the vocabulary's: module docstring). Raises
    FileNotFoundError when it holds neither."""
    url = storage.join(directory, VOCAB_FILE)
    if storage.exists(url):
        return url, storage.read_bytes(url, MAX_VOCAB_FILE_BYTES)
    url = storage.join(directory, TOKENIZER_FILE)
    if not storage.exists(url):
        raise FileNotFoundError(f"{directory} holds neither {VOCAB_FILE} nor {TOKENIZER_FILE}")
    data = storage.read_bytes(url, MAX_VOCAB_FILE_BYTES)
    return url, vocab_txt_bytes(tokenizer_json_tokens(data, url))


def load_released_vocab(
    directory: str, reader: storage.Reader, cased: bool | None, cased_flag: str
) -> Vocabulary:
    """The released vocabulary at `directory` (module docstring), its casing from the
    directory, or else from `cased` (None: refused)."""
    urls = {name: reader.join(directory, name) for name in RELEASED_FILES}
    present = tuple(n for n in RELEASED_FILES if reader.exists(urls[n]))
    if VOCAB_FILE not in present and TOKENIZER_FILE not in present:
        raise VocabError(
            f"no vocabulary at {directory}: a released BERT's directory holds {VOCAB_FILE} or "
            f"{TOKENIZER_FILE}; give the directory that holds them"
        )
    data = {
        name: reader.read_bytes(
            urls[name],
            MAX_VOCAB_FILE_BYTES if name in (VOCAB_FILE, TOKENIZER_FILE) else MAX_RECORD_BYTES,
        )
        for name in present
    }
    digests = tuple(f"{n}:{hashlib.sha256(data[n]).hexdigest()}" for n in present)
    key = (directory, "released", repr(cased), cased_flag, *digests)
    return loaded_once(key, lambda: _build(directory, urls, data, present, cased, cased_flag))


def _build(
    directory: str,
    urls: dict[str, str],
    data: dict[str, bytes],
    present: tuple[str, ...],
    cased: bool | None,
    cased_flag: str,
) -> Vocabulary:
    if VOCAB_FILE in data:
        tokens = checked_tokens(data[VOCAB_FILE], urls[VOCAB_FILE])
        vocab_bytes = data[VOCAB_FILE]
    else:
        tokens = tokenizer_json_tokens(data[TOKENIZER_FILE], urls[TOKENIZER_FILE])
        vocab_bytes = vocab_txt_bytes(tokens)  # the sha256 recorded: module docstring
    config = _json_object(data, TOKENIZER_CONFIG_FILE, urls)
    _check_special_names(config, urls[TOKENIZER_CONFIG_FILE])
    _check_special_names(
        _json_object(data, SPECIAL_TOKENS_MAP_FILE, urls), urls[SPECIAL_TOKENS_MAP_FILE]
    )
    normalizer, max_chars = {}, TRANSFORMERS_MAX_CHARS
    if TOKENIZER_FILE in data:
        normalizer, max_chars = _checked_tokenizer_json(tokens, data[TOKENIZER_FILE], directory)
    said, said_by = _directory_casing(config, normalizer, urls[TOKENIZER_CONFIG_FILE])
    if said is None and cased is None:
        raise CasingNotSaidError(
            f"the released vocabulary at {directory} does not say whether it lower-cases "
            f"(no {TOKENIZER_CONFIG_FILE} do_lower_case, no {TOKENIZER_FILE} normalizer): pass "
            "--cased for a cased model (bert-base-cased) or --no-cased for an uncased one "
            "(bert-base-uncased)"
        )
    if said is not None and cased is not None and said != cased:
        flag = ("--cased" if cased else "--no-cased") if cased_flag == "--cased" else cased_flag
        raise VocabError(
            f"{flag} contradicts the released vocabulary at {directory}: its {said_by} says "
            f"{'cased' if said else 'uncased'}; drop the flag"
        )
    resolved = said if said is not None else cased
    assert resolved is not None
    cased_from = said_by if said is not None else ("--cased" if resolved else "--no-cased")
    if cased_flag != "--cased" and said is None:
        cased_from = cased_flag  # the shards' manifest, which recorded the flag given then
    strip_accents = _setting(config, "strip_accents", normalizer, "strip_accents", None)
    chinese_chars = _setting(
        config, "tokenize_chinese_chars", normalizer, "handle_chinese_chars", True
    )
    tokenizer = build_tokenizer(tokens, resolved, strip_accents, bool(chinese_chars), max_chars)
    tokenizer_bytes = data.get(TOKENIZER_FILE) or tokenizer.to_str(pretty=True).encode("utf-8")
    metadata = given_tokens_metadata(
        tokens,
        resolved,
        vocab_bytes,
        tokenizer_bytes,
        inputs=[],
        config={"released": directory, "cased_from": cased_from},
    )
    return Vocabulary.from_tokens(
        tokens,
        metadata,
        tokenizer,
        released=True,
        source_files=present,
        cased_from=cased_from,
        strip_accents=strip_accents,
    )


def _json_object(data: dict[str, bytes], name: str, urls: dict[str, str]) -> dict[str, Any]:
    """A JSON file of the directory as a dict; {} when the directory lacks it."""
    if name not in data:
        return {}
    try:
        value = load_json(data[name].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:  # RecordError: nested too deep
        raise VocabError(
            f"{urls[name]}: not valid JSON ({error}); restore the released file"
        ) from error
    if not isinstance(value, dict):
        raise VocabError(f"{urls[name]}: a JSON {type(value).__name__}, not an object")
    return value


def _check_special_names(config: dict[str, Any], url: str) -> None:
    """tokenizer_config.json and special_tokens_map.json may rename the special tokens
    (`"unk_token": "<unk>"`): bertkit's examples and trainer use BERT's names only."""
    for key, expected in _SPECIAL_KEYS.items():
        value = config.get(key)
        name = value.get("content") if isinstance(value, dict) else value
        if name is not None and name != expected:
            raise VocabError(
                f"{url}: {key} is {name!r}; bertkit uses BERT's {expected} (a vocabulary with "
                "other special tokens is not one it can make examples with)"
            )


def _checked_tokenizer_json(tokens: list[str], data: bytes, directory: str) -> tuple[dict, int]:
    """tokenizer.json's normalizer settings and longest word, once it is checked to be
    BERT's pipeline over vocab.txt's tokens with vocab.txt's ids."""
    where = storage.join(directory, TOKENIZER_FILE)
    try:
        config = load_json(data.decode("utf-8"))
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as error:  # tokenizers raises a plain Exception on a file it cannot read
        raise VocabError(
            f"{where}: not a tokenizer file ({error}); restore the released file"
        ) from error
    model = config.get("model") or {}
    normalizer = config.get("normalizer") or {}
    kinds = {
        "model": (model.get("type"), "WordPiece"),
        "normalizer": (normalizer.get("type"), "BertNormalizer"),
        "pre_tokenizer": ((config.get("pre_tokenizer") or {}).get("type"), "BertPreTokenizer"),
        "continuing_subword_prefix": (model.get("continuing_subword_prefix"), CONTINUATION_PREFIX),
    }
    for part, (found, expected) in kinds.items():
        if found != expected:
            raise VocabError(
                f"{where}: its {part} is {found!r}, not BERT's {expected!r}; bertkit makes "
                "examples with BERT's WordPiece tokenizer only"
            )
    known = set(tokens)
    for added in config.get("added_tokens") or []:  # a transformers 4 save: vocab.txt beside it
        index = added.get("id") if isinstance(added, dict) else None
        if type(index) is int and index >= len(tokens) and added.get("content") not in known:
            raise VocabError(_added_tokens_unsupported(where, added["content"], index, len(tokens)))
    check_agreement(
        tokens,
        tokenizer,
        cased=None,
        where=directory,
        advice="a released directory's files must come from one model: restore them",
    )
    max_chars = model.get("max_input_chars_per_word", TRANSFORMERS_MAX_CHARS)
    return normalizer, int(max_chars)


def released_casing(directory: str) -> tuple[bool | None, str]:
    """Whether a released directory says it is cased (True), uncased (False) or nothing
    (None), and which file says so, as `load_vocab` reads it (`_directory_casing`)."""
    config, normalizer, config_url = _tokenizer_settings(directory)
    return _directory_casing(config, normalizer, config_url)


def released_strip_accents(directory: str) -> tuple[bool | None, str]:
    """Whether a released directory's tokenizer strips accents (True), keeps them (False) or
    leaves it to its casing (None: lower-casing strips them), as `load_vocab` reads it
    (`_setting`), and which file says so."""
    config, normalizer, _ = _tokenizer_settings(directory)
    value = _setting(config, "strip_accents", normalizer, "strip_accents", None)
    said_by = TOKENIZER_CONFIG_FILE if "strip_accents" in config else f"{TOKENIZER_FILE} normalizer"
    return value, f"{said_by} strip_accents" if value is not None else ""


def recorded_strip_accents(record: Mapping[str, Any]) -> bool | None:
    """Whether the tokenizer that made shards stripped accents, from their manifest's `vocab`
    record: its origin's `strip_accents` where a released directory set it, else as its
    casing says (an uncased tokenizer strips them); None where it records no casing."""
    origin = record.get("origin")
    said = origin.get("strip_accents") if isinstance(origin, Mapping) else None
    if isinstance(said, bool):
        return said
    cased = record.get("cased")
    return not cased if isinstance(cased, bool) else None


def _tokenizer_settings(directory: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A released directory's tokenizer_config.json and tokenizer.json normalizer ({} where it
    lacks them), and the tokenizer_config.json's URL."""
    urls = {name: storage.join(directory, name) for name in (TOKENIZER_CONFIG_FILE, TOKENIZER_FILE)}
    data = {
        name: storage.read_bytes(url, MAX_VOCAB_FILE_BYTES)
        for name, url in urls.items()
        if storage.exists(url)
    }
    normalizer = _json_object(data, TOKENIZER_FILE, urls).get("normalizer") or {}
    if not isinstance(normalizer, dict):
        raise VocabError(f"{urls[TOKENIZER_FILE]}: its normalizer is not an object")
    return _json_object(data, TOKENIZER_CONFIG_FILE, urls), normalizer, urls[TOKENIZER_CONFIG_FILE]


def _directory_casing(
    config: dict[str, Any], normalizer: dict[str, Any], config_url: str
) -> tuple[bool | None, str]:
    """Whether the directory says cased (True), uncased (False) or nothing (None), and which
    file said it. tokenizer_config.json wins: transformers applies it over tokenizer.json."""
    lower = config.get("do_lower_case")
    if lower is not None:
        if not isinstance(lower, bool):
            raise VocabError(f"{config_url}: do_lower_case is {lower!r}, not true or false")
        return not lower, CASED_FROM_TOKENIZER_CONFIG
    if isinstance(normalizer.get("lowercase"), bool):
        return not normalizer["lowercase"], CASED_FROM_TOKENIZER
    return None, ""


def _setting(
    config: dict[str, Any], key: str, normalizer: dict[str, Any], json_key: str, default: Any
) -> Any:
    """A normalizer setting as transformers takes it: tokenizer_config.json's key when it has
    one (null included), else tokenizer.json's, else transformers' default."""
    value = config[key] if key in config else normalizer.get(json_key, default)
    if value is not None and not isinstance(value, bool):
        raise VocabError(
            f"{key} is {value!r} in the released directory's {TOKENIZER_CONFIG_FILE} or "
            f"{TOKENIZER_FILE}: true, false or null; restore the released file"
        )
    return value
