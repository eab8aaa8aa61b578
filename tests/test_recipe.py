"""trainer/recipe.py: the objective and masking a run trains with, from the flags and what the
shards hold; the combinations that cannot work refused with one line before any work."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainer.config import TrainConfig
from trainer.recipe import resolve_recipe, run_vocab
from trainer.source import DataConfigError


def source(sequences: str | None, masking: str | None, vocab: dict | None = None):
    """A source whose manifest says what kind of shards it lists (None: the field absent, as
    in every manifest of sentence pairs with static masks)."""
    fields = {"vocab": vocab or {}}
    if sequences is not None:
        fields["sequences"] = sequences
    if masking is not None:
        fields["masking"] = masking
    return SimpleNamespace(
        manifest=SimpleNamespace(**fields), manifest_url="s3://b/shards/manifest.json", shards=()
    )


def flags(**changes) -> TrainConfig:
    return dataclasses.replace(TrainConfig(shards="s", output="o"), **changes)


@pytest.mark.parametrize(
    ("sequences", "masking", "objective"),
    [
        (None, None, "mlm+nsp"),
        ("pairs", "static", "mlm+nsp"),
        ("full-sentences", "static", "mlm"),
    ],
)
def test_auto_follows_the_shards(sequences, masking, objective) -> None:
    recipe = resolve_recipe(flags(), source(sequences, masking))
    assert (recipe.objective, recipe.masking, recipe.dynamic) == (objective, "static", None)
    assert recipe.nsp == (objective == "mlm+nsp")


def test_mlm_on_pairs_is_taken_as_given() -> None:
    recipe = resolve_recipe(flags(objective="mlm"), source("pairs", "static"))
    assert (recipe.objective, recipe.masking) == ("mlm", "static")


def test_nsp_on_full_sentences_is_refused() -> None:
    with pytest.raises(DataConfigError) as error:
        resolve_recipe(flags(objective="mlm+nsp"), source("full-sentences", "none"))
    assert str(error.value) == (
        "--objective mlm+nsp: s3://b/shards/manifest.json holds full-sentence sequences, "
        "which have no next-sentence label; train them with --objective mlm (or auto)"
    )


def test_static_masking_on_unmasked_shards_is_refused() -> None:
    with pytest.raises(DataConfigError) as error:
        resolve_recipe(flags(masking="static"), source("pairs", "none"))
    assert str(error.value) == (
        "--masking static: s3://b/shards/manifest.json was made with --masking none and holds "
        "no masks; train it with --masking dynamic (or auto)"
    )


def test_dynamic_masking_needs_a_vocabulary(tmp_path: Path) -> None:
    with pytest.raises(DataConfigError, match="have no manifest naming it: pass --vocab DIR"):
        run_vocab(flags(masking="dynamic"), source("pairs", "none"))
    missing = tmp_path / "moved"
    with pytest.raises(DataConfigError) as error:
        run_vocab(flags(masking="dynamic"), source("pairs", "none", {"path": str(missing)}))
    assert f"cannot read the vocabulary at {missing}" in str(error.value)
    assert str(error.value).endswith("; if it moved, pass --vocab DIR")


def test_dynamic_masking_refuses_another_vocabulary(sample_vocab: Path) -> None:
    record = {"path": str(sample_vocab), "sha256": "0" * 64}
    with pytest.raises(DataConfigError) as error:
        run_vocab(flags(masking="dynamic"), source("pairs", "none", record))
    assert str(error.value).startswith(f"--masking dynamic: the vocabulary at {sample_vocab} has")
    assert "the shards were made with 0000000000000000" in str(error.value)


def test_flags_that_shape_dynamic_masks_are_refused_with_static_masking() -> None:
    with pytest.raises(ValueError, match="--mask-rate applies to --masking dynamic, not static"):
        flags(masking="static", mask_rate=0.3).validate()
    with pytest.raises(ValueError, match="three whole percents"):
        flags(mask_replace="80/20").validate()
    flags(masking="dynamic", mask_rate=0.3, mask_replace="100/0/0").validate()


@pytest.mark.parametrize(
    ("change", "flag"),
    [
        ({"mask_rate": 0.3}, "--mask-rate"),
        ({"whole_word_mask": True}, "--whole-word-mask"),
        ({"max_predictions": 5}, "--max-predictions"),
        ({"mask_replace": "100/0/0"}, "--mask-replace"),
    ],
)
def test_flags_that_shape_dynamic_masks_are_refused_where_auto_means_static(change, flag):
    """They were ignored: `--mask-rate 0.3` without --masking trained the stored 15 %."""
    with pytest.raises(DataConfigError) as refused:
        resolve_recipe(flags(**change), source(None, None))
    assert str(refused.value) == (
        f"{flag} shapes masks drawn with --masking dynamic, and s3://b/shards/manifest.json "
        "holds stored masks, which --masking auto trains with as they are: pass --masking "
        f"dynamic to draw new ones, or leave {flag} out"
    )


def test_static_masking_checks_a_vocab_given_against_the_shards(sample_vocab: Path) -> None:
    """--vocab is not ignored with static masks: one the shards were not made with is
    refused, as with dynamic masking; with "auto" resolving to static too."""
    from pipelines.io.vocabulary import load_vocab

    sha256 = load_vocab(str(sample_vocab)).sha256
    other = {"path": "elsewhere", "sha256": "0" * 64}
    for masking in ("static", "auto"):
        with pytest.raises(DataConfigError) as error:
            resolve_recipe(
                flags(masking=masking, vocab=str(sample_vocab)), source(None, None, other)
            )
        assert str(error.value) == (
            f"--vocab {sample_vocab}: the vocabulary at {sample_vocab} has vocab.txt sha256 "
            f"{sha256}, the shards were made with {'0' * 64}: give the shards' vocabulary, or "
            "leave --vocab out (--masking static reads none)"
        )
    same = {"path": "elsewhere", "sha256": sha256}
    recipe = resolve_recipe(
        flags(masking="static", vocab=str(sample_vocab)), source(None, None, same)
    )
    assert (recipe.masking, recipe.dynamic) == ("static", None)


def test_static_masking_refuses_a_vocab_it_cannot_check(tmp_path: Path) -> None:
    with pytest.raises(DataConfigError) as error:
        resolve_recipe(flags(vocab=str(tmp_path)), source(None, None, {"path": "v"}))
    assert str(error.value) == (
        f"--vocab {tmp_path}: --masking static reads no vocabulary, and the shards' manifest "
        "records no vocab.txt sha256 to check it against: leave --vocab out"
    )


def test_a_vocab_given_is_the_one_checkpoints_record(tmp_path: Path) -> None:
    from trainer.recipe import checkpoint_vocab_record

    record = {"path": "../vocab", "sha256": "a" * 64}
    shards = source(None, None, record)
    checkpoints = str(tmp_path / "run" / "checkpoints")
    moved = str(tmp_path / "moved-vocab")
    assert checkpoint_vocab_record(shards, checkpoints, moved) == {
        "path": "../../moved-vocab",
        "sha256": "a" * 64,
    }
