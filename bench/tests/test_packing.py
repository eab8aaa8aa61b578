"""bench.packing's figures: its helpers on literal numbers, and one run on the sample.

The benchmark itself (two runs at 128 and 512, dupe factor 10 for pairs) never runs here.
"""

from __future__ import annotations

import pytest

from bench import packing


def test_padding_share_is_the_positions_without_a_token():
    assert packing.padding_share(250, 2, 128) == pytest.approx(1 - 250 / 256)
    assert packing.padding_share(256, 2, 128) == 0.0
    assert packing.padding_share(0, 0, 128) == 0.0  # an empty split pads nothing


def test_tree_bytes_counts_every_file_below(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.tar").write_bytes(b"1" * 100)
    (tmp_path / "a" / "y.json").write_bytes(b"2" * 7)
    assert packing.tree_bytes(tmp_path) == 107


def test_full_sentence_figures_on_the_sample(tmp_path, sample_documents, sample_vocab):
    documents = [str(d) for d in sample_documents]
    figures = packing.make_shards(documents, str(sample_vocab), tmp_path / "full", "128", "full")
    assert (figures["sequences"], figures["masking"], figures["dupe_factor"]) == (
        "full-sentences",
        "none",
        1,
    )
    seq128 = figures["lengths"]["seq128"]
    assert seq128["payload_bytes"] == 2 * seq128["tokens"]  # 8,000 ids: 2 bytes each
    assert seq128["bytes"] == packing.tree_bytes(tmp_path / "full" / "seq128")
    assert seq128["bytes_per_payload_byte"] == seq128["bytes"] / seq128["payload_bytes"]
    assert seq128["padding"] < packing.PADDING_TARGET
    # a sample's 18-byte header and 4-byte length at least, besides its ids
    assert seq128["overhead_per_sequence"] > 22
    rows = packing.report({"pairs": figures, "full": figures})
    assert rows[0][0] == "pairs seq128" and rows[1][3] == f"{figures['bytes']:,}"
