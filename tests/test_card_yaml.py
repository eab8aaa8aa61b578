"""The dataset card's YAML header reads back, through `yaml.safe_load` and huggingface_hub's card
parser, exactly the licence and name strings it was given; `--license` refuses control
characters (issue 37 item 9)."""

from __future__ import annotations

import argparse
import re

import pytest
import yaml
from huggingface_hub import DatasetCard

from pipelines.corpus.config import spdx_expression
from pipelines.examples.card import card_header, source_terms
from schemas.manifest import DocumentsManifest

# Each of these passes the SPDX syntax check (or could stand in an older manifest) and is read
# by a plain YAML scalar as something else: octal 8, 31, a float, a date, True, None, None;
# the last three hold characters that `str.split()` and YAML take for whitespace or breaks.
AWKWARD = [
    "010",
    "0x1F",
    "1.0",
    "2024-01-01",
    "yes",
    "null",
    "~",
    "Acme\x1cTerms",
    "Acme\x85Terms",
    "Acme\u2028Terms",
    'say "hi" \\ #1: ok',
    "\ufeffBOM",
    "\x1cAcme\x85",
]


def corpus_manifest(license_given: str) -> DocumentsManifest:
    return DocumentsManifest(
        stage="corpus",
        inputs=[{"path": "c.jsonl", "bytes": 10}],
        config={"license": license_given},
        counts={"documents": 2, "text_bytes": 50},
        dropped={},
        rejected={},
        failed_inputs=[],
        files=[],
    )


def header_text(license_given: str, pretty_name: str) -> str:
    terms = source_terms("docs", corpus_manifest(license_given))
    return "\n".join(["---", *card_header([terms], 1500, pretty_name), "---", "", "# Card", ""])


@pytest.mark.parametrize("given", AWKWARD)
def test_every_scalar_reads_back_as_the_string_written(given: str) -> None:
    text = header_text(given, given)
    header = yaml.safe_load(re.match(r"---\n(.*?)\n---\n", text, re.S).group(1))
    assert header["license"] == ["other"]
    assert header["license_name"] == given
    assert header["pretty_name"] == given
    assert header["size_categories"] == ["1K<n<10K"]
    assert DatasetCard(text, ignore_metadata_errors=False).data.to_dict() == header


def test_plain_words_stay_plain_and_hub_ids_are_lowercased() -> None:
    text = header_text("CC-BY-4.0", "BERT examples of c (seq128)")
    assert "license:\n- cc-by-4.0\n" in text
    assert "pretty_name: BERT examples of c (seq128)\n" in text
    assert 'license_name: "010"\n' in header_text("010", "x")


@pytest.mark.parametrize("given", ["MIT\x1cOR Apache-2.0", "MIT\x85", "MIT\u2028OR X", "MIT\tOR X"])
def test_the_licence_check_refuses_control_and_separator_characters(given: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected an SPDX license"):
        spdx_expression(given)


def test_the_licence_check_takes_spaces_between_ids() -> None:
    assert spdx_expression(" MIT OR ( Apache-2.0 AND X )") == " MIT OR ( Apache-2.0 AND X )"
