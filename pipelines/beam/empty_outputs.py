"""What a stage says when its output holds nothing a next stage can use, or (examples)
little of what it was given.

A stage that ran to its end may still have written 0 documents, or 0 examples, or a
held-out split of 0 examples, or a split of one document, whose pairs are IsNext only: the
next stage, or the trainer, would then refuse it or run without what the user asked for, far
from the cause. So each stage reads its finished
manifest and says so at once, on one WARNING line each: what is empty, where, and the
likely cause with its fix:

    WARNING bertkit.corpus: out holds 0 documents: no record read was kept (2 read;
    rejected text_missing 2; the reasons are in out/_rejects/): fix the input or the flags
    the rejects name, then rerun with --overwrite

A stage whose output is empty because its input was rejected (records of a corpus without
the text field, documents without a token) exits 1: its manifest and rejects are written
first, so nothing is lost. An input that holds nothing, or only what a stage leaves out on
purpose (redirects, empty texts), is a warning and exit 0: the run did what it was asked.

The checks are pure functions of a manifest (`documents_findings`, `examples_findings`);
`check_documents` and `check_examples` read the finished manifest, log the findings and give
the exit code (0 for a job only submitted, whose manifest comes later).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam import files
from pipelines.beam.documents import read_manifest
from pipelines.beam.runner import submitted_only
from schemas.checks import MAX_RECORD_BYTES
from schemas.manifest import DocumentsManifest
from schemas.rejects import REJECTS_DIR
from schemas.shards import PAIRS, TRUNCATED_TOKENS, ShardsManifest

# What each documents stage reads one at a time: its manifest's count, and its name.
_READ = {
    "wikipedia": ("pages", "page"),
    "books": ("input_files", "file"),
    "corpus": ("records", "record"),
    "dedup": ("input_documents", "document"),
}
# Why a documents stage keeps nothing of what it read, when it left all of it out on purpose.
_ALL_DROPPED = {
    "wikipedia": "the dumps hold no article with running text (redirects, disambiguation "
    "pages and other namespaces are left out): check that --input names an articles dump",
    "books": "no file holds running text: check that --input names the book files",
    "corpus": "every record's text was empty once cleaned: check that --text-field names the "
    "field that holds the text",
}
_WITHOUT_TOKENS = "document_without_tokens"
_NO_PARTNER = "no_partner_document"


@dataclass(frozen=True, slots=True)
class Finding:
    """One empty output, as one line; `failed` when the stage should exit 1."""

    line: str
    failed: bool = False


def _counted(counts: Mapping[str, int]) -> str:
    """{"redirect": 3, "disambiguation": 1} → "redirect 3, disambiguation 1"."""
    return ", ".join(f"{reason} {count}" for reason, count in counts.items() if count)


def _many(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def documents_findings(manifest: DocumentsManifest, output: str) -> list[Finding]:
    """A documents directory (wikipedia, books, corpus, dedup) that holds 0 documents."""
    counts = manifest.counts
    if counts.get("documents", 0):
        return []
    where = f"{output} holds 0 documents"
    count_name, noun = _READ.get(manifest.stage, ("records", "record"))
    read = counts.get(count_name, 0)
    rejected, dropped = _counted(manifest.rejected), _counted(manifest.dropped)
    if rejected:
        what = f"rejected {rejected}" + (f", left out {dropped}" if dropped else "")
        return [
            Finding(
                f"{where}: no {noun} read was kept ({read} read; {what}; the reasons are in "
                f"{output}/{REJECTS_DIR}/): fix the input or the flags the rejects name, then "
                "rerun with --overwrite",
                failed=True,
            )
        ]
    if manifest.stage == "dedup":
        return [
            Finding(
                f"{where}: its --documents directories hold none; rerun the stage that made "
                "them (its own WARNING says why it wrote none)"
            )
        ]
    if read and dropped:
        cause = _ALL_DROPPED.get(manifest.stage, "check the input")
        return [Finding(f"{where}: every {noun} read ({read}) was left out ({dropped}): {cause}")]
    return [
        Finding(
            f"{where}: its {_many(len(manifest.inputs), 'input file')} "
            f"{'holds' if len(manifest.inputs) == 1 else 'hold'} no {noun}s: "
            "check that --input names the right files"
        )
    ]


def examples_findings(
    manifest: ShardsManifest, output: str, heldout_fraction: float
) -> list[Finding]:
    """A shards directory with 0 examples, a split of 0 examples that was asked for, or a
    split of pairs with no NotNext (a split of one document)."""
    counts = manifest.counts
    documents = counts.get("documents", 0)
    made = sum(
        shards.samples for out in manifest.outputs.values() for shards in out.splits.values()
    )
    if not made:
        return [_no_examples(manifest, output, documents)]
    findings = truncation_findings(manifest, output)
    for name, out in sorted(manifest.outputs.items()):
        for split, shards in sorted(out.splits.items()):
            if shards.samples:
                if _one_class(manifest, shards.not_next):
                    findings.append(_is_next_only(f"{output}/{name}/{split}", shards.samples))
                continue
            if split == "heldout" and heldout_fraction > 0:
                findings.append(_no_heldout(f"{output}/{name}/{split}", counts, heldout_fraction))
            elif split == "train":
                findings.append(
                    Finding(
                        f"{output}/{name}/{split} holds 0 examples: every document went to the "
                        f"held-out split (--heldout-fraction {heldout_fraction}); lower it"
                    )
                )
    return findings


# Google's pair rule gathers sentences until a chunk reaches the length and trims the
# overshoot off, so ordinary text loses some of every pass this way (the demo's Wikipedia
# and books: 11.6 % at 128 tokens, 3.1 % at 512; docs/stages/examples.md). More than half
# means sentences longer than a sequence: most of the text never reaches an example.
MOST_TRUNCATED = 0.5


def truncation_findings(manifest: ShardsManifest, output: str) -> list[Finding]:
    """A split whose pairs lost more than MOST_TRUNCATED of their tokens to trimming."""
    findings = []
    for name, out in sorted(manifest.outputs.items()):
        for split, shards in sorted(out.splits.items()):
            dropped = manifest.counts.get(f"{name}/{split}/{TRUNCATED_TOKENS}", 0)
            total = dropped + shards.tokens
            if not total or dropped / total <= MOST_TRUNCATED:
                continue
            findings.append(
                Finding(
                    f"{output}/{name}/{split}: trimming pairs to {out.max_seq_length} tokens "
                    f"dropped {dropped:,} of their {total:,} tokens ({dropped / total:.1%}): "
                    "the documents hold sentences longer than a sequence (text without "
                    "sentence ends, one sentence a line run together): split such text into "
                    "sentences before the documents stage, or use --sequences full-sentences"
                )
            )
    return findings


def _no_examples(manifest: ShardsManifest, output: str, documents: int) -> Finding:
    where = f"{output} holds 0 examples"
    rejects = f"see {output}/{REJECTS_DIR}/"
    if documents and manifest.rejected.get(_WITHOUT_TOKENS, 0) >= documents:
        return Finding(
            f"{where}: every one of its {_many(documents, 'document')} was rejected "
            f"({_WITHOUT_TOKENS}: no sentence has a token after BERT normalization; {rejects}): "
            "check the documents, and that --vocab is a vocabulary made for them",
            failed=True,
        )
    if manifest.sequences == PAIRS and manifest.rejected.get(_NO_PARTNER, 0):
        return Finding(
            f"{where}: its {_many(documents, 'document')} made no pair (a NotNext pair takes "
            f"its second segment from another document of the same split; {rejects}): give "
            "more documents, or --sequences full-sentences"
        )
    rejected = _counted(manifest.rejected) or "none"
    return Finding(
        f"{where} from {_many(documents, 'document')} (rejected {rejected}; {rejects}): give "
        "more or longer documents"
    )


def _one_class(manifest: ShardsManifest, not_next: int) -> bool:
    """A split of pairs of which none is NotNext, for want of a partner document."""
    return manifest.sequences == PAIRS and not not_next and bool(manifest.rejected.get(_NO_PARTNER))


def _is_next_only(where: str, samples: int) -> Finding:
    return Finding(
        f"{where} holds IsNext pairs only ({_many(samples, 'example')}, not one NotNext): a "
        "NotNext pair takes its second segment from another document of the same split, and "
        f"this one had none (the {_NO_PARTNER} rejects), so next-sentence prediction trained "
        "or evaluated on it sees one class: give the split two or more documents (raise "
        "--heldout-fraction for the held-out split), or train with --objective mlm"
    )


def _no_heldout(where: str, counts: Mapping[str, int], fraction: float) -> Finding:
    documents = counts.get("documents", 0)
    held = counts.get("documents_heldout", 0)
    made = "" if not held else ", which made no example"
    return Finding(
        f"{where} holds 0 examples: --heldout-fraction {fraction} held out {held} of the "
        f"{documents} documents{made} (chosen by a hash of their id): raise "
        "--heldout-fraction or give more documents; without held-out shards `bertkit train` "
        "evaluates nothing"
    )


def report_findings(stage: str, findings: Sequence[Finding]) -> int:
    """Log each finding on a WARNING line of the stage's logger (`bertkit.STAGE`); the exit
    code: 1 if any says the stage failed, else 0."""
    logger = logging.getLogger(f"bertkit.{stage}")
    for finding in findings:
        logger.warning("%s", finding.line)
    return 1 if any(finding.failed for finding in findings) else 0


def check_documents(options: PipelineOptions, stage: str, output: str) -> int:
    """Say what a finished documents directory lacks (`documents_findings`); the exit code."""
    if submitted_only(options):
        return 0
    return report_findings(stage, documents_findings(read_manifest(output), output))


def check_examples(
    options: PipelineOptions, manifest_path: str, output: str, heldout_fraction: float
) -> int:
    """Say what a finished shards directory lacks (`examples_findings`); the exit code."""
    if submitted_only(options):
        return 0
    raw = files.read_file(manifest_path, MAX_RECORD_BYTES)
    manifest = ShardsManifest.from_json(raw.decode("utf-8"))
    return report_findings("examples", examples_findings(manifest, output, heldout_fraction))
