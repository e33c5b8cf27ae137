"""Writes data/evidence/training_runs.csv from values transcribed from public sources.

Every number below was read in the source named in README.md (document path + commit, table); this
script only does the arithmetic that turns each source's own metric into seconds per optimizer step,
so that every derivation can be audited. Run it from the repository root:

    python data/evidence/build_training_runs.py

It is a provenance record, not part of the package; tests/core/test_evidence_data.py checks the CSV it
writes (columns, sources, pairs, and that each step time re-derives from the `reported` metric).
"""

from __future__ import annotations

import csv
from pathlib import Path

OUT = Path(__file__).with_name("training_runs.csv")

# The contract's columns, in order, are the header of the public set (data/validation/README.md)
with (Path(__file__).parents[1] / "validation" / "published_runs.csv").open(newline="") as _f:
    CONTRACT = next(csv.reader(_f))
OPTIONAL = ["software", "schedule", "first_stage_layers", "last_stage_layers", "reshard_after_forward", "experts",
            "top_k", "moe_ffn_hidden", "shared_experts", "moe_dense_layers", "etp", "capacity_factor", "head_dim",
            "moe_dispatcher", "mtp_layers", "moe_a2a_overlap", "moe_balance"]
COLUMNS = CONTRACT + OPTIONAL

# ---- model shapes (public configs; see README "Model shapes") ----------------------------------------
LLAMA3_8B = dict(model="Llama 3.1 8B", arch="llama", params_B=8, layers=32, hidden=4096, heads=32, kv_heads=8,
                 ffn_hidden=14336, ffn_act="swiglu", vocab=128256)
LLAMA3_70B = dict(model="Llama 3.1 70B", arch="llama", params_B=70, layers=80, hidden=8192, heads=64, kv_heads=8,
                  ffn_hidden=28672, ffn_act="swiglu", vocab=128256)
LLAMA3_405B = dict(model="Llama 3.1 405B", arch="llama", params_B=405, layers=126, hidden=16384, heads=128,
                   kv_heads=8, ffn_hidden=53248, ffn_act="swiglu", vocab=128256)
MPT = {  # llm-foundry scripts/train/yamls/pretrain/mpt-{1b,3b}.yaml; MPTConfig defaults: learned positions,
    # biases, tied embeddings, low-precision LayerNorm, GELU MLP of 4 x d_model
    "1b": dict(model="MPT-1B", arch="gpt", layers=24, hidden=2048, heads=16, kv_heads=16, ffn_hidden=8192,
               ffn_act="gelu", vocab=50368),
    "3b": dict(model="MPT-3B", arch="gpt", layers=32, hidden=2560, heads=20, kv_heads=20, ffn_hidden=10240,
               ffn_act="gelu", vocab=50368),
}
# lumi-llm-scaling meg-ds/pretrain_175B_16_node.sh: 70 x 14336, 112 heads, ALiBi, embedding LayerNorm,
# GPT-2 BPE padded to 51200 (the log prints "padded vocab (size: 50257) ... (new size: 51200)")
LUMI_175B = dict(model="GPT-style 175B (LUMI scaling test)", arch="bloom", layers=70, hidden=14336, heads=112,
                 kv_heads=112, ffn_hidden=57344, ffn_act="gelu", vocab=51200)
# Megatron-MoE-ModelZoo model_configs/benchmarking/Mixtral-8x22B.yaml (Llama2Tokenizer: 32000)
MIXTRAL_8X22B = dict(model="Mixtral 8x22B", arch="llama", params_B=141, layers=56, hidden=6144, heads=48,
                     kv_heads=8, ffn_hidden=16384, ffn_act="swiglu", vocab=32000)
MIXTRAL_MOE = dict(experts=8, top_k=2, moe_ffn_hidden=16384, shared_experts=0, moe_dense_layers=0, etp=1)
# Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml (kv-channels 128 != 4096/64)
QWEN3_235B = dict(model="Qwen3-235B-A22B", arch="llama", params_B=235, layers=94, hidden=4096, heads=64, head_dim=128,
                  kv_heads=4, ffn_hidden=12288, ffn_act="swiglu", vocab=151936)
QWEN3_MOE = dict(experts=128, top_k=8, moe_ffn_hidden=1536, shared_experts=0, moe_dense_layers=0, etp=1)
# torchtitan Llama 4 17bx16e (dim 5120, 40 heads, 8 KV heads, every layer MoE, 16 experts top-1 + 1 shared,
# expert width 8192 after auto_scale_hidden_dim) cut to 2 layers, with 17bx16e's vocabulary 202048 (the
# README's "same as Llama4 17bx16e, but with 2 layers"; its 145.55 GiB peak rules out the 2048-token
# debug vocabulary: distscope puts that at 47 GiB, 202048 at 182 GiB with the eager fp32 loss copies)
LLAMA4_2L = dict(model="Llama 4 Scout (17Bx16E) cut to 2 layers", arch="llama", layers=2, hidden=5120, heads=40,
                 kv_heads=8, ffn_hidden=16384, ffn_act="swiglu", vocab=202048)
LLAMA4_MOE = dict(experts=16, top_k=1, moe_ffn_hidden=8192, shared_experts=1, moe_dense_layers=0, etp=1)

GRAND_TETON = dict(gpu="h100-hbm2e-96gb-500w", gpus_per_node=8, intra_node_GBps=450, inter_node_GBps_per_gpu=50)
DGX_H100 = dict(gpu="h100-sxm5-80gb", gpus_per_node=8, intra_node_GBps=450, inter_node_GBps_per_gpu=50)
H200_NODE = dict(gpu="h200-sxm-141gb", gpus_per_node=8, intra_node_GBps=450, inter_node_GBps_per_gpu=50)
B200_NODE = dict(gpu="b200-sxm-180gb", gpus_per_node=8, intra_node_GBps=900, inter_node_GBps_per_gpu=50)
# torchao's "8x power limited B200": the limit is not stated; an earlier revision of the same README table (same
# figures) says "8xB100 GPUs", so the key models the HGX B100's 700 W envelope (system/data/devices.json)
B200_700W_NODE = dict(B200_NODE, gpu="b200-sxm-180gb-700w")
MI300X_NODE = dict(gpu="mi300x", gpus_per_node=8, intra_node_GBps=448, inter_node_GBps_per_gpu=50)
LUMI_G = dict(gpu="mi250x-gcd", gpus_per_node=8, intra_node_GBps=50, inter_node_GBps_per_gpu=12.5)

GRAND_TETON_NOTE = ("Grand Teton H100 with 96 GB HBM2e (2.4 TB/s) at the 500 W default power limit: device key "
                    "h100-hbm2e-96gb-500w, whose tensor peak (the midpoint of SXM and NVL) is an estimate: "
                    "TorchTitan says only that it lies between the two")


def tokens_step(row: dict, tps_per_gpu: float) -> float:
    """torchtitan/torchao TPS per device = local tokens / (step time x cp x tp x pp), counted before CP
    sharding (torchtitan train.py / components/metrics.py), so global tokens/s = TPS x num_gpus."""
    return row["global_batch"] * row["seq_len"] / (tps_per_gpu * row["num_gpus"])


def f4_megatron_moe(row: dict) -> float:
    """Megatron-Core num_floating_point_operations (megatron/training/training.py at NVIDIA/Megatron-LM
    7f471d7, Dec 2025) for a GQA SwiGLU transformer whose every layer is MoE, no MTP, untied output:
    B·s·[12·l·h·(f_e·k·1.5 + f_sh·1.5) + 12·l·h²·(1 + g/a + s/(2h))·(q/h) + 6·h·V]."""
    B, s, n_layers, h = row["global_batch"], row["seq_len"], row["layers"], row["hidden"]
    a, g, V = row["heads"], row["kv_heads"], row["vocab"]
    k, fe = row["top_k"], row["moe_ffn_hidden"]
    fsh = row["shared_experts"] * fe
    q_over_h = row["head_dim"] * a / h if row.get("head_dim") else 1.0  # kv_channels·heads / hidden
    mlp = 12 * n_layers * h * (fe * k * 1.5 + fsh * 1.5)
    attn = 12 * n_layers * h * h * (1 + g / a + s / h / 2) * q_over_h
    return B * s * (mlp + attn + 6 * h * V)


ROWS: list[dict] = []


def add(**kw) -> None:
    ROWS.append(kw)


def fmt(x: float) -> str:
    return f"{x:.4g}" if x < 100 else f"{x:.1f}"


# ---- E1: torchtitan benchmarks/llama3_h100_202412_torchtitan.md ---------------------------------------
E1 = "E1 torchtitan llama3_h100_202412"
E1_SW = dict(framework="torchtitan (FSDP2, torch.compile)", software="torchtitan-2024")
E1_BASIS = "tokens/s: global_batch x seq_len / (TPS/GPU x num_gpus); TPS read at iteration 90"


def e1(run_id: str, shape: dict, tps: float, note: str, **layout) -> None:
    row = dict(run_id=run_id, source=E1, **shape, **GRAND_TETON, **E1_SW, **layout)
    row["measured_step_time_s"] = tokens_step(row, tps)
    row["step_time_basis"] = E1_BASIS
    row["reported"] = f"{tps:g} tokens/s/GPU"
    row["notes"] = f"{note}; {GRAND_TETON_NOTE}"
    add(**row)


FSDP8 = dict(seq_len=8192, global_batch=16, micro_batch=2, tp=1, pp=1, vp=1, dp=8, cp=1, ep=1, sequence_parallel=0,
             zero_stage=3, distributed_optimizer=0, overlap="dp", recompute="selective-op", num_gpus=8,
             reshard_after_forward=1)
FSDP128 = dict(FSDP8, global_batch=256, dp=128, num_gpus=128)
SAC = "selective-op = torchtitan per-op SAC (selective_ac_option=op), not Megatron's selective"
e1("E1-T1-8B-FSDP8-bf16", LLAMA3_8B, 6667, f"Table 1 'FSDP + torch.compile'; {SAC}; eager FSDP measured 5,762",
   precision="bf16", **FSDP8)
e1("E1-T1-8B-FSDP8-fp8", LLAMA3_8B, 8532, f"Table 1 'FSDP + torch.compile + Float8' (torchao tensorwise Float8Linear); "
   f"{SAC}", precision="fp8", **FSDP8)
e1("E1-T3-8B-FSDP128-bf16", LLAMA3_8B, 6514, f"Table 3 'FSDP + torch.compile'; {SAC}; eager FSDP measured 5,605",
   precision="bf16", **FSDP128)
e1("E1-T3-8B-FSDP128-fp8", LLAMA3_8B, 8380, f"Table 3 'FSDP + torch.compile + Float8'; {SAC}",
   precision="fp8", **FSDP128)
for cp, seq, tps in ((1, 32768, 3890), (2, 65536, 2540), (4, 131072, 1071), (8, 262144, 548)):
    e1(f"E1-T2-8B-CP{cp}-fp8", LLAMA3_8B, tps,
       f"Table 2 FSDP {8 // cp}, CP {cp}, torch.compile + Float8, local batch 1, full AC",
       seq_len=seq, global_batch=8 // cp, micro_batch=1, tp=1, pp=1, vp=1, dp=8 // cp, cp=cp, ep=1,
       sequence_parallel=0, zero_stage=3, distributed_optimizer=0, overlap="dp", recompute="full",
       precision="fp8", num_gpus=8, reshard_after_forward=1)
TT_70B_2D = dict(seq_len=8192, global_batch=512, micro_batch=16, tp=8, pp=1, vp=1, dp=32, cp=1, ep=1,
                 sequence_parallel=1, zero_stage=3, distributed_optimizer=0, recompute="full", precision="fp8",
                 num_gpus=256, reshard_after_forward=1)
e1("E1-T4-70B-2D-fp8", LLAMA3_70B, 829, "Table 4 FSDP 32 x TP 8 + torch.compile + Float8, local batch 16, full AC",
   overlap="dp", **TT_70B_2D)
e1("E1-T4-70B-2D-asyncTP-fp8", LLAMA3_70B, 876, "Table 4 '2D + AsyncTP'", overlap="dp,tp", **TT_70B_2D)
# micro_batch = local batch / 8: torchtitan's default n_microbatches was the pp degree until Jan 2025
# (torchtitan/parallelisms/pipelining_utils.py build_pipeline_schedule @ ba24697, 2024-12-19), for 1F1B and
# interleaved alike; the benchmark doc does not override it
TT_405B = dict(seq_len=8192, global_batch=256, micro_batch=4, tp=8, pp=8, dp=8, cp=1, ep=1,
               sequence_parallel=1, zero_stage=3, distributed_optimizer=0, overlap="dp,tp", recompute="full",
               precision="fp8", num_gpus=512, reshard_after_forward=0)
SPLIT_NOTE = ("layers per stage from torchtitan generate_split_points (embedding/output counted): {}; micro_batch "
              "= local batch / 8: not stated, torchtitan's default then was microbatches = pp degree "
              "(pipelining_utils.py @ ba24697); FSDP keeps params unsharded under PP "
              "(reshard_after_forward=False for pp_enabled); PP p2p overlap not stated")
e1("E1-T5-405B-1F1B-fp8", LLAMA3_405B, 100, "Table 5 FSDP 8 x TP 8 x PP 8, compile + Float8 + AsyncTP, local batch 32; "
   + SPLIT_NOTE.format("15,16x6,15"), vp=1, schedule="1f1b", **TT_405B)
e1("E1-T5-405B-interleaved-fp8", LLAMA3_405B, 128, "Table 5 Interleaved 1F1B (2 stages per rank); "
   + SPLIT_NOTE.format("7,8x14,7 over 16 stages"), vp=2, schedule="interleaved-1f1b", **TT_405B)
for cp, seq, tps in ((1, 32768, 76), (2, 65536, 47), (4, 131072, 31), (8, 262144, 16)):
    e1(f"E1-T6-405B-CP{cp}-fp8", LLAMA3_405B, tps,
       f"Table 6 TP 8 x PP 8 x FSDP {8 // cp} x CP {cp}, compile + Float8 + AsyncTP + 1F1B, local batch 8; "
       + SPLIT_NOTE.format("15,16x6,15"),
       **dict(TT_405B, seq_len=seq, global_batch=8 * (8 // cp), micro_batch=1, dp=8 // cp, cp=cp, vp=1,
              schedule="1f1b"))

# ---- E2: torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md -------------------------------
E2 = "E2 torchtitan asyncTP_llama3_h100_2025-06"
E2_SW = dict(framework="torchtitan (FSDP2 + TP, torch.compile)", software="torchtitan-2025")


def e2(run_id: str, shape: dict, tps: float, note: str, **layout) -> None:
    row = dict(run_id=run_id, source=E2, **shape, **GRAND_TETON, **E2_SW, **layout)
    row["measured_step_time_s"] = tokens_step(row, tps)
    row["step_time_basis"] = E1_BASIS.replace("; TPS read at iteration 90", "")
    row["reported"] = f"{tps:g} tokens/s/GPU"
    row["notes"] = f"{note}; {GRAND_TETON_NOTE}"
    add(**row)


E2_70B = dict(seq_len=8192, global_batch=512, micro_batch=16, tp=8, pp=1, vp=1, dp=32, cp=1, ep=1,
              sequence_parallel=1, zero_stage=3, distributed_optimizer=0, recompute="full", num_gpus=256,
              reshard_after_forward=1)
E2_8B = dict(seq_len=8192, global_batch=96, micro_batch=12, tp=8, pp=1, vp=1, dp=8, cp=1, ep=1,
             sequence_parallel=1, zero_stage=3, distributed_optimizer=0, recompute="selective-op", num_gpus=64,
             reshard_after_forward=1)
ROWWISE = "float8 rowwise measured {} (vanilla) / {} (async) tokens/s/GPU"
FP8TW = "fp8 = torchao float8 tensorwise (FSDP float8 all-gather not stated)"
for tp_kind, overlap, bf, f8 in (("vanillaTP", "dp", 597.3, 809.8), ("asyncTP", "dp,tp", 652.4, 942.4)):
    base = f"70B on 256 H100, FSDP 32 x TP 8, torch.compile, full AC, local batch 16, {tp_kind}"
    e2(f"E2-70B-{tp_kind}-bf16", LLAMA3_70B, bf, base, precision="bf16", overlap=overlap, **E2_70B)
    e2(f"E2-70B-{tp_kind}-fp8", LLAMA3_70B, f8, f"{base}; {FP8TW}; " + ROWWISE.format(599.6, 624.8),
       precision="fp8", overlap=overlap, **E2_70B)
for tp_kind, overlap, bf, f8 in (("vanillaTP", "dp", 4378, 5078.1), ("asyncTP", "dp,tp", 4809.4, 5570.1)):
    base = f"8B on 64 H100, FSDP 8 x TP 8, torch.compile, per-op SAC, local batch 12, {tp_kind}"
    e2(f"E2-8B-{tp_kind}-bf16", LLAMA3_8B, bf, base, precision="bf16", overlap=overlap, **E2_8B)
    e2(f"E2-8B-{tp_kind}-fp8", LLAMA3_8B, f8, f"{base}; {FP8TW}; " + ROWWISE.format(3708.5, 3914.9),
       precision="fp8", overlap=overlap, **E2_8B)

# ---- E3: torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md -----------------------------
E3 = "E3 torchtitan llama3-8b_h200_202506 (Trainy)"
for nodes, tps in ((4, 10938), (8, 10753)):
    n = 8 * nodes
    row = dict(run_id=f"E3-8B-FSDP{n}-fp8", source=E3, **LLAMA3_8B, seq_len=8192, global_batch=2 * n, micro_batch=2,
               tp=1, pp=1, vp=1, dp=n, cp=1, ep=1, sequence_parallel=0, zero_stage=3, distributed_optimizer=0,
               overlap="dp", recompute="selective-op", precision="fp8", num_gpus=n, **H200_NODE,
               framework="torchtitan (FSDP2, torch.compile)", software="torchtitan-2025", reshard_after_forward=1)
    row["measured_step_time_s"] = tokens_step(row, tps)
    row["step_time_basis"] = "tokens/s: global_batch x seq_len / (TPS/GPU x num_gpus); TPS sampled at iteration 100"
    row["reported"] = f"{tps:g} tokens/s/GPU"
    row["notes"] = (f"{nodes} nodes x 8 H200, 400 Gb/s per GPU; llama3_8b.toml (seq 8192, per-op SAC) + local batch 2, "
                    "compile, float8 with FSDP float8 all-gather, precomputed scales, force_recompute_fp8_weight_in_bwd")
    add(**row)

# ---- E4: torchao float8 + mx_formats README end-to-end tables (torchtitan llama3.sh) -------------------
E4 = "E4 torchao e2e float8 (torchtitan Llama3-8B single node)"
AO_LAYOUT = dict(seq_len=8192, global_batch=8, micro_batch=1, tp=1, pp=1, vp=1, dp=8, cp=1, ep=1, sequence_parallel=0,
                 zero_stage=3, distributed_optimizer=0, overlap="dp", recompute="selective-op", num_gpus=8,
                 reshard_after_forward=1)
AO_BASIS = "tokens/s: global_batch x seq_len / (median TPS/GPU x num_gpus); median over steps 2-100"
for rid, node, bf, f8, extra in (
    ("E4-H100-8B", DGX_H100, 6150, 7689.5, "H100 (torchao float8 README, pytorch 2.7.0a0, torchao 0.10.0); rowwise "
     "with bf16 all-gather measured 6768"),
    ("E4-MI300X-8B", MI300X_NODE, 5376.5, 6166.0, "MI300X (torchao float8 README, pytorch 2.9.0.dev+rocm6.4, torchao "
     "0.13.0); rowwise 5891.0, rowwise_with_gw_hp 6100.0; intra_node_GBps 448 = 7 xGMI links x 64 GB/s per "
     "direction (secondary sources: 896 GB/s aggregate, 128 GB/s bidirectional per link; not in a primary AMD doc read)"),
    ("E4-B200-8B", B200_700W_NODE, 8307.5, 10417.0, "DEVICE-APPROX: 'power limited' B200, limit not stated, "
     "modelled at B100's 700 W (device key b200-sxm-180gb-700w; an earlier revision of the README table said "
     "'8xB100') (torchao mx_formats README, pytorch 2.9.0.dev20250815, torchtitan 6fc499f); mxfp8_cublas 9969.0, "
     "mxfp8_cublas_rceil 9642.0, float8 rowwise 8640.5"),
):
    for prec, tps in (("bf16", bf), ("fp8", f8)):
        row = dict(run_id=f"{rid}-{prec}", source=E4, **LLAMA3_8B, **AO_LAYOUT, precision=prec, **node,
                   framework="torchtitan (FSDP2, torch.compile) via torchao llama3.sh", software="torchtitan-2025")
        row["measured_step_time_s"] = tokens_step(row, tps)
        row["step_time_basis"] = AO_BASIS
        row["reported"] = f"{tps:g} tokens/s/GPU"
        row["notes"] = ("single node, FSDP2 over 8, batch 1, seq 8192, torch.compile, per-op SAC; "
                        + ("fp8 = float8 tensorwise with float8 FSDP all-gather; " if prec == "fp8" else "") + extra)
        add(**row)

# ---- E5: torchao prototype/moe_training README, Llama 4 Scout cut to 2 layers on 4 B200 -----------------
E5 = "E5 torchao moe_training e2e (torchtitan Llama4 on 4 B200)"
row = dict(run_id="E5-B200-Llama4-2L-EP4-bf16", source=E5, **LLAMA4_2L, params_B=6.5, seq_len=8192, global_batch=32,
           micro_batch=8, tp=1, pp=1, vp=1, dp=4, cp=1, ep=4, sequence_parallel=0, zero_stage=3, distributed_optimizer=0,
           overlap="dp", recompute="none", precision="bf16", num_gpus=4, **dict(B200_NODE, gpus_per_node=4),
           framework="torchtitan (FSDP2 + EP, torch.compile)", software="torchtitan-2025", reshard_after_forward=1,
           **LLAMA4_MOE)
row["measured_step_time_s"] = tokens_step(row, 49381.0)
row["step_time_basis"] = "tokens/s: global_batch x seq_len / (median TPS/GPU x num_gpus)"
row["reported"] = "49381 tokens/s/GPU"
row["notes"] = ("FSDP=4, EP=4, AC none, compile, seq 8192, local batch 8; 'debug model config (same as Llama4 17bx16e, "
                "but with 2 layers)'; vocabulary not stated: 202048 (17bx16e) taken over the 2048 of torchtitan's "
                "debugmodel flavour, because only it fits the README's 145.55 GiB max memory (distscope: 182 GiB "
                "eager, 47 GiB with 2048); params_B computed for vocab 202048; MXFP8 measured 52038 (linears), 69350 (grouped GEMMs), "
                "70747 (both) tokens/s/GPU (not included: MXFP8 block scaling, not TE FP8)")
add(**row)

# ---- E6: llm-foundry scripts/train/benchmarking/README.md, 'H100 80GB BF16' and 'H100 80GB FP8' -------
E6 = "E6 llm-foundry benchmarking README (H100 BF16/FP8)"
# (size, seq, mbs, grad_accum, global_batch, activation checkpointing, NumParams,
#  Throughput T/s bf16, T/s fp8, GlobalBatchSize (T))
LLMF = (
    ("3b", 32768, 3, 6, 144, True, 2730480640, 46984, 46853, 4718592),
    ("3b", 8192, 3, 6, 144, False, 2667566080, 132626, 153174, 1179648),
    ("3b", 512, 40, 6, 1920, False, 2647905280, 223721, 292217, 983040),
    ("1b", 32768, 1, 4, 32, False, 1378865152, 96203, 100643, 1048576),
    ("1b", 512, 56, 4, 1792, False, 1312804864, 418201, 562523, 917504),
)
for size, seq, mbs, ga, gbs, ac, nparams, tbf, tf8, gbt in LLMF:
    assert gbs * seq == gbt and mbs * ga * 8 == gbs
    for prec, tput in (("bf16", tbf), ("fp8", tf8)):
        row = dict(run_id=f"E6-MPT-{size}-s{seq}-{prec}", source=E6, **MPT[size], params_B=round(nparams / 1e9, 3),
                   seq_len=seq, global_batch=gbs, micro_batch=mbs, tp=1, pp=1, vp=1, dp=8, cp=1, ep=1,
                   sequence_parallel=0, zero_stage=3, distributed_optimizer=0, overlap="dp",
                   recompute="full" if ac else "none", precision=prec, num_gpus=8, **DGX_H100,
                   framework="llm-foundry / Composer (PyTorch FSDP FULL_SHARD)", software="llm-foundry-2023",
                   reshard_after_forward=1)
        row["measured_step_time_s"] = gbt / tput
        row["step_time_basis"] = "tokens/s: GlobalBatchSize(T) / Throughput(T/s) of all 8 GPUs"
        row["reported"] = f"{tput:g} tokens/s (8 GPUs)"
        row["notes"] = (f"MPT-{size}, {ga} grad-accumulation steps, Composer precision amp_{prec}; "
                        + ("amp_fp8 = Transformer Engine v0.10 te.Linear (fc_type=te), submit_benchmarks.py also pins "
                           "flash-attn 1.0.7 for fp8 runs" if prec == "fp8" else "attn_impl triton") +
                        "; MosaicML platform H100 (interconnect not stated; single node)")
        add(**row)

# ---- E7: spyysalo/lumi-llm-scaling meg-ds/experiments/175B-scaling-comms/{16..256}-node.out ------------
E7 = "E7 lumi-llm-scaling 175B-scaling-comms logs (LUMI MI250X)"
for nodes, t in ((16, 346.67), (32, 180.82), (64, 97.53), (128, 55.18), (256, 36.20)):
    n = 8 * nodes
    row = dict(run_id=f"E7-LUMI-175B-{n}GCD", source=E7, **LUMI_175B, params_B=173.4, seq_len=2048, global_batch=1024,
               micro_batch=2, tp=8, pp=8, vp=1, dp=n // 64, cp=1, ep=1, sequence_parallel=0, zero_stage=0,
               distributed_optimizer=0, overlap="none", recompute="full", precision="bf16", num_gpus=n, **LUMI_G,
               framework="Megatron-DeepSpeed (TurkuNLP fork, ROCm 5.2.3)", software="megatron-deepspeed-2021",
               first_stage_layers=9, last_stage_layers=7)
    row["measured_step_time_s"] = t
    row["step_time_basis"] = "iteration time as printed: median 'elapsed time per iteration' over iterations 2..last"
    row["reported"] = f"{t} s/iter"
    row["notes"] = (f"{nodes} LUMI-G nodes (4 MI250X = 8 GCDs each; 4 x 200 Gb/s Slingshot-11 per node); DeepSpeed "
                    "pipeline engine, ZeRO 0, --checkpoint-activations; DeepSpeed partition printed as 9 transformer "
                    "layers on stage 0, 9 on stages 1-6, 7 on stage 7; DeepSpeed comms_logger (prof_all) was on; overlap "
                    "'none' inferred (PipelineEngine reduces gradients after the last micro-batch); params_B computed "
                    "12lh^2 + (V+s)h; iteration 1 excluded")
    add(**row)

# NVL72 racks: one NVLink 5 domain (900 GB/s per GPU per direction) per rack; how a job's ranks sit on racks is
# not stated, so a job of >= 64 GPUs is taken as whole racks of 64 GPUs (16 of the 18 compute trays, as NVIDIA's
# DGX GB200 SuperPOD scheduling blocks), a smaller one as one domain. Scale-out per GPU: ConnectX-7 400 Gb/s on
# GB200 (50 GB/s), ConnectX-8 800 Gb/s on GB300 (100 GB/s)
SYSTEMS = {"GB300": dict(gpu="gb300", intra_node_GBps=900, inter_node_GBps_per_gpu=100),
           "GB200": dict(gpu="gb200", intra_node_GBps=900, inter_node_GBps_per_gpu=50),
           "B200": dict(B200_NODE), "H100": dict(DGX_H100)}

# ---- E8: yanring/Megatron-MoE-ModelZoo best_practice/{mixtral,qwen3} ------------------------------------
E8 = "E8 Megatron-MoE-ModelZoo best_practice (H100, GB200, GB300)"
MIX = dict(seq_len=4096, global_batch=256, micro_batch=1, tp=2, pp=8, vp=7, dp=8, cp=1, ep=8, sequence_parallel=1,
           zero_stage=0, distributed_optimizer=1, recompute="none", num_gpus=128, **DGX_H100,
           framework="Megatron-Core (dev, MoE model zoo)", software="megatron-core-2025", schedule="interleaved-1f1b",
           moe_dispatcher="alltoall", **MIXTRAL_MOE)
MIX_NOTE = ("runtime.conf defaults TP2 PP8 EP8 VPP7 MBS1 GBS256 16 nodes, alltoall dispatcher, grouped GEMM, "
            "no recompute; 'should be around' figure from a script comment (best_practice/mixtral/run_mixtral_8x22B.sh)")
# the "balanced" runs are the script's --moe-router-force-load-balancing setting (moe_balance=forced)
for rid, tflops, prec, overlap, cf, extra in (
    ("E8-Mixtral8x22B-balanced-bf16", 465, "bf16", "dp,tp,pp", "",
     "dropless with --moe-router-force-load-balancing; dropless without forced balancing ~445 TFLOP/s"),
    ("E8-Mixtral8x22B-capacity1-bf16", 470, "bf16", "dp,tp,pp", "1.0",
     "token drop, --moe-expert-capacity-factor 1.0 --moe-pad-expert-input-to-capacity"),
    ("E8-Mixtral8x22B-balanced-fp8blockwise", 560, "fp8-blockwise", "dp,pp", "",
     "NOT A CLEAN PAIR with the bf16 row: PR=fp8 adds --fp8-recipe blockwise, --fp8-param-gather, bf16 Adam moments "
     "and drops --tp-comm-overlap (sbatch_benchmarking.sh)"),
):
    row = dict(run_id=rid, source=E8, **MIXTRAL_8X22B, precision=prec, overlap=overlap, capacity_factor=cf, **MIX,
               moe_balance="forced" if "balanced" in rid else "")
    row["measured_step_time_s"] = f4_megatron_moe(row) / (tflops * 1e12 * row["num_gpus"])
    row["step_time_basis"] = (f"F4 (Megatron-Core MoE model FLOPs, README) / ({tflops} TFLOP/s x 128 GPUs)")
    row["reported"] = f"~{tflops} TFLOP/s/GPU"
    row["notes"] = f"{MIX_NOTE}; {extra}"
    add(**row)

QWEN = dict(seq_len=4096, global_batch=2048, sequence_parallel=1, precision="bf16", num_gpus=256, **DGX_H100,
            framework="Megatron-Core (dev, MoE model zoo)", software="megatron-core-2025", **QWEN3_MOE)
QWEN_NOTE = ("head_dim=128: Qwen3 uses kv-channels 128 while hidden/heads = 64; 256 H100, InfiniBand 8x50 GB/s per node; "
             "layers split with --account-for-embedding/loss-in-pipeline-split; recompute 'norm, act' = selective "
             "layernorm + moe_act modules")
for rid, layout, t, extra in (
    ("E8-Qwen3-235B-TP2-EP32-PP8-bf16", dict(micro_batch=1, tp=2, pp=8, vp=4, dp=16, cp=1, ep=32, zero_stage=0,
                                             distributed_optimizer=1, overlap="dp,tp,pp", recompute="selective",
                                             schedule="interleaved-1f1b", moe_dispatcher="deepep"), 19.7,
     "cross-node EP, DeepEP dispatcher, GA 128, code moe_dev(f3e6c5); with 1F1B A2A overlap 17.6 s (not included)"),
    ("E8-Qwen3-235B-TP2-EP8-FSDP-bf16", dict(micro_batch=4, tp=2, pp=1, vp=1, dp=128, cp=1, ep=8, zero_stage=3,
                                             distributed_optimizer=0, overlap="dp,tp", recompute="full",
                                             reshard_after_forward=1, moe_dispatcher="deepep"), 17.6,
     "intra-node EP, DeepEP, Megatron-FSDP on, EDP 32, GA 4, full recompute, code main(1e057005)"),
    ("E8-Qwen3-235B-TP2-EP8-PP32-a2a-bf16", dict(micro_batch=1, tp=2, pp=32, vp=3, dp=4, cp=1, ep=8, zero_stage=0,
                                                 distributed_optimizer=1, overlap="dp,tp,pp", recompute="selective",
                                                 schedule="interleaved-1f1b", moe_dispatcher="alltoall"), 24.2,
     "intra-node EP, all-to-all dispatcher, GA 512, code main(1e057005)"),
    ("E8-Qwen3-235B-TP4-EP8-PP8-bf16", dict(micro_batch=1, tp=4, pp=8, vp=4, dp=8, cp=1, ep=8, zero_stage=0,
                                            distributed_optimizer=1, overlap="dp,tp,pp", recompute="none",
                                            schedule="interleaved-1f1b", moe_dispatcher="deepep"), 29.0,
     "intra-node EP, DeepEP, EDP 4, GA 256, no recompute, code main(1e057005)"),
    ("E8-Qwen3-235B-TP2-EP32-PP8-a2aoverlap-bf16",
     dict(micro_batch=1, tp=2, pp=8, vp=4, dp=16, cp=1, ep=32, zero_stage=0, distributed_optimizer=1,
          overlap="dp,tp,pp", recompute="selective", schedule="interleaved-1f1b", moe_dispatcher="deepep",
          moe_a2a_overlap=1), 17.6,
     "cross-node EP, DeepEP, GA 128, code moe_dev(f3e6c5), the table's '+1f1b overlap' row: "
     "--overlap-moe-expert-parallel-comm --delay-wgrad-compute (sbatch_benchmarking.sh A2A_OVERLAP=1)"),
):
    row = dict(run_id=rid, source=E8, **QWEN3_235B, **layout, **QWEN)
    row["measured_step_time_s"] = t
    row["step_time_basis"] = "iteration time as printed ('Step time (sec)' column)"
    row["reported"] = f"{t} s/step"
    row["notes"] = f"{QWEN_NOTE}; {extra}"
    add(**row)

# best_practice/qwen3/readme.md @ e865051, GB200 and GB300 tables (Qwen3-235B-A22B, HybridEP, forced balance):
# TFLOPS per GPU by Megatron's num_floating_point_operations, so step = F4 / (TFLOPS x GPUs). A tray holds 4
# GPUs (NNODES counts trays); Slurm --segment=SEGMENT keeps SEGMENT trays in one NVLink domain, so the domain
# the job is sure of is SEGMENT x 4 GPUs (gpus_per_node). HybridEP inside the domain prices as the all-to-all
# dispatcher. Not in the table, from the commands: cuda graphs over attn / router / preprocess (host work only),
# the long-context and MXFP8 runs' selective recompute of moe_act and layernorm (element-wise), and the
# GB200 MXFP8 run's activation offloading of expert fc1 and moe_act (memory; its copies are not priced).
QWEN_GB = dict(seq_len=4096, sequence_parallel="auto", zero_stage=0, distributed_optimizer=1, overlap="dp,tp,pp",
               framework="Megatron-Core (dev, MoE model zoo)", software="megatron-core-2025",
               moe_dispatcher="alltoall", moe_balance="forced", **QWEN3_MOE)
for rid, system, n, seg, prec, lay, tflops, extra in (
    ("E8-GB200-Qwen3-235B-PP8EP8-bf16", "GB200", 256, 2, "bf16",
     dict(tp=1, pp=8, vp=1, cp=1, ep=8, micro_batch=1, global_batch=8192, recompute="none"), 750, ""),
    ("E8-GB200-Qwen3-235B-PP4EP64-mxfp8", "GB200", 256, 16, "mxfp8",
     dict(tp=1, pp=4, vp=6, cp=1, ep=64, micro_batch=3, global_batch=3072, recompute="selective", moe_a2a_overlap=1),
     919, "activation offloading of expert fc1 and moe_act (not priced); A2A_OVERLAP=1"),
    ("E8-GB200-Qwen3-235B-128k-mxfp8", "GB200", 128, 8, "mxfp8",
     dict(tp=4, pp=4, vp=12, cp=4, ep=32, micro_batch=1, global_batch=1024, recompute="selective", seq_len=131072),
     1150, "long context 128k, MoE parallel folding (EP 32 over TP x CP x DP = 32)"),
    ("E8-GB300-Qwen3-235B-EP64-mxfp8", "GB300", 64, 16, "mxfp8",
     dict(tp=1, pp=1, vp=1, cp=1, ep=64, micro_batch=1, global_batch=8192, recompute="none", moe_a2a_overlap=1),
     1055, "A2A_OVERLAP=1"),
):
    sysd = dict(SYSTEMS[system], gpus_per_node=seg * 4)
    row = dict(run_id=rid, source=E8, **QWEN3_235B, **dict(QWEN_GB, **lay), precision=prec, num_gpus=n, **sysd)
    row["dp"] = n // (row["tp"] * row["pp"] * row["cp"])
    if row["tp"] > 1 or row["pp"] > 1:
        row["schedule"] = "interleaved-1f1b" if row["vp"] > 1 else ""
    row["measured_step_time_s"] = f4_megatron_moe(row) / (tflops * 1e12 * n)
    row["step_time_basis"] = f"F4 (Megatron-Core MoE model FLOPs, README) / ({tflops} TFLOP/s x {n} GPUs)"
    row["reported"] = f"{tflops} TFLOP/s/GPU"
    row["notes"] = "; ".join(x for x in (
        f"{n // 4} {system} trays, --segment={seg} ({seg * 4}-GPU NVLink domain), HybridEP, forced balance, "
        "cuda graphs attn/router/preprocess", extra) if x)
    add(**row)


# ---- E9: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md @ 5776a6d9, "25.11 NeMo Container" -------
# Its Blackwell (DGX-GB300, DGX-GB200, DGX-B200) rows and its H100 MoE rows; its three H100 Llama rows are
# the public set's S19 and are not repeated. The 25.09 section of the same page and the later archive tables
# (26.04, 26.06) are kept apart for independent checks.
E9 = "E9 Megatron-Bridge perf summary 25.11 (Blackwell + MoE)"
E9_SW = dict(framework="Megatron-Bridge / NeMo 25.11", software="megatron-bridge-2025")
# GPT-OSS 120B: the catalog's gpt-oss-120b (openai/gpt-oss-120b config.json: 36 layers, 2880 wide, 64 heads of 64,
# 8 KV heads, 128 experts top-4 of width 2880, vocab 201088), whose 128-token sliding window on every second layer
# is priced as local attention
GPT_OSS_120B = dict(model="gpt-oss-120b", arch="catalog", params_B=117, layers=36, hidden=2880, heads=64, head_dim=64,
                    kv_heads=8, ffn_hidden=2880, ffn_act="swiglu", vocab=201088, experts=128, top_k=4,
                    moe_ffn_hidden=2880, shared_experts=0, moe_dense_layers=0, etp=1)
# Qwen/Qwen3-30B-A3B config.json: 48 layers, 2048 wide, 32 heads of 128, 4 KV heads, 128 experts top-8 of 768
QWEN3_30B = dict(model="Qwen3-30B-A3B", arch="llama", params_B=30.5, layers=48, hidden=2048, heads=32, head_dim=128,
                 kv_heads=4, ffn_hidden=6144, ffn_act="swiglu", vocab=151936, experts=128, top_k=8, moe_ffn_hidden=768,
                 shared_experts=0, moe_dense_layers=0, etp=1)
# the catalog's DeepSeek-V3 (MLA, 256 routed experts top-8 + 1 shared, 3 dense layers; no MTP module)
DSV3 = dict(model="deepseek-v3", arch="catalog", params_B=671, layers=61, hidden=7168, heads=128, kv_heads=128,
            ffn_hidden=18432, ffn_act="swiglu", vocab=129280, experts=256, top_k=8, moe_ffn_hidden=2048,
            shared_experts=1, moe_dense_layers=3, etp=1)
QWEN3_235B_E9 = dict(QWEN3_235B, **QWEN3_MOE)
E9_MODELS = {"LLAMA3_8B": LLAMA3_8B, "LLAMA3_70B": LLAMA3_70B, "LLAMA3.1_405B": LLAMA3_405B, "DeepSeekV3": DSV3,
             "GPT OSS 120B": GPT_OSS_120B, "Qwen3_30B_a3B": QWEN3_30B, "Qwen3_235B_a22B": QWEN3_235B_E9}
# (system, model, GPUs, precision, GBS, MBS, seq, FSDP, TP, PP, CP, VP, EP, GA, tokens/s/GPU, note): the table's
# cells; where a cell reads "FP8-CS (FP8-MX)" and "A (B)", the bracketed figure is the MXFP8 run of the same row
E9_TABLE = [
    ("GB300", "LLAMA3_8B", 8, "fp8-cs", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 8, 37556, ""),
    ("GB300", "LLAMA3_8B", 8, "mxfp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 8, 36108, ""),
    ("GB300", "LLAMA3_70B", 64, "fp8-cs", 256, 2, 8192, 1, 1, 1, 1, 1, 1, 2, 4520, ""),
    ("GB300", "LLAMA3.1_405B", 256, "fp8-cs", 1536, 1, 8192, 0, 2, 8, 2, 4, 1, 192, 999, ""),
    ("GB300", "DeepSeekV3", 256, "bf16", 4096, 1, 4096, 0, 1, 2, 1, 4, 32, 32, 3848, "w/o MTP"),
    ("GB300", "DeepSeekV3", 256, "mxfp8", 4096, 1, 4096, 0, 1, 2, 1, 4, 32, 32, 4357, "w/o MTP"),
    ("GB300", "GPT OSS 120B", 64, "bf16", 1280, 2, 8192, 0, 1, 1, 1, 1, 64, 10, 18347, ""),
    ("GB300", "Qwen3_30B_a3B", 8, "mxfp8", 512, 4, 4096, 0, 1, 1, 1, 1, 8, 16, 28934, ""),
    ("GB300", "Qwen3_235B_a22B", 256, "bf16", 8192, 2, 4096, 0, 1, 4, 1, 12, 16, 32, 6131, ""),
    ("GB200", "LLAMA3_8B", 8, "fp8-cs", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 8, 31508, ""),
    ("GB200", "LLAMA3_8B", 8, "mxfp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 8, 29789, ""),
    ("GB200", "LLAMA3_70B", 64, "fp8-cs", 256, 2, 8192, 1, 1, 1, 1, 1, 1, 2, 4312, ""),
    ("GB200", "LLAMA3.1_405B", 256, "fp8-cs", 1536, 1, 8192, 0, 4, 16, 1, 4, 1, 384, 813, ""),
    ("GB200", "DeepSeekV3", 256, "bf16", 4096, 1, 4096, 0, 1, 4, 1, 4, 64, 64, 3139, "w/o MTP"),
    ("GB200", "DeepSeekV3", 256, "mxfp8", 4096, 1, 4096, 0, 1, 8, 1, 4, 32, 128, 4018, "w/o MTP"),
    ("GB200", "GPT OSS 120B", 64, "bf16", 1280, 1, 8192, 0, 1, 1, 1, 1, 64, 20, 15876, ""),
    ("GB200", "Qwen3_30B_a3B", 8, "mxfp8", 512, 4, 4096, 0, 1, 1, 1, 1, 8, 16, 23766, ""),
    ("GB200", "Qwen3_235B_a22B", 256, "bf16", 8192, 1, 4096, 0, 1, 8, 1, 3, 32, 256, 4916, ""),
    ("B200", "LLAMA3_8B", 8, "fp8-cs", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 8, 30624, ""),
    ("B200", "LLAMA3_8B", 8, "mxfp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 8, 29521, ""),
    ("B200", "LLAMA3.1_405B", 128, "fp8-cs", 64, 1, 8192, 0, 4, 8, 2, 8, 1, 32, 661, ""),
    ("B200", "LLAMA3.1_405B", 128, "mxfp8", 64, 1, 8192, 0, 4, 8, 2, 8, 1, 32, 624, ""),
    ("B200", "DeepSeekV3", 256, "mxfp8", 2048, 1, 4096, 0, 1, 16, 1, 1, 8, 128, 2139,
     "w/ MTP: one MTP module (DeepSeek-V3's depth 1), mtp_layers=1 on the catalog model; layout from "
     "Megatron-Bridge's DeepSeek-V3 recipe for PP16 (E9_LAYOUTS)"),
    ("B200", "GPT OSS 120B", 64, "bf16", 512, 4, 4096, 0, 1, 1, 1, 1, 8, 2, 8213, ""),
    ("B200", "Qwen3_30B_a3B", 8, "mxfp8", 512, 1, 4096, 0, 1, 1, 1, 1, 8, 64, 9299, ""),
    ("B200", "Qwen3_235B_a22B", 64, "mxfp8", 1024, 1, 4096, 0, 1, 8, 1, 2, 8, 128, 3269, ""),
    ("H100", "GPT OSS 120B", 64, "bf16", 512, 4, 4096, 0, 1, 4, 1, 1, 8, 2, 5630, ""),
    ("H100", "Qwen3_30B_a3B", 16, "fp8-cs", 512, 2, 4096, 0, 1, 2, 1, 24, 8, 32, 5275, ""),
    ("H100", "Qwen3_235B_a22B", 256, "fp8-cs", 2048, 1, 4096, 0, 2, 8, 1, 4, 32, 128, 1575, ""),
]
# Pipeline layouts the table does not print but Megatron-Bridge's recipe sets for the row's (pp, vp):
# src/megatron/bridge/recipes/deepseek/deepseek_v3.py @ v0.2.0, layout_map[(16, 1)] = embedding + 4 decoder
# layers, 14 stages of 4, then 1 decoder layer + the MTP module + the loss on the last stage
E9_LAYOUTS = {("B200", "DeepSeekV3"): dict(first_stage_layers=4, last_stage_layers=1)}
E9_NOTE = ("MoE runs force-balance tokens over experts and drop none (the table's footnote); recompute, dispatcher "
           "and overlap are not in the table: left to the software preset")
for (system, name, n, prec, gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep, ga, tps, note) in E9_TABLE:
    dp = n // (tp * pp * cp)
    if gbs != mbs * dp * ga:  # two rows' GA cells disagree with GBS / (MBS x DP): GBS is taken (it sets tokens)
        note = "; ".join(x for x in (note, f"the table's GA {ga} disagrees with GBS {gbs} / (MBS {mbs} x DP {dp}) = "
                                           f"{gbs // (mbs * dp)}; GBS taken") if x)
    sysd = dict(SYSTEMS[system])
    sysd.setdefault("gpus_per_node", 8 if system in ("B200", "H100") else (64 if n >= 64 else n))
    prec_tag = prec.replace("fp8-cs", "fp8cs")
    # a model run on one system in two layouts names its layout (the precisions are then not a pair)
    layouts = {(t[8:13]) for t in E9_TABLE if t[:2] == (system, name)}
    lay_tag = f"-PP{pp}EP{ep}" if len(layouts) > 1 else ""
    row = dict(run_id=f"E9-{system}-{name.replace(' ', '').replace('_', '-')}{lay_tag}-{prec_tag}", source=E9,
               **E9_MODELS[name], seq_len=seq, global_batch=gbs, micro_batch=mbs, tp=tp, pp=pp, vp=vp, dp=dp, cp=cp,
               ep=ep, sequence_parallel="auto" if tp > 1 else 0, zero_stage=3 if fsdp else 0,
               distributed_optimizer=0 if fsdp else 1, overlap="auto", recompute="auto", precision=prec,
               num_gpus=n, **sysd, **E9_SW)
    if E9_MODELS[name].get("experts"):
        row["moe_balance"] = "forced"  # the table's footnote (E9_NOTE)
    if note.startswith("w/ MTP"):
        row["mtp_layers"] = 1
    row.update(E9_LAYOUTS.get((system, name), {}))
    row["measured_step_time_s"] = gbs * seq / (tps * n)
    row["step_time_basis"] = f"global batch tokens / ({tps} tokens/s/GPU x {n} GPUs)"
    row["reported"] = f"{tps} tokens/s/GPU"
    extra = ("; NVLink domain: " + ("whole racks of 64 GPUs" if n >= 64 else f"one domain of {n}")
             if system.startswith("GB") else "")
    row["notes"] = "; ".join(x for x in (f"DGX-{system}", note, E9_NOTE) if x) + extra
    add(**row)


# ---- E10: pytorch/torchtitan torchtitan/distributed/deepep/README.md, Qwen3-30B-A3B on B200 ------------
# Its strong-scaling table (1-16 nodes of 8 B200, local batch 8) and the weak-scaling row with local batch 10.
# The run's settings are the README's config, torchtitan/models/qwen3/train_configs/qwen3_30b_a3b_with_deepep.toml:
# seq 4096, FSDP over every GPU (data_parallel_shard_degree -1) with EP 8 inside it, full activation
# checkpointing, torch.compile of model and loss, DeepEP dispatcher, forced load balance, BF16. Its dependency
# list (the README's "reproduced with") names PyTorch 2.9.0+cu128, whose SDPA prefers cuDNN on B200: preset
# torchtitan-torch2.9.
E10 = "E10 torchtitan DeepEP README (Qwen3-30B-A3B on B200)"
for nodes, lbs, tps in ((1, 8, 14796), (2, 8, 14380), (4, 8, 14276), (8, 8, 14107), (16, 8, 13856), (16, 10, 14123)):
    n = 8 * nodes
    row = dict(run_id=f"E10-B200-Qwen3-30B-{n}GPU-LBS{lbs}-bf16", source=E10, **QWEN3_30B, seq_len=4096,
               global_batch=lbs * n, micro_batch=lbs, tp=1, pp=1, vp=1, dp=n, cp=1, ep=8, sequence_parallel=0,
               zero_stage=3, distributed_optimizer=0, overlap="dp", recompute="full", precision="bf16", num_gpus=n,
               **B200_NODE, framework="torchtitan (FSDP2 + EP, DeepEP, torch.compile)", software="torchtitan-torch2.9",
               reshard_after_forward=1, moe_dispatcher="deepep", moe_balance="forced")
    row["measured_step_time_s"] = tokens_step(row, float(tps))
    row["step_time_basis"] = "tokens/s: global_batch x seq_len / (TPS/GPU x num_gpus)"
    row["reported"] = f"{tps} tokens/s/GPU"
    row["notes"] = (f"{nodes} node(s) of 8 B200, local batch {lbs}, seq 4096, FSDP {n} with EP 8, full AC, compile, "
                    "DeepEP, debug.moe_force_load_balance (qwen3_30b_a3b_with_deepep.toml); PyTorch 2.9.0+cu128; "
                    + ("strong-scaling table" if lbs == 8 else "weak-scaling table (LBS 10)"))
    add(**row)


# ---- E8 (continued): the model zoo's Qwen3-Next-80B-A3B run, added once its Gated DeltaNet layers were expressible
row = dict(run_id="E8-Qwen3-Next-80B-EP32-PP4-bf16", source=E8, model="qwen3-next-80b-a3b", arch="catalog",
           params_B=79.7, layers=48, hidden=2048, heads=16, kv_heads=2, ffn_hidden=5120, ffn_act="swiglu", vocab=151936,
           seq_len=4096, global_batch=256, micro_batch=1, tp=1, pp=4, vp=3, dp=32, cp=1, ep=32, sequence_parallel=0,
           zero_stage=0, distributed_optimizer=1, overlap="dp,pp", recompute="selective", precision="bf16",
           num_gpus=128, **DGX_H100, framework="Megatron-Core (dev, MoE model zoo)", software="megatron-core-2025",
           schedule="interleaved-1f1b", experts=512, top_k=10, moe_ffn_hidden=512, shared_experts=1,
           moe_dense_layers=0, etp=1, head_dim=256, moe_dispatcher="deepep", mtp_layers=1, moe_balance="forced")
row["measured_step_time_s"] = 2.2
row["step_time_basis"] = "iteration time as printed ('Step time (sec)' column)"
row["reported"] = "2.2 s/step"
row["notes"] = ("Qwen3-Next-80B-A3B (36 Gated DeltaNet + 12 gated-attention layers, model_configs/benchmarking/"
                "Qwen3-Next-80B-A3B.yaml); 128 H100, InfiniBand 8x50 GB/s per node; 89 TFLOP/s per GPU as printed; "
                "uniform split, 4 layers per virtual stage (runtime.conf: 48 layers, no embedding/loss accounting); "
                "recompute 'norm, act, shared_expert' = selective layernorm + moe_act + shared_experts modules (the "
                "shared expert's recomputed GEMMs are not priced); cross-node EP32, DeepEP, "
                "--moe-router-force-load-balancing (best_practice/qwen3/run_next_80b.sh), GA 8, one MTP layer, code "
                "dev(bbc762d5); the readme: 'not well tuned'")
add(**row)

# ---- E11: NVIDIA-NeMo/Megatron-Bridge pull request #4808, DeepSeek-V4-Pro on 256 GB300 ---------------------
# "feat(recipe): add DeepSeek-V4-Pro GB300 performance recipe" (merged 2026-07-11): "validated on 256 GB300 GPUs for
# 40 iterations at approximately 21.5 seconds per iteration; approximately 996 calibrated TFLOP/s/GPU". The layout is
# the recipe it adds, perf_recipes/deepseek/gb300/deepseek_v4.py deepseek_v4_pro_pretrain_256gpu_gb300_fp8mx_config
# (Megatron-Bridge @ 067f987): TP1 PP4 VPP4 EP64, GBS 4096, MBS 1, seq 4096, MXFP8 with MXFP8 parameter gather,
# HybridEP over 64 ranks of one NVLink domain, forced load balance, full-iteration CUDA graphs, selective recompute
# of mla_up_proj and mhc, offloading of core_attn and attn_proj activations, layout Et*4|(tttt|)*14tmL (the MTP
# layer on the last chunk). Model: the catalog's deepseek-v4-pro with its one MTP layer (the bridge sets the HF
# config's num_nextn_predict_layers).
E11 = "E11 Megatron-Bridge PR 4808 (DeepSeek-V4-Pro on 256 GB300)"
DSV4_PRO = dict(model="deepseek-v4-pro", arch="catalog", params_B=1600, layers=61, hidden=7168, heads=128, kv_heads=1,
                ffn_hidden=3072, ffn_act="swiglu", vocab=129280, experts=384, top_k=6, moe_ffn_hidden=3072,
                shared_experts=1, moe_dense_layers=0, etp=1)
row = dict(run_id="E11-GB300-DeepSeekV4Pro-PP4VP4EP64-mxfp8", source=E11, **DSV4_PRO, seq_len=4096, global_batch=4096,
           micro_batch=1, tp=1, pp=4, vp=4, dp=64, cp=1, ep=64, sequence_parallel=0, zero_stage=0,
           distributed_optimizer=1, overlap="auto", recompute="auto", precision="mxfp8", num_gpus=256,
           **SYSTEMS["GB300"], framework="Megatron-Bridge (Megatron-Core dev)", software="megatron-bridge-2025",
           mtp_layers=1, moe_balance="forced")
row["gpus_per_node"] = 64
row["measured_step_time_s"] = 21.5
row["step_time_basis"] = "iteration time as stated (approximately, over 40 iterations)"
row["reported"] = "21.5 s/iter"  # "approximately 21.5 seconds per iteration"
row["notes"] = ("DGX-GB300; NVLink domain: whole racks of 64 GPUs (HybridEP's 64 ranks per domain); recipe layout "
                "Et*4|(tttt|)*14tmL priced as the balanced split with the MTP layer on the last stage; recompute of "
                "mla_up_proj and mhc and activation offloading cannot be said: auto; predicted -1.9% (7c0b293) and -0.6% "
                "(after the review's kernel-width and memory fixes) before it entered the fit")
add(**row)

def main() -> None:
    with OUT.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in ROWS:
            r = dict(r)
            r["measured_step_time_s"] = fmt(r["measured_step_time_s"])
            unknown = set(r) - set(COLUMNS)
            missing = [c for c in CONTRACT if str(r.get(c, "")) == ""]
            assert not unknown and not missing, (r["run_id"], unknown, missing)
            w.writerow({c: r.get(c, "") for c in COLUMNS})
    print(f"{len(ROWS)} rows -> {OUT}")


if __name__ == "__main__":
    main()
