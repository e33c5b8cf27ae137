"""DeepSeek-V4 (ModelSpec.compressed_attention, residual_streams): keys per query against a brute-force count,
parameters against the reference implementation's weight shapes, the Hugging Face import and its bad input,
the layer's cost, and the verbs that refuse what they do not model."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from distscope.dtypes import Precision, Scaling
from distscope.errors import DistscopeError
from distscope.model.estimate import estimate
from distscope.model.layer import Mixer, _mixer_layer_cost, layer_cost
from distscope.model.refusal import refusal
from distscope.plan import AttentionImpl, Plan, Recompute
from distscope.search.frameworks import Framework, unsupported
from distscope.serve.context import check_lengths
from distscope.system.device import get_device
from distscope.system.presets import get_cluster
from distscope.trace.from_plan import step_spec
from distscope.workload import get_model
from distscope.workload.hf import load_hf_config
from distscope.workload.params import total_params
from distscope.workload.spec import CompressedKind
from distscope.workload.training import TrainingShape

H100 = get_device("h100-sxm5-80gb")
RATIOS = [0, 0] + [4, 128] * 20 + [4, 0]  # the checkpoint's list: 43 layers and the MTP layer's entry
# deepseek-ai/DeepSeek-V4-Flash config.json (its architecture fields)
FLASH = {
    "model_type": "deepseek_v4", "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64,
    "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_lora_rank": 1024,
    "o_groups": 8, "vocab_size": 129280, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 6,
    "moe_intermediate_size": 2048, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
    "sliding_window": 128, "compress_ratios": RATIOS, "hc_mult": 4, "hc_sinkhorn_iters": 20, "num_hash_layers": 3,
    "expert_dtype": "fp4", "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": True,
    "routed_scaling_factor": 1.5, "tie_word_embeddings": False, "max_position_embeddings": 1048576,
}


def _write(tmp_path: Path, cfg: dict, name: str = "m") -> str:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


@pytest.mark.parametrize("s", [1, 3, 127, 128, 129, 512, 2047, 2048, 2049, 4096, 8191, 20000])
def test_keys_per_query_counts_what_the_reference_selects(s: int) -> None:
    """The closed form against the reference's index sets, counted query by query."""
    ca = get_model("deepseek-v4-flash").compressed_attention
    i = np.arange(1, s + 1)
    window = np.minimum(i, ca.window)
    brute = {CompressedKind.SLIDING: window, CompressedKind.HEAVY: window + i // ca.heavy_ratio,
             CompressedKind.SPARSE: window + np.minimum(i // ca.sparse_ratio, ca.topk)}
    for kind, keys in brute.items():
        assert ca.keys_per_query(kind, s) == pytest.approx(keys.mean(), rel=1e-12)


def _reference_params(cfg: dict) -> int:
    """Every weight of the reference's Transformer (inference/model.py: Block, Attention, Compressor, Indexer,
    MoE, the hyper-connection parameters and the output head), shape by shape; the router's bias and the
    hash layers' token table are left out (a correction bias and a non-trainable lookup)."""
    h, a, d, q_r, o_r, g = (cfg[k] for k in ("hidden_size", "num_attention_heads", "head_dim", "q_lora_rank",
                                             "o_lora_rank", "o_groups"))
    n, E, f, V = cfg["hc_mult"], cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["vocab_size"]
    ih, idim = cfg["index_n_heads"], cfg["index_head_dim"]

    def compressor(ratio: int, width: int) -> list[tuple[int, ...]]:
        c = 2 if ratio == 4 else 1
        return [(ratio, c * width), (c * width, h), (c * width, h), (width,)]

    total = 2 * V * h + h + n * n * h + n + 1  # embed, head, norm, hc_head fn / base / scale
    for ratio in cfg["compress_ratios"][:cfg["num_hidden_layers"]]:
        shapes = [(a,), (q_r, h), (q_r,), (a * d, q_r), (d, h), (d,), (g * o_r, a * d // g), (h, g * o_r)]
        if ratio:
            shapes += compressor(ratio, d)
        if ratio == 4:
            shapes += [(ih * idim, q_r), (ih, h), *compressor(4, idim)]
        shapes += [(E, h)] + [(f, h), (h, f), (f, h)] * (E + cfg["n_shared_experts"]) + [(h,), (h,)]
        shapes += [((2 + n) * n, n * h)] * 2 + [((2 + n) * n,)] * 2 + [(3,)] * 2
        total += sum(int(np.prod(s)) for s in shapes)
    return total


def test_parameters_match_the_reference_shapes_and_the_model_card(tmp_path: Path) -> None:
    cfg = {k: v for k, v in FLASH.items() if k != "num_nextn_predict_layers"}
    spec = load_hf_config(_write(tmp_path, cfg))
    assert total_params(spec) == _reference_params(cfg)
    tiny = dict(cfg, hidden_size=256, num_hidden_layers=6, num_attention_heads=16, q_lora_rank=128, o_lora_rank=128,
                o_groups=4, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=512, vocab_size=512,
                index_topk=16, compress_ratios=[0, 0, 4, 128, 4, 128, 0, 0])
    assert total_params(load_hf_config(_write(tmp_path, tiny, "tiny"))) == _reference_params(tiny)
    assert total_params(get_model("deepseek-v4-flash")) == pytest.approx(284e9, rel=0.01)  # the card: 284B


def test_import_matches_the_catalog(tmp_path: Path) -> None:
    spec = load_hf_config(_write(tmp_path, dict(FLASH, num_nextn_predict_layers=1)))
    cat = get_model("deepseek-v4-flash")
    assert spec.mtp_layers == 1 and spec.residual_streams == 4
    skip = {"name", "source", "official_params", "official_params_precision", "mtp_layers"}
    assert {k: v for k, v in dataclasses.asdict(spec).items() if k not in skip} == \
        {k: v for k, v in dataclasses.asdict(cat).items() if k not in skip}
    ca = spec.compressed_attention
    assert (spec.layers - ca.sparse_layers - ca.heavy_layers, ca.sparse_layers, ca.heavy_layers) == (2, 21, 20)
    # transformers' native form: layer_types, with compress_rates naming each type's ratio
    types = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    native = {k: v for k, v in FLASH.items() if k != "compress_ratios"}
    native["layer_types"] = [types[r] for r in RATIOS[:43]]
    native["compress_rates"] = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    assert load_hf_config(_write(tmp_path, native, "native")).compressed_attention == ca


@pytest.mark.parametrize(("change", "says"), [
    ({"compress_ratios": [0, 4]}, "compress_ratios=[0, 4] must list an integer >= 0 for each of the 43 layers"),
    ({"compress_ratios": [0] * 42 + [-4]}, "compress_ratios="),
    ({"num_key_value_heads": 8}, "num_key_value_heads=8"),
    ({"compress_ratios": [0, 64] + [4, 128] * 21}, "heavy ratios [64, 128]"),
    ({"n_group_experts": 4}, "n_group_experts=4 is an MoE field"),
    ({"o_groups": 6}, "o_groups"),
    ({"index_topk": 0}, "index_topk=0"),
    ({"num_experts_per_tok": 300}, "moe.top_k=300 must be in 1..experts=256"),
    ({"mlp_only_layers": [0, 1]}, "mlp_only_layers=[0, 1]"),
    ({"layer_types": ["sliding_attention", "full_attention"] * 22}, "layer_types entry"),
    ({"layer_types": ["compressed_sparse_attention"] * 43, "compress_rates": {"compressed_sparse_attention": "4"}},
     "compress_rates['compressed_sparse_attention']"),
])
def test_bad_configs_get_one_line(tmp_path: Path, change: dict, says: str) -> None:
    cfg = dict(FLASH, **change)
    if "layer_types" in change:
        cfg.pop("compress_ratios")
    with pytest.raises(DistscopeError) as err:
        load_hf_config(_write(tmp_path, cfg))
    assert says in str(err.value) and "\n" not in str(err.value)


def _args(spec, s: int = 4096, tp: int = 1):
    return (spec, True, 1, s, tp, 1, False, AttentionImpl.FLASH, Recompute.NONE, Precision.BF16, H100, 0, 1.0,
            False, Scaling.NONE, 8)


def test_the_layer_is_the_mean_over_its_attention_kinds() -> None:
    spec = get_model("deepseek-v4-flash")
    whole = layer_cost(*_args(spec))
    parts = {m: _mixer_layer_cost(*_args(spec), m) for m in (Mixer.SLIDING, Mixer.SPARSE, Mixer.HEAVY)}
    want = (2 * parts[Mixer.SLIDING].model_flops + 21 * parts[Mixer.SPARSE].model_flops
            + 20 * parts[Mixer.HEAVY].model_flops) / 43
    assert whole.model_flops == pytest.approx(want, rel=1e-12)
    # the sparse layer's core FLOPs over the sliding one's: its compressed keys (and the indexer's scores)
    extra = parts[Mixer.SPARSE].model_flops - parts[Mixer.SLIDING].model_flops
    ca = spec.compressed_attention
    core = 3 * 2.0 * 64 * 4096 * ca.compressed_per_query(CompressedKind.SPARSE, 4096) * 2 * 512
    assert extra > core


def test_attention_grows_slower_than_the_sequence() -> None:
    """Per token, DeepSeek-V4's attention work barely grows from 4K to 64K tokens (window + top-k keys in CSA,
    s/128 entries in HCA), while a dense MQA twin's grows with s."""
    spec = get_model("deepseek-v4-flash")
    dense = dataclasses.replace(spec, compressed_attention=None, residual_streams=1)

    def per_token(m, s: int) -> float:
        return layer_cost(*_args(m, s)).model_flops / s

    assert per_token(spec, 65536) < 1.15 * per_token(spec, 4096)
    assert per_token(dense, 65536) > 3 * per_token(dense, 4096)


def test_hyper_connections_cost_residual_traffic_and_wider_sends() -> None:
    spec = get_model("deepseek-v4-flash")
    plain = dataclasses.replace(spec, residual_streams=1)
    assert layer_cost(*_args(spec)).fwd_s > layer_cost(*_args(plain)).fwd_s
    shape, cluster = TrainingShape(global_batch=64, seq_len=4096), get_cluster("dgx-h100", 32)
    plan = Plan(dp=8, pp=4, ep=8, distributed_optimizer=True, stage_layers=(11, 11, 11, 10))
    hc, one = estimate(spec, shape, cluster, plan), estimate(plain, shape, cluster, plan)
    assert hc.comm_total_s["pp"] == pytest.approx(4 * one.comm_total_s["pp"], rel=0.05)  # n·h per token
    assert hc.memory.activations_bytes > one.memory.activations_bytes


def test_layouts_and_verbs_it_does_not_model_are_refused() -> None:
    spec = get_model("deepseek-v4-flash")
    assert refusal(spec, Plan(dp=8, ep=8)) is None
    assert "cp=2" in refusal(spec, Plan(dp=4, cp=2, ep=8))
    assert "tp=2" in refusal(spec, Plan(dp=4, tp=2, ep=8))  # replicated projections: not modelled
    assert "selective-op" in refusal(spec, Plan(dp=8, recompute=Recompute.SELECTIVE_OP))
    with pytest.raises(DistscopeError, match="invalid plan: cp=2"):
        estimate(spec, TrainingShape(global_batch=64, seq_len=4096), get_cluster("dgx-h100", 64), Plan(dp=4, cp=2, ep=8,
                                                                                                    pp=8))
    with pytest.raises(DistscopeError, match="serving DeepSeek-V4's compressed attention"):
        check_lengths(spec, 128, 128, None)
    with pytest.raises(DistscopeError, match="does not model DeepSeek-V4 compressed attention"):
        step_spec(spec, TrainingShape(global_batch=16, seq_len=4096), get_cluster("dgx-h100", 8), Plan(dp=8))
    why = unsupported(Framework.MEGATRON, Plan(dp=8, ep=8), spec, H100)
    assert any("DeepSeek-V4" in w for w in why)


def test_model_flops_match_megatrons_count_for_a_published_run() -> None:
    """Megatron Bridge's DeepSeek-V4-Flash verification card (examples/model_verification_cards/deepseek-v4-flash/
    card.yaml, pretrain on 64 GB200, TP1 PP8 EP8, GBS 256 x 4096 tokens, MTP on): 142.910 model TFLOP/s per GPU
    over 10,415.76 ms steps, Megatron-Core's own FLOP formula for DSv4. distscope's count of the same step
    (every GEMM, the core over the keys each query attends, the indexer's scores, the MTP layer) is an
    independent derivation; nothing here was fitted to it. Its step time is not compared: the card calls
    functional runs' timings sanity checks, not tuned results."""
    megatron = 142.910e12 * 64 * 10.41576
    spec = dataclasses.replace(get_model("deepseek-v4-flash"), mtp_layers=1)
    # Megatron Bridge's even DSv4 split (set_deepseek_v4_pipeline_model_parallel_layout): 43 = 3 x 6 + 5 x 5
    got = estimate(spec, TrainingShape(global_batch=256, seq_len=4096), get_cluster("dgx-b200", 64),
                   Plan(dp=8, pp=8, ep=8, distributed_optimizer=True, stage_layers=(6, 6, 6, 5, 5, 5, 5, 5))).model_flops
    assert got == pytest.approx(megatron, rel=0.03)


def test_the_kernel_loads_its_padded_index_width() -> None:
    """The sparse kernel's time follows the fixed width of its index set, not the mean keys a query may see."""
    ca = get_model("deepseek-v4-flash").compressed_attention
    assert ca.kernel_keys(CompressedKind.SPARSE, 4096) == 128 + 512
    assert ca.kernel_keys(CompressedKind.HEAVY, 4096) == 128 + 32
    assert ca.kernel_keys(CompressedKind.SLIDING, 64) == 64
    for kind in CompressedKind:
        assert ca.kernel_keys(kind, 4096) >= ca.keys_per_query(kind, 4096)


def test_its_memory_does_not_follow_an_unfused_attention_plan() -> None:
    """DeepSeek-V4's layers run their own fused sparse kernels whatever the plan's attention implementation, so
    an unfused plan keeps no s x s scores."""
    spec = get_model("deepseek-v4-flash")
    shape, cluster = TrainingShape(global_batch=64, seq_len=4096), get_cluster("dgx-b200", 32)
    fused, unfused = (estimate(spec, shape, cluster, Plan(dp=8, pp=4, ep=8, distributed_optimizer=True, attention=a,
                                                          stage_layers=(11, 11, 11, 10)))
                      for a in (AttentionImpl.FLASH, AttentionImpl.UNFUSED))
    assert unfused.memory.activations_bytes == fused.memory.activations_bytes


def test_an_uneven_pipeline_without_a_split_is_refused_not_truncated() -> None:
    """43 layers on pp=8 with no stage_layers: the estimator used to price 8 x 5 = 40 layers through the API."""
    spec = get_model("deepseek-v4-flash")
    shape, cluster = TrainingShape(global_batch=64, seq_len=4096), get_cluster("dgx-b200", 64)
    with pytest.raises(DistscopeError, match=r"layers=43 not divisible by pp\*vp=8: give the plan's stage_layers"):
        estimate(spec, shape, cluster, Plan(dp=8, pp=8, ep=8, distributed_optimizer=True))


@pytest.mark.parametrize("s", [1, 3, 4])
def test_a_sequence_shorter_than_the_compression_ratio_has_no_indexer_gemm(s: int) -> None:
    """Below CSA's ratio of 4 there are no compressed keys: the indexer scores nothing (its GEMM had N = 0 and
    divided by zero), and the layer's cost stays finite and grows with the sequence."""
    spec = get_model("deepseek-v4-flash")
    cost = layer_cost(*_args(spec, s))
    assert 0 < cost.fwd_s < layer_cost(*_args(spec, 64)).fwd_s
