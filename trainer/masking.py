"""Dynamic masking: masked-LM predictions drawn afresh each epoch in the loader.

With `bertkit train --masking dynamic` the loader's collate undoes the masks a shard stores
(`restore_originals`: input_ids[masked_lm_positions] = masked_lm_ids; shards made with
`--masking none` store none) and draws new ones (`draw_masks`), by the static masker's rules
(pipelines/bert/masking.py, google-research/bert's `create_masked_lm_predictions`):

1. Candidates are the sequence's tokens except [CLS], [SEP], [PAD], [MASK] and [unusedN]
   (only the first two occur in bertkit's sequences; the others are left out in case a
   shard from elsewhere holds them), and never position 0. [UNK] is a candidate, as it is
   for Google's masker and the static one, so dynamic and static masks are drawn from the
   same tokens. With whole-word masking a candidate is a word: a piece and the `##` pieces
   right after it.
2. The number to predict is `min(max_predictions, max(1, round(n_tokens × rate)))`, n_tokens
   counting [CLS] and [SEP] as Google's does (round half to even, as Python's), and never
   more than the candidates. Without --max-predictions only the rate bounds it.
3. Candidates are visited in a random order: without whole words the first `count` are
   taken; with whole words a word that would overshoot the count is skipped and the visit
   goes on (Google's rule, so a sequence can end a piece or two short of the count).
4. Each chosen piece becomes [MASK], stays, or becomes a random token by the --mask-replace
   shares (80/10/10); with whole words the choice is made once per word and applied to all
   its pieces, as the static masker does. A random token is drawn from the vocabulary's
   `replaceable_ids` (never a special token). The labels are the original ids, at the
   chosen positions in ascending order.

**The draws** come from a counter-based hash, not a random generator with state: every
token gets 32 bits of splitmix64 output for (seed, epoch, sample key, position)
(`token_hashes`), the sample key being its position in its split (`RawSample.index`); in a
mix of sources (trainer/mix.py) the epoch is the sample's source's own and the key has the
source folded in (trainer/collate.py, SOURCE_KEY_SHIFT). So a sample's masks depend on
those four numbers only, not on the batch it lands in, the loader workers, the rank, the
world size or a resume, and a whole batch is drawn with a few numpy operations over its
(B, L) tokens. A token's rank key is its 32 bits, then its position
(the tie-break): the visit of rule 3 is in ascending rank keys of the candidates (of a
word's first piece). A second mix of a chosen piece's rank key gives the random token (its
low 32 bits, scaled to the pool by multiply-and-shift) and, that of the word's first piece,
the [MASK]/keep/random choice (its top 32 bits against the shares × 2**32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from schemas.batch import IGNORE_INDEX, PAD_MULTIPLE
from trainer.splitmix import GOLDEN, mix, mix_int

if TYPE_CHECKING:  # types only: the loader's workers need no tokenizer
    from pipelines.io.vocabulary import Vocabulary

_CHOICE = np.uint64(0xD1B54A32D192ED03)  # xor'd in before the second mix (choice, token)
_HALF = np.uint64(32)  # a rank key: 32 bits of hash, then 32 of position
_NOT_A_CANDIDATE = np.uint64(2**64 - 1)  # sorts after every candidate's key
_LOW_32 = np.uint64(0xFFFFFFFF)  # a rank key's position
_SHARE_SCALE = 1 << 32  # the choice is the hash's top 32 bits against shares × 2**32


@dataclass(frozen=True, slots=True, eq=False)
class DynamicMasking:
    """How the loader draws masks: the flags' values and what they need of the vocabulary.

    Plain numbers and three numpy arrays of one entry per vocabulary id: cheap to hand to
    the loader's worker processes with their config."""

    rate: float  # --mask-rate: share of a sequence's tokens predicted
    replace: tuple[float, float, float]  # --mask-replace: [MASK], kept, random shares
    whole_word: bool  # --whole-word-mask
    max_predictions: int | None  # --max-predictions; None: round(n_tokens × rate) only
    mask_id: int
    replaceable_ids: np.ndarray  # int64: the ids a random replacement takes
    is_continuation: np.ndarray  # bool per id: a `##` piece
    never_predicted: np.ndarray  # bool per id: [PAD] [CLS] [SEP] [MASK] [unusedN]

    def __post_init__(self) -> None:
        if not 0 < self.rate < 1:
            raise ValueError(f"--mask-rate {self.rate}: a share between 0 and 1, e.g. 0.15")
        if len(self.replace) != 3 or min(self.replace) < 0 or abs(sum(self.replace) - 1) > 1e-9:
            raise ValueError(
                f"--mask-replace {self.replace}: three shares for [MASK]/kept/random adding "
                "up to 1, e.g. (0.8, 0.1, 0.1)"
            )
        if self.max_predictions is not None and self.max_predictions < 1:
            raise ValueError(f"--max-predictions {self.max_predictions}: at least 1")
        if len(self.is_continuation) != len(self.never_predicted):
            raise ValueError("is_continuation and never_predicted must cover the same ids")
        if self.replace[2] > 0 and len(self.replaceable_ids) == 0:
            raise ValueError("the vocabulary has no token a random replacement may take")

    @classmethod
    def from_vocab(
        cls,
        vocab: Vocabulary,
        rate: float = 0.15,
        replace: tuple[float, float, float] = (0.8, 0.1, 0.1),
        whole_word: bool = False,
        max_predictions: int | None = None,
    ) -> DynamicMasking:
        """From a `pipelines.io.vocabulary.Vocabulary` and the flags' values (`replace` as
        trainer.config.mask_replace_shares gives it). [UNK] stays a candidate (module
        docstring, rule 1)."""
        never = np.zeros(len(vocab.is_continuation), dtype=bool)
        never[sorted(set(vocab.special_ids) - {vocab.unk_id})] = True
        return cls(
            rate=float(rate),
            replace=(float(replace[0]), float(replace[1]), float(replace[2])),
            whole_word=bool(whole_word),
            max_predictions=max_predictions,
            mask_id=int(vocab.mask_id),
            replaceable_ids=np.asarray(vocab.replaceable_ids, dtype=np.int64),
            is_continuation=np.asarray(vocab.is_continuation, dtype=bool),
            never_predicted=never,
        )

    @property
    def vocab_size(self) -> int:
        return len(self.is_continuation)

    def counts(self, n_tokens: np.ndarray) -> np.ndarray:
        """Predictions wanted per sequence of `n_tokens` (before the candidates bound them)."""
        wanted = np.maximum(1, np.round(np.asarray(n_tokens) * self.rate)).astype(np.int64)
        if self.max_predictions is not None:
            wanted = np.minimum(wanted, self.max_predictions)
        return wanted

    def max_predictions_for(self, max_seq_length: int) -> int:
        """The most predictions a sequence of up to `max_seq_length` tokens gets: the
        prediction slots a fixed shape (torch.compile, trainer.collate.FixedShape) needs."""
        return int(self.counts(np.array([max_seq_length]))[0])


class MaskedBatch(NamedTuple):
    """A batch's new predictions, laid out as schemas/batch.py wants them."""

    positions: np.ndarray  # (B, P) int64 ascending, 0 on padding; P a multiple of 8
    labels: np.ndarray  # (B, P) int64 the original ids there, IGNORE_INDEX on padding


def restore_originals(
    input_ids: np.ndarray, positions: np.ndarray, labels: np.ndarray, n_predictions: np.ndarray
) -> None:
    """Undo a shard's stored masks in place: input_ids[row, positions] = labels, for each
    row's first n_predictions slots (checked to lie inside the row's tokens beforehand)."""
    if not input_ids.flags.c_contiguous:
        raise ValueError("restore_originals writes input_ids in place: pass a C-contiguous array")
    real = np.arange(positions.shape[1]) < n_predictions[:, None]
    flat = positions + (np.arange(len(positions)) * input_ids.shape[1])[:, None]
    input_ids.put(flat[real], labels[real])


def draw_masks(
    masking: DynamicMasking,
    input_ids: np.ndarray,
    lengths: np.ndarray,
    keys: np.ndarray,
    seed: int,
    epoch: int | np.ndarray,
) -> MaskedBatch:
    """Choose and apply the predictions of a batch (the module docstring's rules 1 to 4):
    `input_ids` (B, L), the original tokens then [PAD], is masked in place; `lengths` are
    the rows' tokens and `keys` their sample keys."""
    if not input_ids.flags.c_contiguous:
        raise ValueError("draw_masks masks input_ids in place: pass a C-contiguous array")
    width = input_ids.shape[1]
    candidates = ~masking.never_predicted.take(input_ids)
    if not masking.never_predicted[0]:  # padding is 0, [PAD] in bertkit's vocabularies
        candidates &= np.arange(width) < lengths[:, None]
    # Position 0 is [CLS]; even a shard from elsewhere gets no prediction there (check_fields
    # refuses a stored one), so that a padding slot's position 0 never hides a real one.
    candidates[:, 0] = False
    hashes = token_hashes(seed, epoch, keys, width)
    counts = np.minimum(masking.counts(lengths), candidates.sum(axis=1, dtype=np.int64))
    row_starts = (np.arange(len(input_ids)) * width)[:, None]  # into the raveled (B, L)
    if masking.whole_word:
        positions, first_pieces, counts = _choose_whole_words(
            masking, input_ids, candidates, hashes, counts
        )
    else:
        positions = _choose_pieces(candidates, hashes, counts)
        first_pieces = positions
    # Every slot is worked on, padding too (position 0, its own token written back): a
    # (B, P) array is cheaper than picking the real slots out and putting them back.
    real = np.arange(positions.shape[1]) < counts[:, None]
    flat = positions + row_starts
    originals = input_ids.take(flat)
    piece = mix(_rank_keys(hashes, flat, positions) ^ _CHOICE)
    if first_pieces is positions:
        word = piece
    else:
        word = mix(_rank_keys(hashes, first_pieces + row_starts, first_pieces) ^ _CHOICE)
    choice = word >> _HALF  # the word's first piece decides for the whole word
    mask_share, keep_share, _ = masking.replace
    masked = real & (choice < np.uint64(round(mask_share * _SHARE_SCALE)))
    randomised = real & (choice >= np.uint64(round((mask_share + keep_share) * _SHARE_SCALE)))
    tokens = np.where(masked, masking.mask_id, originals)
    pool = masking.replaceable_ids
    if randomised.any():
        picks = ((piece & _LOW_32) * np.uint64(len(pool))) >> _HALF
        tokens = np.where(randomised, pool.take(picks.astype(np.int64)), tokens)
    input_ids.put(flat, tokens)
    return MaskedBatch(positions, np.where(real, originals, IGNORE_INDEX))


def token_hashes(seed: int, epoch: int | np.ndarray, keys: np.ndarray, width: int) -> np.ndarray:
    """(B, width) uint32, C-contiguous: 32 bits of splitmix64 per (seed, epoch, key,
    position). Row `key` is the stream of state mix(mix(mix(seed) ^ epoch) ^ key); its
    output at step n + 1 serves positions 2n (its low 32 bits) and 2n + 1 (its high ones).
    `epoch` is one for the batch, or (B,) one per row (a mix: each source's own epoch)."""
    if np.ndim(epoch) == 0:
        stream = np.uint64(mix_int(mix_int(seed) ^ int(epoch)))
    else:
        stream = mix(np.asarray(epoch, dtype=np.uint64) ^ np.uint64(mix_int(seed)))
    rows = mix(np.asarray(keys, dtype=np.uint64) ^ stream)
    steps = np.arange(1, (width + 1) // 2 + 1, dtype=np.uint64) * GOLDEN
    pairs = mix(rows[:, None] + steps).astype("<u8", copy=False)  # little-endian: low first
    hashes = pairs.view("<u4").astype(np.uint32, copy=False)
    return hashes if width % 2 == 0 else np.ascontiguousarray(hashes[:, :width])


def _rank_keys(hashes: np.ndarray, flat: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The rank keys (hash << 32 | position, uint64) of the tokens at `flat`, their raveled
    places in `hashes`."""
    ranks = hashes.take(flat).astype(np.uint64)
    ranks <<= _HALF
    ranks |= positions.astype(np.uint64)
    return ranks


def _choose_pieces(candidates: np.ndarray, hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(B, P): each row's `count` candidates of smallest rank key (hash, then position), in
    ascending positions, then zeros. A row takes every candidate whose hash is below its
    count-th smallest, T, then those at T in ascending positions (a tie: rare, one in 2**32
    pairs of tokens) up to the count. `hashes` is used up: non-candidates' become 2**32 - 1."""
    size = len(counts)
    positions = np.zeros((size, _slots(counts)), dtype=np.int64)
    most = int(counts.max(initial=0))
    if most == 0:
        return positions
    not_candidate = (~candidates).astype(np.uint32)
    np.negative(not_candidate, out=not_candidate)  # 1 → 2**32 - 1: last
    hashes |= not_candidate
    smallest = np.partition(hashes, most - 1, axis=1)[:, :most]
    smallest.sort(axis=1)
    threshold = smallest[np.arange(size), np.maximum(counts, 1) - 1]
    chosen = hashes <= threshold[:, None]  # at least `count` candidates each row
    chosen &= candidates  # not the non-candidates, even where T is 2**32 - 1
    places = np.flatnonzero(chosen)  # raveled, row by row, ascending
    if len(places) > counts.sum():  # a tie at T, in some row
        for row in np.flatnonzero(np.count_nonzero(chosen, axis=1) > counts):
            at_threshold = np.flatnonzero(chosen[row] & (hashes[row] == threshold[row]))
            below = int(np.count_nonzero(chosen[row])) - len(at_threshold)
            chosen[row, at_threshold[counts[row] - below :]] = False
        places = np.flatnonzero(chosen)
    # The j-th of row r goes to slot r·P + j, j being its index in `places` less the row's
    # first; it is at column place - r·L.
    rows = np.arange(size)
    slots = np.repeat(rows * positions.shape[1] - (np.cumsum(counts) - counts), counts)
    slots += np.arange(len(places))
    positions.put(slots, places - np.repeat(rows * chosen.shape[1], counts))
    return positions


def _choose_whole_words(
    masking: DynamicMasking,
    input_ids: np.ndarray,
    candidates: np.ndarray,
    hashes: np.ndarray,
    counts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions (B, P) ascending, each one's word's first piece (B, P), counts (B,)): the
    words visited in the order of their first piece's rank key, a word that would overshoot
    the count skipped (Google's rule), P the slots of the largest count."""
    size, width = input_ids.shape
    joins = np.zeros_like(candidates)  # a `##` piece right after a candidate: in its word
    joins[:, 1:] = candidates[:, :-1] & candidates[:, 1:]
    joins &= masking.is_continuation[input_ids]
    starts = candidates & ~joins
    ends = candidates.copy()
    ends[:, :-1] &= ~joins[:, 1:]
    first = np.flatnonzero(starts)  # raveled (B, L) positions, a word's first and last piece
    word_size = np.zeros(size * width, dtype=np.int64)
    word_size[first] = np.flatnonzero(ends) - first + 1  # at each word's first piece
    order = hashes.astype(np.uint64)  # a word's first piece: its rank key
    order <<= _HALF
    order |= np.arange(width, dtype=np.uint64)
    not_start = (~starts).astype(np.uint64)
    np.negative(not_start, out=not_start)  # any other token: all ones, last
    order |= not_start
    order.sort(axis=1)
    # The visit goes a window of columns at a time: most rows fill their count within the
    # first few words; a row with room left after the window goes on with the rest.
    room = counts.copy()
    words = np.count_nonzero(starts, axis=1)
    rows, done, window = np.arange(size), 0, 2 * int(counts.max(initial=0)) + 8
    taken = []
    while len(rows):
        part = order[rows, done : done + window]
        is_word = part != _NOT_A_CANDIDATE
        visit = (part & _LOW_32).astype(np.int64) + (rows * width)[:, None]
        sizes = np.where(is_word, word_size.take(np.where(is_word, visit, 0)), width + 1)
        left = room[rows]
        taken.append(visit[_visit(sizes, is_word, left)])
        room[rows] = left
        done += window
        rows, window = rows[(left > 0) & (words[rows] > done)], width
    chosen = np.sort(np.concatenate(taken))  # first pieces, ascending: so are their pieces
    chosen_size = word_size.take(chosen)
    deciding = np.repeat(chosen, chosen_size)  # each piece's word's first piece
    word_first_slot = np.repeat(np.cumsum(chosen_size) - chosen_size, chosen_size)
    rows, columns = np.divmod(deciding + np.arange(len(deciding)) - word_first_slot, width)
    counts = np.bincount(rows, minlength=size)
    slots = np.arange(len(rows)) - (np.cumsum(counts) - counts)[rows]
    positions = np.zeros((size, _slots(counts)), dtype=np.int64)
    first_pieces = np.zeros_like(positions)
    positions[rows, slots] = columns
    first_pieces[rows, slots] = deciding - rows * width
    return positions, first_pieces, counts


def _visit(sizes: np.ndarray, is_word: np.ndarray, room: np.ndarray) -> np.ndarray:
    """(B, K) bool: the words Google's loop takes, visiting `sizes` (B, K) in column order
    with `room` (B,) to fill (used up): a word that would overshoot is skipped.

    The loop, a few rounds over every row at once: a round takes, among the words not
    decided yet, those no bigger than the room left; the ones whose running total fits are
    taken (a prefix of the visit), the first that overshoots is skipped and the visit
    resumes after it in the next round, in the rows that still have room. The room left is
    then smaller than that word, so there are at most a word's size of rounds, and most rows
    are done after the first."""
    taken = np.zeros(sizes.shape, dtype=bool)
    active = np.arange(len(sizes))
    open_ = is_word
    while len(active):
        room_left = room[active][:, None]
        fits = open_ & (sizes <= room_left)  # a word bigger than the room: skipped for good
        total = np.cumsum(np.where(fits, sizes, 0), axis=1)
        take = fits & (total <= room_left)
        over = fits & ~take
        taken[active] |= take
        room[active] -= np.where(take, sizes, 0).sum(axis=1)
        again = np.flatnonzero(over.any(axis=1) & (room[active] > 0))
        over = over[again]
        over[np.arange(len(again)), np.argmax(over, axis=1)] = False  # the overshoot: skipped
        active, sizes, open_ = active[again], sizes[again], over
    return taken


def _slots(counts: np.ndarray) -> int:
    """The batch's prediction slots: its largest count rounded up to PAD_MULTIPLE."""
    return _round_up(max(int(counts.max(initial=0)), 1), PAD_MULTIPLE)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
