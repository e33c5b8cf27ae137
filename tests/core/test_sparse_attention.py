"""DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5; workload/spec.py SparseAttention, model/sparse_attention.py):
the keys a query attends to, the layer's FLOPs against an independent count, the indexer's share, context
parallelism's all-gathered latent, the config.json import, the verbs agreeing, and one-line refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distscope.cli import main
from distscope.dtypes import Precision
from distscope.errors import DistscopeError
from distscope.model.layer import cp_exchange, layer_cost
from distscope.plan import AttentionImpl, Recompute
from distscope.scenario import PlanFlags, SystemFlags, WorkloadFlags, build_scenario
from distscope.sim.consistency import agreement
from distscope.system.device import get_device
from distscope.workload.catalog import get_model
from distscope.workload.hf import load_hf_config
from distscope.workload.spec import SparseAttention

# transformers' GlmMoeDsaConfig defaults, which are zai-org/GLM-5's shapes (its config.json's architecture fields)
GLM_5 = {"model_type": "glm_moe_dsa", "vocab_size": 154880, "hidden_size": 6144, "intermediate_size": 12288,
         "moe_intermediate_size": 2048, "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64,
         "n_shared_experts": 1, "n_routed_experts": 256, "routed_scaling_factor": 2.5, "kv_lora_rank": 512,
         "q_lora_rank": 2048, "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192, "n_group": 1,
         "topk_group": 1, "num_experts_per_tok": 8, "norm_topk_prob": True, "max_position_embeddings": 202752,
         "tie_word_embeddings": False, "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32,
         "head_dim": 64, "first_k_dense_replace": 3, "num_nextn_predict_layers": 1, "indexer_rope_interleave": True}
# deepseek-ai/DeepSeek-V3.2-Exp's config.json: DeepSeek-V3's fields and the indexer's
DEEPSEEK_V32 = {"model_type": "deepseek_v32", "hidden_size": 7168, "intermediate_size": 18432,
                "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
                "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
                "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
                "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
                "max_position_embeddings": 163840, "tie_word_embeddings": False, "num_nextn_predict_layers": 1,
                "n_group": 8, "topk_group": 4, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
                "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128}
H100 = get_device("h100-sxm5-80gb")


def _write(tmp_path: Path, cfg: dict, name: str = "model") -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def _cost(spec, s: int, tp: int = 1, cp: int = 1):  # type: ignore[no-untyped-def]
    return layer_cost(spec, True, 1, s, tp, cp, False, AttentionImpl.FLASH, Recompute.NONE, Precision.BF16, H100)


@pytest.mark.parametrize("s", [1, 7, 2048, 2049, 5000, 131072])
def test_keys_per_query_is_the_mean_of_min_position_topk(s: int) -> None:
    sa = SparseAttention(topk=2048, index_heads=32, index_dim=128)
    assert sa.keys_per_query(s) == pytest.approx(sum(min(i, 2048) for i in range(1, s + 1)) / s)


@pytest.mark.parametrize("s", [4096, 131072])
def test_attention_flops_match_an_independent_count(s: int) -> None:
    """The layer's model FLOPs less the same layer's without DSA, counted here from the DeepSeek-V3.2 report's
    shapes, keys summed query by query: the absorbed core over min(i, topk) keys, the indexer over every key of
    the causal prefix, the loss's QKᵀ recompute over the selected keys and the indexer's backward over those
    keys."""
    spec = get_model("glm-5")
    m, sa, a = spec.mla, spec.sparse_attention, spec.heads
    assert m is not None and sa is not None
    dense = dataclasses.replace(spec, sparse_attention=None)
    keys = sum(min(i, sa.topk) for i in range(1, s + 1))
    core = 2 * a * keys * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    indexer = 2 * sa.index_heads * sa.index_dim * s * (s + 1) / 2
    loss = 2 * a * keys * (m.kv_lora_rank + m.qk_rope_head_dim)
    proj = 2 * s * (sa.index_heads * sa.index_dim * m.q_lora_rank + spec.hidden * (sa.index_dim + sa.index_heads))
    mla_core = 2 * a * s * s * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    indexer_bwd = 2 * 2 * sa.index_heads * sa.index_dim * keys  # over the selected keys only
    # forward + backward: the core at 3x its forward; the indexer's projections at 2x (their inputs are
    # detached: no input gradient); the scores and the loss's recompute forward only
    want = 3 * (core - mla_core) + 2 * proj + indexer + loss + indexer_bwd
    assert _cost(spec, s).model_flops - _cost(dense, s).model_flops == pytest.approx(want, rel=1e-9)


def test_long_sequences_cost_less_than_dense_mla_and_short_ones_more() -> None:
    """At 128K each query attends 2,048 keys instead of 64K on average; at 4K the absorbed core's 1,088-wide
    heads over 1,536 keys cost more than dense MLA's 448-wide ones over the causal half of 4,096."""
    spec = get_model("deepseek-v3.2")
    dense = dataclasses.replace(spec, sparse_attention=None)
    assert _cost(spec, 131072).fwd_s < 0.5 * _cost(dense, 131072).fwd_s
    assert _cost(spec, 4096).attn_fwd_s > _cost(dense, 4096).attn_fwd_s


def test_shared_indexer_layers_cost_their_share() -> None:
    """With 39 of 78 layers running their indexer, a layer's model FLOPs drop by half the indexer's own work
    (projections at 2x, scores, the loss's recompute, its backward), counted here; 78 of 78 is every layer."""
    spec, s = get_model("glm-5"), 32768
    sa, m = spec.sparse_attention, spec.mla
    assert sa is not None and m is not None
    keys = sum(min(i, sa.topk) for i in range(1, s + 1))
    own = (2 * 2 * s * (sa.index_heads * sa.index_dim * m.q_lora_rank + spec.hidden * (sa.index_dim + sa.index_heads))
           + 2 * sa.index_heads * sa.index_dim * s * (s + 1) / 2
           + 2 * spec.heads * keys * (m.kv_lora_rank + m.qk_rope_head_dim)
           + 2 * 2 * sa.index_heads * sa.index_dim * keys)

    def flops(n: int) -> float:
        assert sa is not None
        return _cost(dataclasses.replace(spec, sparse_attention=dataclasses.replace(sa, indexer_layers=n)), s).model_flops

    assert flops(78) == flops(0)
    assert flops(0) - flops(39) == pytest.approx(own / 2, rel=1e-9)


def test_context_parallelism_all_gathers_the_latent_and_the_indexer_keys() -> None:
    spec = get_model("glm-5")
    x = cp_exchange(spec, 4096, 1, 2)
    assert (x.nbytes, x.backward, x.overlapped) == (4096 * (512 + 64 + 128) * 2, 1, False)
    x = cp_exchange(dataclasses.replace(spec, sparse_attention=None), 4096, 1, 2)
    assert (x.nbytes, x.backward, x.overlapped) == (2 * 4096 * 64 * 192 * 2, 2, True)


def test_context_parallel_all_gather_is_exposed() -> None:
    """DSA's all-gather blocks before the core: all of its time is exposed, where ring attention's hides."""
    from distscope.model.estimate import estimate

    for name, exposed in (("glm-5", True), ("deepseek-v3", False)):
        sc = build_scenario(WorkloadFlags(model=name, seq=32768, global_batch=16),
                            SystemFlags(cluster="dgx-h100", gpus=256), PlanFlags(tp=1, pp=16, cp=16, ep=16, dp=1,
                                                                                micro_batch=1, schedule="1f1b"))
        r = estimate(sc.spec, sc.shape, sc.cluster, sc.plan)
        assert r.comm_total_s["cp"] > 0
        assert (r.breakdown_s["cp"] == pytest.approx(r.comm_total_s["cp"], rel=1e-6)) is exposed, name


@pytest.mark.parametrize("plan", [
    PlanFlags(tp=1, pp=2, cp=2, ep=4, dp=4, micro_batch=1, recompute="full", schedule="1f1b"),
    PlanFlags(tp=2, pp=1, cp=2, ep=4, dp=4, micro_batch=1, sequence_parallel=True),
    PlanFlags(tp=1, pp=2, vp=2, cp=4, ep=8, dp=2, micro_batch=1, schedule="interleaved-1f1b", precision="fp8"),
])
def test_simulation_agrees_with_the_estimate(tmp_path: Path, plan: PlanFlags) -> None:
    """A 4-layer GLM-5 from its config.json: the generated trace's simulation within 3% of the estimate."""
    cfg = dict(GLM_5, num_hidden_layers=4, first_k_dense_replace=1, num_nextn_predict_layers=0)
    sc = build_scenario(WorkloadFlags(model=_write(tmp_path, cfg), seq=16384, global_batch=16),
                        SystemFlags(cluster="dgx-h100", gpus=16), plan)
    a = agreement(sc)
    assert abs(a.rel_diff) <= 0.03, f"simulated {a.simulated_step_s} vs estimated {a.estimated_step_s}"


@pytest.mark.parametrize(("cfg", "catalog"), [(GLM_5, "glm-5"), (DEEPSEEK_V32, "deepseek-v3.2")])
def test_config_reproduces_the_catalog_entry(tmp_path: Path, cfg: dict, catalog: str) -> None:
    spec, entry = load_hf_config(_write(tmp_path, cfg)), get_model(catalog)
    skip = {"name", "source", "official_params", "official_params_precision", "mtp_layers"}
    assert all(getattr(spec, f.name) == getattr(entry, f.name) for f in dataclasses.fields(spec) if f.name not in skip)
    assert spec.mtp_layers == 1


@pytest.mark.parametrize(("extra", "full"), [
    # layer i (0-based) is full when max(i - offset + 1, 0) % freq == 0: 0, 1, 2 and 6, 10, ..., 74
    ({"index_topk_freq": 4, "index_skip_topk_offset": 3}, 3 + 18),
    ({"index_topk_freq": 2}, 2 + 38),  # transformers' default offset 2: 0, 1 and the odd layers 3, ..., 77
    ({"indexer_types": ["full", "shared"] * 39}, 39),
    ({"index_topk_pattern": "F" + "S" * 77}, 1),
    ({"index_topk_freq": 1}, 0),  # every layer runs its indexer: 0
    # zai-org/GLM-5.2's settings, with its per-layer FFN kinds
    ({"index_topk_freq": 4, "index_skip_topk_offset": 3, "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 75}, 21),
])
def test_glm52_shared_indexer_layers(tmp_path: Path, extra: dict, full: int) -> None:
    spec = load_hf_config(_write(tmp_path, dict(GLM_5, **extra)))
    assert spec.sparse_attention is not None and spec.sparse_attention.indexer_layers == full


@pytest.mark.parametrize(("extra", "needle"), [
    ({"indexer_types": ["full"] * 3}, "indexer_types"),
    ({"index_topk_pattern": "S" * 78}, "index_topk_pattern"),
    ({"indexer_types": ["full"] + ["skip"] * 77}, "indexer_types"),
    ({"index_topk_freq": 0}, "index_topk_freq=0"),
    ({"index_skip_topk_offset": -1}, "index_skip_topk_offset=-1"),
    ({"index_topk": 0}, "index_topk=0"),
    ({"moe_topk_extra": 1}, "moe_topk_extra=1"),
    ({"mlp_layer_types": ["dense", "sparse"] * 39}, "mlp_layer_types="),
])
def test_bad_indexer_fields_are_refused(tmp_path: Path, extra: dict, needle: str) -> None:
    with pytest.raises(DistscopeError, match=needle):
        load_hf_config(_write(tmp_path, dict(GLM_5, **extra)))


def test_sparse_attention_needs_mla() -> None:
    with pytest.raises(DistscopeError, match="needs mla"):
        dataclasses.replace(get_model("llama3-8b"), sparse_attention=SparseAttention(topk=8, index_heads=1,
                                                                                     index_dim=8))


def test_glm5_recipe_layout_estimates_and_serving_is_refused(capsys) -> None:  # type: ignore[no-untyped-def]
    """Megatron-Bridge's GLM-5.1 H100 recipe layout (perf_recipes/glm_moe_dsa/h100/glm5.py) is expressible;
    serving DSA is refused in one line, and the missing kernel table is named."""
    main(["estimate", "-m", "glm-5", "-c", "dgx-h100", "-n", "416", "--tp", "1", "--pp", "13", "--vp", "2",
               "--cp", "32", "--ep", "32", "--seq", "131072", "--global-batch", "520", "--micro-batch", "1",
               "--recompute", "full", "--distributed-optimizer", "--mtp-layers", "1", "--json"])
    out = capsys.readouterr()
    assert json.loads(out.out)["feasible"]  # the recipe runs on 80 GB H100s
    assert "DeepSeek Sparse Attention" in out.err and "data/kernels" in out.err
    with pytest.raises(SystemExit) as exc:
        main(["serve", "estimate", "-m", "glm-5", "-c", "dgx-h100", "-n", "32", "--tp", "8", "--pp", "4"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "DeepSeek Sparse Attention" in err


def test_megatron_arguments_ask_for_the_all_gather_context_parallelism_priced() -> None:
    from distscope.plan import Plan
    from distscope.search.emit import megatron_args
    from distscope.workload.training import TrainingShape

    shape = TrainingShape(seq_len=32768, global_batch=64)
    with_cp = megatron_args(Plan(dp=1, tp=1, pp=6, cp=8, ep=8, micro_batch=1), get_model("glm-5"), shape)
    assert with_cp[with_cp.index("--cp-comm-type") + 1] == "allgather"
    assert "--cp-comm-type" not in megatron_args(Plan(dp=8, tp=1, pp=6, cp=1, ep=8, micro_batch=1), get_model("glm-5"),
                                                 shape)


_ODD = [None, True, -1, 0, 1, 3, 2.5, "4", [], ["full"], "F" * 78, ["full"] * 78, {"a": 1}]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.dictionaries(st.sampled_from(["index_topk", "index_n_heads", "index_head_dim", "index_topk_freq",
                                        "index_skip_topk_offset", "index_topk_pattern", "indexer_types",
                                        "mlp_layer_types"]),
                       st.sampled_from(_ODD), min_size=1, max_size=3))
def test_indexer_fields_fuzz_give_a_spec_or_one_line(extra: dict) -> None:
    """Odd values in the indexer's fields: a model that prices, or one line naming the field; never a traceback."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        try:
            spec = load_hf_config(_write(Path(d), dict(GLM_5, num_hidden_layers=78, **extra)))
        except DistscopeError as exc:
            msg = str(exc)
            assert "\n" not in msg and any(k in msg for k in [*extra, "sparse_attention"]), msg
            return
    sa = spec.sparse_attention
    assert sa is not None and sa.topk >= 1 and 0 <= sa.indexer_layers < 78
    assert _cost(spec, 8192).fwd_s > 0


def test_tensor_parallel_indexer_gathers_its_inputs_and_all_reduces_its_target(tmp_path: Path) -> None:
    """With tp > 1 (sequence parallel) each DSA layer's forward all-gathers the indexer's inputs x and qr,
    tokens x (hidden + q_lora_rank) x 2 bytes (a trace's all-gather names each rank's shard of it), and all-reduces the loss's head-summed target over the selected
    keys, 4 bytes x tokens x min(topk, s), on the TP group; with tp = 1 neither."""
    from distscope.trace.from_plan import step_spec
    from distscope.trace.graph import CollKind

    cfg = dict(GLM_5, num_hidden_layers=4, first_k_dense_replace=1, num_nextn_predict_layers=0)
    path = _write(tmp_path, cfg)
    for tp, seq in ((2, 16384), (2, 1024), (1, 16384)):
        sc = build_scenario(WorkloadFlags(model=path, seq=seq, global_batch=16), SystemFlags(cluster="dgx-h100", gpus=16),
                            PlanFlags(tp=tp, pp=1, cp=1, ep=4, dp=16 // tp, micro_batch=1))
        layer = next(x for x in step_spec(sc.spec, sc.shape, sc.cluster, sc.plan).stages[0] if x.name == "layer1")
        ars = [op.size_bytes for op in layer.fwd_comm if op.kind is CollKind.ALL_REDUCE and op.group.name == "TP"]
        assert ars == ([4 * seq * min(2048, seq)] if tp > 1 else []), (tp, seq, ars)
        ags = [op.size_bytes for op in layer.fwd_comm if op.kind is CollKind.ALL_GATHER and op.group.name == "TP"]
        assert (seq * (6144 + 2048) * 2 // tp in ags) is (tp > 1), (tp, seq, ags)  # each rank's shard


def test_both_verbs_price_the_indexer_tp_collectives(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Without the all-reduce's (or the gather's) bytes both the estimate and the simulation get faster, by the
    same amount."""
    from distscope.model import sparse_attention

    cfg = dict(GLM_5, num_hidden_layers=4, first_k_dense_replace=1, num_nextn_predict_layers=0)
    sc = build_scenario(WorkloadFlags(model=_write(tmp_path, cfg), seq=16384, global_batch=16),
                        SystemFlags(cluster="dgx-h100", gpus=16), PlanFlags(tp=4, pp=1, cp=1, ep=4, dp=4, micro_batch=1))
    full = agreement(sc)
    for term in ("loss_all_reduce_bytes", "sp_gather_bytes"):
        with monkeypatch.context() as mp:
            mp.setattr(sparse_attention, term, lambda *a: 0.0)
            without = agreement(sc)
        est, sim = full.estimated_step_s - without.estimated_step_s, full.simulated_step_s - without.simulated_step_s
        assert est > 0 and sim == pytest.approx(est, rel=0.2), (term, est, sim)


@pytest.mark.parametrize(("plan", "needle"), [
    (PlanFlags(tp=2, pp=1, cp=1, ep=4, dp=8, micro_batch=1, sequence_parallel=False), "without sequence parallelism"),
    (PlanFlags(tp=1, pp=1, cp=1, ep=4, dp=16, micro_batch=1, recompute="selective-op"), "selective-op"),
])
def test_plans_dsa_cannot_run_are_refused(plan: PlanFlags, needle: str) -> None:
    with pytest.raises(DistscopeError, match=needle):
        build_scenario(WorkloadFlags(model="glm-5", seq=4096, global_batch=64), SystemFlags(cluster="dgx-h100", gpus=16),
                       plan)


def test_the_planner_keeps_sequence_parallelism_with_tensor_parallelism() -> None:
    from distscope.search.planner import search
    from distscope.search.space import SearchSpace
    from distscope.system.presets import get_cluster
    from distscope.workload.training import TrainingShape

    res = search(get_model("glm-5"), TrainingShape(seq_len=4096, global_batch=64), get_cluster("dgx-h100", 512),
                 SearchSpace(tp=(2, 4), pp=(4,), cp=(1,), ep=(64,)), top_k=5)
    assert res.top and all(c.plan.sp for c in res.top)
