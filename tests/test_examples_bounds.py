"""`bertkit examples` at the edges: a corpus of one sentence, flags that mean nothing, and
documents or sentences of any length in bounded memory (issue 23)."""

from __future__ import annotations

import json

from tests.test_examples import literal_document, load_manifest, run_examples, write_documents

# --- a corpus of one sentence -------------------------------------------------------------


def test_a_corpus_of_one_sentence_runs_and_says_why_it_made_no_example(
    tmp_path, sample_vocab, capsys
):
    # Its one chunk needs a NotNext partner in every pass, and there is no other document:
    # masking got no input at all, and `np.concatenate` of nothing crashed the stage.
    documents = write_documents(
        tmp_path / "documents", [literal_document("t/solo", "A single sentence is all there is.")]
    )
    output = tmp_path / "shards"
    flags = ("--max-seq-length", "32", "--dupe-factor", "2", "--heldout-fraction", "0")
    assert run_examples([documents], sample_vocab, output, *flags) == 0
    manifest = load_manifest(output)
    assert manifest.rejected == {"no_partner_document": 2}  # once per pass
    assert (manifest.counts["documents"], manifest.counts["documents_with_one_sentence"]) == (1, 1)
    assert {split: s.samples for split, s in manifest.outputs["seq32"].splits.items()} == {
        "train": 0,
        "heldout": 0,
    }
    rejects = [
        json.loads(line)
        for name in manifest.rejects_files
        for line in (output / name).read_text().splitlines()
    ]
    assert [(r["id"], r["reason"], r["position"]) for r in rejects] == [
        ("t/solo", "no_partner_document", "pass 0, group 0"),
        ("t/solo", "no_partner_document", "pass 1, group 0"),
    ]
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{output}/manifest.json: no example was made: each split needs at least two documents "
        "(a NotNext pair takes its second segment from another document; see the rejects)"
    )
