"""`trainer.train` with fp16's loss scale starting at 2^20, which overflows the tiny model's
first steps on the sample shards: torchrun runs this module (tests/test_fp16.py), so that
every process skips the same steps without a test hook in the trainer."""

from __future__ import annotations

from trainer import precision, train

OVERFLOWING_SCALE = 2.0**20

if __name__ == "__main__":
    precision.INITIAL_SCALE = OVERFLOWING_SCALE
    train.main()
