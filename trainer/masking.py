"""Dynamic masking: masked-LM predictions drawn afresh each epoch in the loader."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DynamicMasking:
    """How the loader draws masks (placeholder: filled in by the dynamic-masking work)."""

    rate: float = 0.15
