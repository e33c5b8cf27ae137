"""Error-bounded compression of embedding traffic: the SZ3 / ZFP codecs (compress/eb_codec.py) and a DLRM
trained on 4 gloo ranks with its embedding all-to-all compressed (compress/dlrm_train.py)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distscope.compress.dlrm_train import DlrmTrainConfig, train_worker
from distscope.compress.eb_codec import EbCodec, abs_bound, decode, encode, measure
from distscope.compress.launch import run_gloo
from distscope.errors import DistscopeError

pytest.importorskip("pysz")
pytest.importorskip("zfpy")


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(list(EbCodec)), bound=st.sampled_from([1e-1, 1e-2, 1e-3]),
       relative=st.booleans(), scale=st.sampled_from([1e-4, 1e-1, 10.0]),
       shape=st.sampled_from([(7,), (64, 16), (33, 3, 8)]), seed=st.integers(0, 2**16))
def test_every_element_within_the_bound(codec: EbCodec, bound: float, relative: bool, scale: float,
                                        shape: tuple[int, ...], seed: int) -> None:
    x = (np.random.default_rng(seed).normal(0, scale, shape)).astype(np.float32)
    y = decode(encode(x, codec, bound, relative=relative), codec, shape)
    assert y.shape == x.shape
    assert np.abs(x.astype(np.float64) - y).max() <= abs_bound(x, bound, relative) * (1 + 1e-5)


def test_smooth_data_compresses_and_noise_less() -> None:
    rng = np.random.default_rng(0)
    smooth = np.cumsum(rng.normal(0, 1e-3, (4096, 64)), axis=0).astype(np.float32)
    noise = rng.normal(0, 1.0, (4096, 64)).astype(np.float32)
    for codec in EbCodec:
        s, n = measure(smooth, codec, 1e-2, relative=True), measure(noise, codec, 1e-2, relative=True)
        assert s.ratio > n.ratio > 1.0, codec
        assert s.encode_GBps > 0 and s.decode_GBps > 0


def test_bad_inputs() -> None:
    with pytest.raises(DistscopeError, match="bound=0"):
        encode(np.ones(4, np.float32), EbCodec.SZ3, 0.0)
    with pytest.raises(DistscopeError, match="empty"):
        encode(np.ones(0, np.float32), EbCodec.ZFP, 1e-3)
    with pytest.raises(DistscopeError, match="codec='sz4'"):
        EbCodec.parse("sz4")


def test_compressed_embedding_all_to_all_converges_like_the_uncompressed_one() -> None:
    """Same init and batches on 4 gloo ranks; SZ3 at 1% of each chunk's range on the pooled embeddings and
    their gradients: the final loss within 1% of the uncompressed run's, with fewer bytes moved."""
    steps = 80
    base = run_gloo(train_worker, 4, DlrmTrainConfig(steps=steps), timeout_s=300)
    sz3 = run_gloo(train_worker, 4, DlrmTrainConfig(steps=steps, codec="sz3", bound=1e-2), timeout_s=300)

    def final(r: dict) -> float:
        return statistics.mean(r["losses"][-10:])

    assert final(base) < base["losses"][0] - 0.05  # it learns
    assert abs(final(sz3) / final(base) - 1) < 0.01
    assert sz3["a2a_bytes"] * 3 < base["a2a_bytes"]
