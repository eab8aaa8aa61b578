"""What torch.load(weights_only=True) refused, said without torch's advice to load the file
another way: a named object for a file of more than tensors, the unpickler's own reason for
bytes that are no checkpoint."""

from __future__ import annotations

import datetime
import io
import pickle

import pytest
import torch

from pipelines.io.unpickling import load_failure, unpickling_refused


def _failure(data: bytes) -> BaseException:
    with pytest.raises((pickle.UnpicklingError, RuntimeError)) as raised:
        torch.load(io.BytesIO(data), weights_only=True)
    return raised.value


def _saved(value: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def test_an_object_to_rebuild_is_named() -> None:
    error = _failure(_saved({"when": datetime.date(2020, 1, 2)}))
    assert unpickling_refused(error) == "datetime.date"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"not a checkpoint", "UnpicklingError: Unsupported operand 110"),
        (
            _saved({"w": torch.zeros(2)})[:100],
            "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding "
            "central directory. This is an internal miniz error.",
        ),
    ],
)
def test_bytes_that_are_no_checkpoint_are_not_called_objects(data: bytes, said: str) -> None:
    error = _failure(data)
    assert unpickling_refused(error) is None
    reason = load_failure(error)
    assert reason.startswith(said)
    assert "weights_only" not in reason and "\n" not in reason and "\x1b" not in reason
