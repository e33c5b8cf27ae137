"""Training shape: what is trained per optimizer step, independent of how it is parallelized."""

from __future__ import annotations

import dataclasses

from distscope.dtypes import Precision
from distscope.errors import DistscopeError


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingShape:
    seq_len: int
    global_batch: int  # sequences per optimizer step
    precision: Precision = Precision.BF16

    def __post_init__(self) -> None:
        if self.seq_len < 1:
            raise DistscopeError(f"seq={self.seq_len} must be >= 1")
        if self.global_batch < 1:
            raise DistscopeError(f"global_batch={self.global_batch} must be >= 1")

    @property
    def tokens(self) -> int:
        return self.seq_len * self.global_batch
