"""The `bertkit inspect` command line: flags, and which reads and prints each one runs.

Its --help is the package docstring (pipelines/inspect/__init__.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from pipelines.command import flags
from pipelines.command.flags import option
from pipelines.command.startup import exit_quietly_on_broken_pipe
from pipelines.inspect.artifacts import OtherArtifact, find_other_artifact, plain_refusal
from pipelines.inspect.checkpoints import MissingExtraError
from pipelines.inspect.formatting import (
    format_document,
    format_document_stats,
    format_example_stats,
    format_schema,
    format_summary,
    plural,
    render_example,
)
from pipelines.inspect.reading import (
    Vocab,
    dataset_card_url,
    iter_documents,
    iter_examples,
    read_examples,
    resolve_vocab,
    written_schema,
)
from pipelines.inspect.stats import (
    DocumentStats,
    ExampleStats,
    ShardsStats,
    collect_document_stats,
    collect_shards_stats,
    document_mismatches,
    manifest_mismatches,
)
from pipelines.inspect.targets import (
    InspectError,
    Target,
    max_seq_length_of,
    open_target,
    shard_refs,
)
from pipelines.io import storage
from schemas.documents import DOCUMENT_SCHEMA
from schemas.examples import (
    PRETRAINING_EXAMPLE_SCHEMA,
    SPLITS,
)
from schemas.manifest import DocumentsManifest
from schemas.vocab import MASK_TOKEN


@dataclass(frozen=True, slots=True)
class InspectConfig:
    """Every flag of `bertkit inspect`: what to read, and what to print of it."""

    target: str = option(
        help="shards, a shard, documents, a vocabulary or a run",
        metavar="PATH_OR_URL",
        positional=True,
    )
    schema: bool = option(False, help="print the Arrow schema", switch=True)
    show: int | None = option(None, help="print N examples or documents", metavar="N")
    json: int | None = option(None, help="print N as JSON lines, only that", metavar="N")
    stats: bool = option(False, help="statistics computed from the data", switch=True)
    vocab: str | None = option(None, help="vocabulary directory (for tokens)", metavar="DIR")
    # `--seq`, its first name, stays an alias of the name every other command uses.
    max_seq_length: int | None = option(
        None, help="only seqLENGTH shards", metavar="LENGTH", aliases=("--seq",)
    )
    split: str | None = option(None, help="only this split's shards", choices=SPLITS)
    verify: bool = option(
        True,
        flag="no-verify",
        switch=True,
        help="do not check shards against the manifest's sample counts, sizes and sha256",
    )
    report: str | None = option(
        None,
        help="write one self-contained HTML page of plots of the data to OUT.html",
        metavar="OUT.html",
    )
    parquet: str | None = option(
        None,
        help="write the examples (--limit, --split, --seq choose which) as Parquet to OUT",
        metavar="OUT",
    )
    limit: int | None = option(None, help="--parquet: at most N examples", metavar="N")


def parse_arguments(argv: list[str] | None) -> InspectConfig:
    parser = flags.parser_for(
        InspectConfig, "bertkit inspect", sys.modules["pipelines.inspect"].__doc__
    )
    args = flags.config_from(InspectConfig, parser.parse_args(argv))
    missing_extra = flags.extras_problem(InspectConfig, asdict(args))
    if missing_extra:
        flags.refuse(parser, missing_extra)  # s3:// or gs:// without its extra: exit 2
    for flag in ("show", "json"):
        if getattr(args, flag) is not None and getattr(args, flag) < 0:
            parser.error(f"--{flag} takes a count of 0 or more")
    if args.json is not None and (args.show is not None or args.stats or args.schema):
        parser.error("--json prints JSON lines only; run it on its own")
    if args.limit is not None and (args.parquet is None or args.limit < 0):
        parser.error("--limit takes a count of 0 or more, with --parquet")
    writes = [flag for flag in ("report", "parquet") if getattr(args, flag) is not None]
    if writes and (args.json is not None or args.show is not None or args.stats or args.schema):
        parser.error(
            f"--{writes[0]} writes a file; run it without --json, --show, --stats, --schema"
        )
    return args


def run(argv: list[str] | None = None) -> int:
    """Run the command; return the exit code (1 on damaged, missing or mismatched data)."""
    args = parse_arguments(argv)
    try:
        try:
            target = open_target(args.target)
        except (FileNotFoundError, storage.NotATargetError) as error:
            # Neither shards nor documents: a vocabulary or a run's checkpoints, perhaps.
            other = find_other_artifact(args.target)
            if other is not None:
                return _run_other(other, args)
            refusal = plain_refusal(args.target)
            if refusal is None:
                raise
            raise InspectError(refusal) from error
        if args.report is not None:
            from pipelines.inspect.report import write_report

            return write_report(target, args)
        if args.parquet is not None:
            from pipelines.inspect.export import write_parquet

            return write_parquet(target, args)
        if target.kind == "documents":
            if args.max_seq_length is not None or args.split or args.vocab:
                raise InspectError(
                    f"{args.target} is a documents directory: --seq, --split and --vocab "
                    "apply to shards"
                )
            return _run_documents(target, args)
        return _run_shards(target, args)
    except (InspectError, OSError) as error:  # ShardReadError, FileNotFoundError, StorageError
        if isinstance(error, BrokenPipeError):
            raise
        sys.stdout.flush()
        print(f"bertkit inspect: error: {storage.redact(str(error))}", file=sys.stderr)
        return 2 if isinstance(error, MissingExtraError) else 1


# The flags that read or write data: a vocabulary or checkpoints have a summary only.
_DATA_FLAGS = ("schema", "show", "json", "stats", "report", "parquet", "limit", "vocab")


def _run_other(other: OtherArtifact, args: InspectConfig) -> int:
    """A vocabulary's or a run's summary; the flags for shards and documents are refused
    before anything is read (exit 2)."""
    given = [
        f"--{name.replace('_', '-')}"
        for name in (*_DATA_FLAGS, "max_seq_length", "split")
        if getattr(args, name) not in (None, False)
    ]
    if given:
        print(
            f"bertkit inspect: error: {storage.redact(args.target)} is {other.kind}: inspect "
            f"prints its summary, and {', '.join(given)} "
            f"{'applies' if len(given) == 1 else 'apply'} to shards and documents; run it "
            "without " + ("it" if len(given) == 1 else "them"),
            file=sys.stderr,
        )
        return 2
    _print_lines(other.describe())
    return 0


def _run_shards(target: Target, args: InspectConfig) -> int:
    # Checks --max-seq-length/--split before any output.
    refs = shard_refs(target, args.max_seq_length, args.split)
    if args.json is not None:
        for example in iter_examples(
            target, args.max_seq_length, args.split, args.verify, args.json
        ):
            print(json.dumps(example.training_fields(), separators=(",", ":")))
        return 0
    sections = args.schema or args.show is not None or args.stats
    if not sections:
        _print_lines(format_summary(target))
        card = dataset_card_url(target)
        if card is not None:
            print(
                f"dataset card: {storage.redact(card)} (licence, counts, the commands that made it)"
            )
        if target.shard is not None:
            count = sum(1 for _ in read_examples(target.shard, args.verify))
            checked = "matches the manifest" if target.shard.info and args.verify else "read"
            print(f"read: {plural(count, 'sample')}, the tar is complete; {checked}")
        return 0
    if args.schema:
        _print_lines(format_schema(PRETRAINING_EXAMPLE_SCHEMA, target.manifest))
    vocab, note = (
        resolve_vocab(target, args.vocab) if args.show is not None or args.stats else (None, "")
    )
    if args.show is not None:
        print(storage.redact(note))
        remaining = args.show
        for shard in refs:
            if remaining <= 0:
                break
            for example in read_examples(shard, args.verify, remaining):
                print(render_example(example, vocab, f"{shard.label} "))
                remaining -= 1
    if args.stats:
        return _print_shards_stats(target, args, vocab, note)
    return 0


def _print_shards_stats(target: Target, args: InspectConfig, vocab: Vocab | None, note: str) -> int:
    mask_id = vocab.id_of(MASK_TOKEN) if vocab is not None else None
    if vocab is not None and mask_id is None:
        note = f"{vocab.url} has no {MASK_TOKEN}"
    _print_lines(format_summary(target))
    stats = ShardsStats(ExampleStats(mask_id, max_seq_length_of(target, args.max_seq_length)))
    result = _collect_and_print(
        stats,
        lambda: collect_shards_stats(target, stats, args.max_seq_length, args.split, args.verify),
        lambda result: format_example_stats(result, note),
    )
    if args.verify:
        _check_counts(manifest_mismatches(target, result), "the shards directory", "rebuild it")
        if target.manifest is not None:
            print("checked against the manifest: every shard's sha256 and every split's counts")
    return 0


def _collect_and_print(
    stats: ShardsStats | DocumentStats,
    collect: Callable[[], None],
    render: Callable[[dict[str, Any]], Iterable[str]],
) -> dict[str, Any]:
    """Run `collect` into `stats` and print the result, even when a file turns out damaged."""
    try:
        collect()
    finally:  # what was read is printed before the error propagates
        result = stats.result()
        if not stats.complete:
            print("statistics of what was read before the error:")
        _print_lines(render(result))
    return result


def _check_counts(problems: list[str], what: str, remedy: str) -> None:
    if problems:
        raise InspectError(
            "what was read differs from the manifest: " + "; ".join(problems) + f"; {what} "
            f"was changed after writing: {remedy}"
        )


def _run_documents(target: Target, args: InspectConfig) -> int:
    manifest = target.manifest
    assert isinstance(manifest, DocumentsManifest)
    if args.json is not None:
        names = DOCUMENT_SCHEMA.names
        for row in iter_documents(target, args.json):
            row = {name: row[name] for name in names}
            print(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        return 0
    if not (args.schema or args.show is not None or args.stats):
        _print_lines(format_summary(target))
        return 0
    if args.schema:
        _print_lines(format_schema(DOCUMENT_SCHEMA, manifest))
        if manifest.files:
            written = written_schema(target, manifest.files[0], args.verify)
            same = written.equals(DOCUMENT_SCHEMA, check_metadata=False)
            print(f"{manifest.files[0].name}: " + ("same schema" if same else f"\n{written}"))
    if args.show is not None:
        for row in iter_documents(target, args.show):
            _print_lines(format_document(row))
    if args.stats:
        stats = DocumentStats()
        result = _collect_and_print(
            stats,
            lambda: collect_document_stats(target, stats, args.verify),
            lambda result: format_document_stats(result, manifest),
        )
        if args.verify:
            _check_counts(document_mismatches(manifest, result), "the directory", "rerun the stage")
            print("checked against the manifest: every file's size and counts")
    return 0


def _print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        print(storage.redact(line))  # a URL's credentials are never shown


def main(argv: list[str] | None = None) -> None:
    # `bertkit inspect … --json 1000 | head`: the reader left; end quietly with the exit
    # code every bertkit command gives a closed pipe.
    with exit_quietly_on_broken_pipe():
        code = run(argv)
    sys.exit(code)


if __name__ == "__main__":
    main()
