"""Render the README's accuracy-and-speed table from benchmarks/results/*.json, so that every figure in
the README is a benchmark's output, never typed by hand.

    python benchmarks/readme_figures.py           # rewrite the block between the README markers
    python benchmarks/readme_figures.py --check   # exit 1 if the README is stale (a test runs this)

A cell's `{file:dotted.path:format}` is the value at that path of results/<file>.json (list items by
index). Rows whose wording states a test's tolerance, not a measurement, name the test instead.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
BEGIN, END = "<!-- figures:begin (benchmarks/readme_figures.py) -->", "<!-- figures:end -->"

# (check, result template, how to reproduce)
ROWS: tuple[tuple[str, str, str], ...] = (
    ("step time, leave-one-source-out cross-validation over the published runs and the evidence rows "
     "(`data/evidence/training_runs.csv`; each source predicted with the global parameters refitted without it)",
     "mean abs error {accuracy:cross_validation.cv_mean_abs_error_pct:.1f}% over {accuracy:cross_validation.rows} rows "
     "from {accuracy:cross_validation.sources} sources, max {accuracy:cross_validation.cv_max_abs_error_pct:.1f}% "
     "(in-sample {accuracy:cross_validation.in_sample_mean_abs_error_pct:.1f}%; target 8% mean, 25% max: not met)",
     "`distscope validate data/validation/published_runs.csv data/evidence/training_runs.csv --cv source`"),
    ("step time, the same cross-validation restricted to MoE rows and to Blackwell rows (B200, GB200, GB300)",
     "MoE: mean abs error {accuracy:cross_validation.moe_cv_mean_abs_error_pct:.1f}% over "
     "{accuracy:cross_validation.moe_rows} rows; Blackwell: {accuracy:cross_validation.blackwell_cv_mean_abs_error_pct:.1f}% "
     "over {accuracy:cross_validation.blackwell_rows} rows (target 15% each)",
     "`python benchmarks/accuracy.py`"),
    ("step time, leave-one-source-out over the 51 published runs alone",
     "mean abs error {accuracy:cross_validation_published_only.cv_mean_abs_error_pct:.1f}%, max "
     "{accuracy:cross_validation_published_only.cv_max_abs_error_pct:.1f}% (in-sample "
     "{accuracy:cross_validation_published_only.in_sample_mean_abs_error_pct:.1f}%)",
     "`distscope validate data/validation/published_runs.csv --cv source`"),
    ("the 51 published plans given only their printed flags (degrees, batch, precision, stated SP/recompute/ZeRO, "
     "the run's software preset; everything else from the defaults every verb applies)",
     "mean abs error {accuracy:published_printed_flags.mean_abs_error_pct:.1f}%, max "
     "{accuracy:published_printed_flags.max_abs_error_pct:.1f}% (in-sample, shipped calibration; the harness, which "
     "searches every `auto` cell: {accuracy:published_in_sample.mean_abs_error_pct:.1f}%)",
     "`python benchmarks/accuracy.py`"),
    ("step time with the shipped calibration (fitted on both sets: in-sample)",
     "published runs: mean {accuracy:published_in_sample.mean_abs_error_pct:.1f}%, max "
     "{accuracy:published_in_sample.max_abs_error_pct:.1f}% ({accuracy:published_in_sample.worst_run}); evidence "
     "rows: mean {accuracy:evidence_in_sample.mean_abs_error_pct:.1f}%, max "
     "{accuracy:evidence_in_sample.max_abs_error_pct:.1f}% ({accuracy:evidence_in_sample.worst_run})",
     "`python benchmarks/accuracy.py`"),
    ("FP8 / BF16 end-to-end speed-up, evidence pairs that differ only in precision",
     "measured {accuracy:fp8_pairs.measured_min:.2f}-{accuracy:fp8_pairs.measured_max:.2f}x, predicted "
     "{accuracy:fp8_pairs.predicted_min:.2f}-{accuracy:fp8_pairs.predicted_max:.2f}x over {accuracy:fp8_pairs.pairs} "
     "pairs (mean abs difference {accuracy:fp8_pairs.mean_abs_diff:.2f})", "`python benchmarks/accuracy.py`"),
    ("MXFP8 against FP8 current scaling (and BF16) on B200 / GB200 / GB300, evidence pairs that differ only in "
     "precision (E9); the MXFP8 GEMM rate is TE's B300 kernel measurement, not fitted to them",
     "step-time ratio mxfp8 / fp8-cs measured {accuracy:mx_pairs.fp8cs_measured_min:.3f}-"
     "{accuracy:mx_pairs.fp8cs_measured_max:.3f}, predicted {accuracy:mx_pairs.fp8cs_predicted_min:.3f}-"
     "{accuracy:mx_pairs.fp8cs_predicted_max:.3f} over {accuracy:mx_pairs.fp8cs_pairs} pairs; every pair, the "
     "mxfp8 / bf16 one included, within {accuracy:mx_pairs.max_rel_diff_pct:.1f}%",
     "`python benchmarks/accuracy.py`"),
    ("MoE routing imbalance: Mixtral 8x22B on 128 H100 (E8), its learned router (aux loss 1e-2) over forced "
     "balance, step-time ratio",
     "published {accuracy:routing_pair.published:.3f}x; predicted {accuracy:routing_pair.aux_loss:.3f}x as "
     "aux-loss (skew measured at 1e-3), {accuracy:routing_pair.aux_free:.3f}x as aux-free",
     "`python benchmarks/accuracy.py`"),
    ("peak memory per GPU vs published peaks (torchtitan max-reserved, Megatron-LM's memory tool and the Zero "
     "Bubble paper's runs; `data/evidence/memory_runs.csv`)",
     "mean abs error {accuracy:memory.mean_abs_error_pct:.1f}% over {accuracy:memory.rows} rows, max "
     "{accuracy:memory.max_abs_error_pct:.1f}% (target 10%: not met); eager rows "
     "{accuracy:memory.eager_mean_abs_error_pct:.1f}% ({accuracy:memory.eager_rows}); rows added after the model was "
     "built {accuracy:memory.held_out_mean_abs_error_pct:.1f}% ({accuracy:memory.held_out_rows})",
     "`python benchmarks/accuracy.py`"),
    ("step time of arbitrary torch modules (`--model torch:FILE.py:FACTORY`) against NVIDIA DeepLearningExamples' "
     "ResNet-50 v1.5 and ResNeXt-101 32x4d on DGX A100 and on DGX-1 V100 32GB (`data/evidence/module_runs.csv`; "
     "nothing fitted to them; the V100 rows added after the convolution model), and SE-ResNeXt-101 32x4d on both "
     "(added after every module term: out of sample)",
     "mixed precision: mean abs error {module_accuracy:amp_mean_abs_error_pct:.1f}% over {module_accuracy:amp_rows} "
     "rows (A100 ResNet-50 {module_accuracy:a100_rn50_amp_mean_abs_error_pct:.1f}%, ResNeXt-101 "
     "{module_accuracy:a100_rnxt101_amp_mean_abs_error_pct:.1f}%, V100 both "
     "{module_accuracy:v100_amp_mean_abs_error_pct:.1f}%); A100 TF32: {module_accuracy:tf32_mean_abs_error_pct:.1f}% "
     "over {module_accuracy:tf32_rows} rows (NCHW, with cuDNN's layout transforms and NCHW batch norm priced from H100 profiles; no A100 TF32 kernel data); V100 FP32 "
     "{module_accuracy:v100_fp32_mean_abs_error_pct:.1f}% over {module_accuracy:v100_fp32_rows} (no V100 GEMM data: the "
     "default ceiling; its ungrouped 3x3 layers at the 2.25x of cuDNN's FP32 Winograd kernels); SE-ResNeXt-101 {module_accuracy:sernxt101_mean_abs_error_pct:.1f}% over "
     "{module_accuracy:sernxt101_rows}; all {module_accuracy:rows}: {module_accuracy:mean_abs_error_pct:.1f}%, max "
     "{module_accuracy:max_abs_error_pct:.1f}%",
     "`python benchmarks/module_accuracy.py`"),
    ("diffusion inference (`serve diffusion`: SDXL and SD 1.5 from diffusers on the meta device, patch parallelism) "
     "against fal.ai's end-to-end latencies on one A100 and DistriFusion's SDXL latencies and speed-ups at 1024, "
     "2048 and 3840 pixels on 1/2/4/8 A100s (`data/evidence/diffusion_runs.csv`; nothing fitted to them)",
     "mean abs error {diffusion_accuracy:mean_abs_error_pct:.1f}% over {diffusion_accuracy:rows} rows, max "
     "{diffusion_accuracy:max_abs_error_pct:.1f}% (target 15% over 10 runs, met: {diffusion_accuracy:meets_target}). "
     "Per source: DistriFusion (PyTorch 2.2, "
     "FlashAttention-2): {diffusion_accuracy:distrifusion_mean_abs_error_pct:.1f}% over its 12 rows; one-GPU "
     "latency {diffusion_accuracy:per_row.D1-SDXL-1024-1GPU.error_pct:+.1f}% / "
     "{diffusion_accuracy:per_row.D1-SDXL-2048-1GPU.error_pct:+.1f}% / "
     "{diffusion_accuracy:per_row.D1-SDXL-3840-1GPU.error_pct:+.1f}% at 1024 / 2048 / 3840 pixels; 3840-pixel "
     "speed-ups {diffusion_accuracy:per_row.D1-SDXL-3840-2GPU.predicted:.2f}/"
     "{diffusion_accuracy:per_row.D1-SDXL-3840-4GPU.predicted:.2f}/"
     "{diffusion_accuracy:per_row.D1-SDXL-3840-8GPU.predicted:.2f}x predicted vs measured "
     "{diffusion_accuracy:per_row.D1-SDXL-3840-2GPU.measured:.1f}/{diffusion_accuracy:per_row.D1-SDXL-3840-4GPU.measured:.1f}/"
     "{diffusion_accuracy:per_row.D1-SDXL-3840-8GPU.measured:.1f}x, 1024-pixel ones "
     "{diffusion_accuracy:per_row.D1-SDXL-1024-8GPU.error_pct:+.0f}% at 8 GPUs. fal.ai (PyTorch 2.1, whose SDPA "
     "was FlashAttention-1, priced as FlashAttention-2): SDXL eager "
     "{diffusion_accuracy:per_row.F1-SDXL-A100-EAGER.error_pct:+.1f}%, compiled with a channels-last UNet "
     "{diffusion_accuracy:per_row.F1-SDXL-A100-COMPILED-CL.error_pct:+.1f}%; SD 1.5 eager "
     "{diffusion_accuracy:per_row.F1-SD15-A100-EAGER.error_pct:+.1f}%, channels-last "
     "{diffusion_accuracy:per_row.F1-SD15-A100-COMPILED-CL.error_pct:+.1f}%",
     "`python benchmarks/diffusion_accuracy.py`"),
    ("embedding sharding planner (`plan --model dlrm:...`) vs TorchRec 1.8.0's own EmbeddingShardingPlanner on the "
     "same tables and clusters, both plans priced by distscope's step model: the MLPerf DLRM-DCNv2 tables and "
     "`examples/dlrm` on 8-256 GPUs, and 24 random table sets (12 of them first run after an earlier planner was "
     "frozen; the hier_auto start came later)",
     "never slower: named cases worst ratio {torchrec_compare:named_worst_ratio:.3f} ({torchrec_compare:named_cases}); "
     "fresh random sets {torchrec_compare:fresh_slower} of {torchrec_compare:fresh_cases} slower, median ratio "
     "{torchrec_compare:fresh_median_ratio:.2f}; planner time {torchrec_compare:plan_time_ratio_median:.2f}x "
     "TorchRec's (median), at most {torchrec_compare:distscope_plan_s_max:.1f} s (published step times: the "
     "next row)",
     "`python benchmarks/torchrec_compare.py`"),
    ("DLRM step time vs published runs (`data/evidence/dlrm_runs.csv`: MLPerf Training result logs, DLRM of "
     "v0.7-v2.1 and DLRM-DCNv2 of v3.0-v4.0, every submitter's A100, H100 and H200 systems a preset expresses, "
     "4-128 GPUs; nothing fitted)",
     "mean abs error {dlrm_accuracy:mean_abs_error_pct:.1f}% over {dlrm_accuracy:count} runs from "
     "{dlrm_accuracy:sources} sources (target 15% over 10 runs per family: met by DCNv2, "
     "{dlrm_accuracy:dcnv2.mean_abs_error_pct:.1f}% over {dlrm_accuracy:dcnv2.count} runs; not by DLRM, "
     "{dlrm_accuracy:dlrm.mean_abs_error_pct:.1f}%). DLRM: one node "
     "{dlrm_accuracy:dlrm.one_node_mean_abs_error_pct:.1f}% mean abs over {dlrm_accuracy:dlrm.one_node_count} runs, "
     "signed {dlrm_accuracy:dlrm.one_node_mean_error_pct:+.1f}%; 4-14 nodes "
     "{dlrm_accuracy:dlrm.multi_node_min_error_pct:+.0f}% to {dlrm_accuracy:dlrm.multi_node_max_error_pct:+.0f}% "
     "({dlrm_accuracy:dlrm.multi_node_count} runs). DCNv2: one node "
     "{dlrm_accuracy:dcnv2.one_node_mean_abs_error_pct:.1f}% over {dlrm_accuracy:dcnv2.one_node_count} runs, signed "
     "{dlrm_accuracy:dcnv2.one_node_mean_error_pct:+.1f}%; 8-16 nodes "
     "{dlrm_accuracy:dcnv2.multi_node_min_error_pct:+.0f}% to {dlrm_accuracy:dcnv2.multi_node_max_error_pct:+.0f}% "
     "({dlrm_accuracy:dcnv2.multi_node_count} runs), under HugeCTR's hier_auto plan with each run's config "
     "arguments and HugeCTR's fp16 pooled rows. H100/H200 rows use the GEMM and element-wise tables measured on "
     "those GPUs (`data/device/`); on the analytic kernel model alone (`estimate` without `--profile`) DCNv2 is "
     "{dlrm_accuracy:analytic_kernels.dcnv2.mean_abs_error_pct:.1f}% (one node signed "
     "{dlrm_accuracy:analytic_kernels.dcnv2.one_node_mean_error_pct:+.1f}%) and all runs "
     "{dlrm_accuracy:analytic_kernels.all.mean_abs_error_pct:.1f}%. DLRM's multi-node runs use HugeCTR's hybrid "
     "embedding (frequent categories data-parallel; `--sharding hugectr:hybrid:frequent=F:infrequent=I`), whose F "
     "no config or log publishes: their point figures use the planner's sharding, and priced at both ends their "
     "configs allow (no frequent category; as many as clear the count threshold) "
     "{dlrm_accuracy:hybrid_brackets.inside} of {dlrm_accuracy:hybrid_brackets.count} lie between (the two v1.0 "
     "runs are slower than both ends)",
     "`python benchmarks/dlrm_accuracy.py`"),
    ("error-bounded compression of a DLRM's embedding all-to-all (pooled rows and their gradients), a small DLRM "
     "trained on 4 gloo ranks, bound relative to each chunk's value range",
     "after {eb_compress:steps} steps, SZ3 at 1%: final loss {eb_compress:runs.0.vs_uncompressed_pct:+.2f}% with {eb_compress:runs.0.a2a_ratio:.1f}x "
     "fewer all-to-all bytes; ZFP at 1%: {eb_compress:runs.2.vs_uncompressed_pct:+.2f}% at "
     "{eb_compress:runs.2.a2a_ratio:.2f}x (target: within 1%; worst of 4 runs {eb_compress:worst_abs_pct:.2f}%); "
     "the CPU codecs run at {eb_compress:codecs.0.encode_GBps:.2f} GB/s here, too slow to pay on GPU links",
     "`python benchmarks/eb_compress.py`"),
    ("8-GPU all-reduce busbw, ≥ 64 MiB", "within 15% of every DGX H100 sweep row and the A100/H200/H800 peaks "
     "(test tolerance)", "`pytest tests/core/test_comm.py`"),
    ("parameter counts, catalog models", "within 1% of the official figure or its printed rounding (test tolerance)",
     "`pytest tests/core/test_params.py`"),
    ("the README's first command on a fresh venv (`pip install -e . && distscope plan`)",
     "{fresh_install:total_s:.0f} s ({fresh_install:install_s:.0f} s install, {fresh_install:plan_s:.0f} s plan; "
     "target 60 s); {fresh_install:packages} packages, {fresh_install:venv_MB} MB, torch installed: "
     "{fresh_install:torch_installed}", "`python benchmarks/fresh_install.py`"),
    ("estimate evaluations per second, one core",
     "{estimate_rate:evaluations_per_s:,.0f} (target {estimate_rate:target:,}; Calculon ~240)",
     "`taskset -c 0 python benchmarks/estimate_rate.py`"),
    ("plan search CPU time, GPT-3 175B on 1,024 A100 / Llama 3.1 405B on 16,384 H100",
     "{plan_speed:cases.0.plans_evaluated:,} plans in {plan_speed:cases.0.search_cpu_s:.1f} s / "
     "{plan_speed:cases.1.plans_evaluated:,} in {plan_speed:cases.1.search_cpu_s:.1f} s (target 10 s); CPU time "
     "timed side by side vs the tree when issue 19's work began ({plan_speed:side_by_side.0.against}): "
     "×{plan_speed:side_by_side.0.ratio_current_to_baseline.0:.2f} / "
     "×{plan_speed:side_by_side.0.ratio_current_to_baseline.1:.2f} (target ≤ ×1.20); vs the planner before issue 9 "
     "({plan_speed:side_by_side.1.against}): ×{plan_speed:side_by_side.1.ratio_current_to_baseline.0:.2f} / "
     "×{plan_speed:side_by_side.1.ratio_current_to_baseline.1:.2f}",
     "`python benchmarks/plan_speed.py --against 4297024,fe10834`"),
    ("plan search wall time, one process vs one per core (`plan --workers`, the default): GPT-3 175B on 1,024 A100 / "
     "Qwen3-30B-A3B on 128 H100 / DeepSeek-V3 on 2,048 H100",
     "{parallel_search:workers} processes: ×{parallel_search:cases.0.speedup:.2f} / "
     "×{parallel_search:cases.1.speedup:.2f} / ×{parallel_search:cases.2.speedup:.2f} (DeepSeek-V3: "
     "{parallel_search:cases.2.serial_s:.0f} s -> {parallel_search:cases.2.parallel_s:.0f} s); the same plans kept, "
     "in the same order: {parallel_search:all_same}", "`python benchmarks/parallel_search.py`"),
    ("plans the search misses: candidates whose full estimate beats the reported #10, in eight searches "
     "(405B, 175B, 70B on H100 and on B200, Mixtral 8x22B, 13B, 8B on 16 and 128 GPUs)",
     "{screen_check:missed_total} (target 0); the screen lies up to {screen_check:pipeline_max_above_pct:.1f}% "
     "(pipeline closed form) and {screen_check:folded_max_above_pct:.1f}% (folded ZeRO streams) above the full "
     "estimate, so every kept candidate is estimated in full. Branch and bound: full estimates below their compute "
     "bound {screen_check:bound_over_total}; skipped layouts whose bound lies below the #10's step "
     "{screen_check:pruned_below_kth_total} (better plans among them: {screen_check:pruned_missed_total})",
     "`python benchmarks/screen_check.py`"),
    ("planner vs the published plans",
     "published plan inside the search space for {plan_quality:published_in_space} of {plan_quality:rows}; planner "
     "no slower on {plan_quality:planner_no_slower}; median predicted gain {plan_quality:median_gain_pct:.1f}% "
     "(predictions, not measurements; `docs/plan_quality.md`)", "`python benchmarks/plan_quality.py`"),
    ("`explore`, Llama 3 70B on 1,024 H100s, 10×10 grid of HBM × NIC bandwidth",
     "{explore_speed:grid_10x10.wall_s:.1f} s on 2 local processes (target < 60 s, met: {explore_speed:grid_10x10.meets_target}); "
     "{explore_speed:per_core.points_per_s:.2f} points/s on one core; 1 → 2 processes "
     "{explore_speed:scaling.speedup:.2f}x (target ≥ 1.7x)", "`python benchmarks/explore_speed.py`"),
    ("`explore` on Ray (local instance, 2 CPUs) vs the local pool",
     "same output bytes (a test); +{explore_speed:ray.grid_40_points.overhead_per_point_ms:.1f} ms per point "
     "(70B points); {explore_speed:ray.startup_s:.1f} s to start Ray", "`python benchmarks/explore_speed.py`"),
    ("ASTRA-sim parity (20 reference cases)", "within 1% of ASTRA-sim's finish times (test tolerance)",
     "`pytest tests/sim/test_astra_parity.py`"),
    ("simulate vs estimate on the 51 published plans",
     "max {simulate_speed:estimate_consistency.max_abs_error_pct:.1f}% ({simulate_speed:estimate_consistency.worst_row}), mean "
     "{simulate_speed:estimate_consistency.mean_abs_error_pct:.1f}%", "`python benchmarks/simulate_speed.py`"),
    ("simulate vs estimate over 1,000 random valid plans of the whole plan space (every ZeRO stage and the "
     "distributed optimizer, every schedule, vp, CP, EP, compression, recompute mode, uneven stages, FP8, presets)",
     "{consistency:within_target} of {consistency:plans} within 3% (target: all; met: {consistency:meets_target}); max "
     "{consistency:max_abs_rel_diff:.1%}, mean {consistency:mean_abs_rel_diff:.2%}, p99 {consistency:p99:.1%}",
     "`python benchmarks/consistency.py`"),
    ("fabric routing: published ECMP-vs-multipath all-reduce gaps (data/evidence/fabric_routing.csv: UCCL on 6 H100 "
     "nodes, OCI GB300 NVL72; Meta's E-ECMP ratio), ECMP over 20 seeds; a 1,024-GPU ring all-reduce / EP-64 "
     "all-to-all on a rail-optimized Clos with ECMP; training steps with `simulate --fabric preset`",
     "gap error {fabric_routing:summary.uccl_gap_error_points:+.1f} / {fabric_routing:summary.oci_gap_error_points:+.1f} "
     "points (target: within 10; {fabric_routing:gap_rows_within_target} of {fabric_routing:gap_rows}); Meta's "
     "multipath/ECMP ratio {fabric_routing:summary.meta_ratio_model:.2f} vs published up to 1.4 (missed); "
     "{fabric_routing:speed.allreduce_1024_ecmp_wall_s:.2f} s / {fabric_routing:speed.alltoall_ep64_on_1024_ecmp_wall_s:.1f} s "
     "(target 10 s); a Llama 3 70B step on 1,024 GPUs generated and simulated on the fabric in "
     "{fabric_routing:training_steps.llama3-70b.ecmp_total_wall_s:.1f} s (target 60 s), Mixtral EP 8 over 2 nodes "
     "{fabric_routing:training_steps.mixtral-8x7b-ep8.levels.step_s:.3f} s on the levels, "
     "{fabric_routing:training_steps.mixtral-8x7b-ep8.ecmp.step_s:.3f} s with ECMP, "
     "{fabric_routing:training_steps.mixtral-8x7b-ep8.spray.step_s:.3f} s sprayed; Llama 3.1 405B on 16,384 GPUs (a "
     "three-tier Clos) {fabric_routing:training_steps.llama31-405b-16k.levels.step_s:.3f} s on the levels, "
     "{fabric_routing:training_steps.llama31-405b-16k.ecmp.step_s:.3f} s with ECMP, in "
     "{fabric_routing:training_steps.llama31-405b-16k.ecmp_total_wall_s:.0f} s", "`python benchmarks/fabric_routing.py`"),
    ("Themis scheduling vs ASTRA-sim 2.0 (`data/reference/astra_sim_themis`: baseline and Themis on 64-NPU 2-D "
     "and 3-D networks with unequal dimension bandwidths, built from its source with the option exposed)",
     "{themis_parity:within_5pct} of {themis_parity:rows} rows within 5% (target); Themis+SCF mean "
     "{themis_parity:by_scheduling.themis+SCF.mean_abs_error_pct:.2f}%, max "
     "{themis_parity:by_scheduling.themis+SCF.max_abs_error_pct:.2f}%; ASTRA-sim's Themis/baseline speed-up "
     "{themis_parity:themis_speedup.astra_min:.2f}-{themis_parity:themis_speedup.astra_max:.2f}x (faster in "
     "{themis_parity:themis_speedup.astra_faster} of {themis_parity:themis_speedup.groups}), distscope's within "
     "{themis_parity:themis_speedup.max_abs_diff:.3f} of it", "`python benchmarks/themis_parity.py`"),
    ("DCQCN (per-flow reaction-point state machine on fluid queues) against ns-3 packet-level N-to-1 incast runs "
     "(`data/reference/ns3_dcqcn`: the HPCC ns-3 code ASTRA-sim's ns-3 backend derives from); on the dgx-h100 preset "
     "fabric: incast, an EP-64 all-to-all and a rail-aligned ring all-reduce on 1,024 GPUs with ECMP",
     "slowdown vs ns-3 over {dcqcn_incast:ns3.runs} runs (ns-3: {dcqcn_incast:ns3.ns3_slowdown_min:.2f}-"
     "{dcqcn_incast:ns3.ns3_slowdown_max:.2f}x): mean abs error {dcqcn_incast:ns3.mean_abs_error_pct:.1f}%, max "
     "{dcqcn_incast:ns3.max_abs_error_pct:.0f}%; at 400 Gb/s: incast 8 x 1 MB {dcqcn_incast:incast.3.slowdown:.2f}x ideal, "
     "32 x 128 MB {dcqcn_incast:incast.8.slowdown:.3f}x; all-to-all NIC share {dcqcn_incast:ep64_all_to_all.none.nic_share:.2f} "
     "ideal, {dcqcn_incast:ep64_all_to_all.dcqcn.nic_share:.2f} under DCQCN (in "
     "{dcqcn_incast:ep64_all_to_all.dcqcn.wall_s:.0f} s); ring {dcqcn_incast:rail_ring_all_reduce.none.nic_share:.2f} / "
     "{dcqcn_incast:rail_ring_all_reduce.dcqcn.nic_share:.2f}", "`python benchmarks/dcqcn_incast.py`"),
    ("distscope's models against one NVIDIA H200 (`data/device/nvidia-h200-2026-11-26`, made by "
     "`data/device/run_gpu_checks.sh`; nothing fitted to it): kernels, MoE grouped GEMMs, ResNet training steps, "
     "the example GPT captured on the GPU, the CPU scale-out on its 16 cores",
     "GEMM model vs 100 measured shapes each: bf16 {device_check_h200:gemm.bf16.all.mean_abs_pct}% / fp8 "
     "{device_check_h200:gemm.fp8.all.mean_abs_pct}% mean abs error; routed experts vs torch._grouped_mm (>= 2048 rows per "
     "group) {device_check_h200:grouped_gemm.m_per_group_ge_2048.mean_abs_pct}%; ResNet-50 step at batch 256 "
     "{device_check_h200:modules.rows.3.error_pct:+.1f}% (host-bound small batches down to "
     "-{device_check_h200:modules.all.max_abs_pct:.0f}%); GPU captures: GPU-bound "
     "{device_check_h200:captures.gpu_compute_bound.mean_abs_pct}% mean abs ({device_check_h200:captures.gpu_compute_bound.n}), "
     "launch-bound {device_check_h200:captures.gpu_launch_bound.mean_abs_pct}% ({device_check_h200:captures.gpu_launch_bound.n}; "
     "target 15%: not met); 2 -> 8 gloo ranks {device_check_h200:captures.cpu_scale_2_to_8.error_pct:+.1f}%; distscope's "
     "eager int4 codec {device_check_h200:codec.int4_g128.encode_GBps_fp32_input} GB/s vs "
     "{device_check_h200:codec.estimator_gpu_quant_GBps} assumed",
     "`python benchmarks/device_check.py`"),
    ("the same checks on one NVIDIA H100 80GB HBM3 (`data/device/nvidia-h100-2026-11-26`), a later session: out of "
     "sample for every model and for the H200's test bounds; plus FP8 expert GEMMs, MLA attention, ResNet-50 convolutions, nn.EmbeddingBag lookups "
     "and FP8 scaling recipes",
     "GEMM bf16 {device_check_h100:gemm.bf16.all.mean_abs_pct}% / fp8 {device_check_h100:gemm.fp8.all.mean_abs_pct}% mean "
     "abs (signed {device_check_h100:gemm.bf16.all.signed_mean_pct}% / {device_check_h100:gemm.fp8.all.signed_mean_pct}%: "
     "the model is slow at small N, K); routed experts {device_check_h100:grouped_gemm.m_per_group_ge_2048.mean_abs_pct}%; "
     "FP8 (row-wise, torch._scaled_grouped_mm) {device_check_h100:grouped_gemm_fp8.m_per_group_ge_2048.mean_abs_pct}%; "
     "DeepSeek-V3 MLA attention on the cuDNN curve {device_check_h100:mla_attention.cudnn.both.mean_abs_pct}%; "
     "ResNet-50 convolutions as implicit GEMMs (efficiency.conv_time_s), mean abs: 1x1 "
     "{device_check_h100:conv.1x1.mean_abs_pct}%, 3x3 {device_check_h100:conv.3x3.mean_abs_pct}% (on the GEMM "
     "curve they were 78% too slow), the 3-channel stem {device_check_h100:conv.stem_7x7.signed_mean_pct:+.0f}%; "
     "ResNet-50 b256 {device_check_h100:modules.rows.3.error_pct:+.1f}%; GPU-bound captures "
     "{device_check_h100:captures.gpu_compute_bound.mean_abs_pct}% ({device_check_h100:captures.gpu_compute_bound.n}), "
     "launch-bound {device_check_h100:captures.gpu_launch_bound.mean_abs_pct}% "
     "({device_check_h100:captures.gpu_launch_bound.n}); 2 -> 8 gloo ranks "
     "{device_check_h100:captures.cpu_scale_2_to_8.error_pct:+.1f}%; embedding lookup forward (pooling >= 16) "
     "{device_check_h100:embedding_bag.summary.pooling_ge_16_dim_ge_32.signed_mean_pct:+.0f}% (model too fast); FP8 "
     "GEMM over per-tensor scaling, median: row-wise {device_check_h100:fp8_scaling.median_over_tensorwise.rowwise:.2f}, "
     "DeepSeek-V3 1x128 / 128x128 blocks {device_check_h100:fp8_scaling.median_over_tensorwise.blockwise_1x128_128x128:.2f}",
     "`python benchmarks/device_check.py`"),
    ("the H100 again (`data/device/nvidia-h100-2026-11-27`, probe only): ResNet-50 / ResNeXt-101 training steps "
     "profiled kernel by kernel (torch.profiler) in bf16, fp16, TF32 and fp32 (channels-last; NCHW for two), and one MoE layer's routed experts as an "
     "eager torchtitan-style block, against the models' own ops",
     "profiled step vs the module model's ops: ResNet-50 bf16 {device_check_h100_2026_11_27:module_profile.resnet50_bf16-autocast_b128.total_error_pct:+.1f}%, "
     "TF32 {device_check_h100_2026_11_27:module_profile.resnet50_tf32_b128.total_error_pct:+.1f}%, fp32 {device_check_h100_2026_11_27:module_profile.resnet50_fp32_b128.total_error_pct:+.1f}%; "
     "ResNeXt-101 bf16 {device_check_h100_2026_11_27:module_profile.resnext101_32x4d_bf16-autocast_b128.total_error_pct:+.1f}%, TF32 "
     "{device_check_h100_2026_11_27:module_profile.resnext101_32x4d_tf32_b128.total_error_pct:+.1f}%, fp32 {device_check_h100_2026_11_27:module_profile.resnext101_32x4d_fp32_b128.total_error_pct:+.1f}%; "
     "bf16 batch norm (PyTorch's own kernels; NATIVE_BN_MEM_ETA is set from it) {device_check_h100_2026_11_27:module_profile.resnet50_bf16-autocast_b128.measured_ms.batch_norm} ms "
     "measured vs {device_check_h100_2026_11_27:module_profile.resnet50_bf16-autocast_b128.model_ms.batch_norm} ms; fp16 autocast (cuDNN's batch norm, priced unchanged, "
     "measured after) ResNet-50 {device_check_h100_2026_11_27:module_profile.resnet50_fp16-autocast_b128.total_error_pct:+.1f}%, ResNeXt-101 "
     "{device_check_h100_2026_11_27:module_profile.resnext101_32x4d_fp16-autocast_b128.total_error_pct:+.1f}%; NCHW (layout transforms, cuDNN's NCHW batch norm) ResNet-50 TF32 "
     "{device_check_h100_2026_11_27:module_profile.resnet50_tf32_b128_nchw.total_error_pct:+.1f}%, fp16 "
     "{device_check_h100_2026_11_27:module_profile.resnet50_fp16-autocast_b128_nchw.total_error_pct:+.1f}%; "
     "TF32 / fp32 steps mean abs "
     "{device_check_h100_2026_11_27:modules.all.mean_abs_pct}% (8, model too fast); MoE block forward + backward: grouped GEMMs "
     "{device_check_h100_2026_11_27:moe_layer.experts_fwdbwd.signed_mean_pct:+.1f}% mean, whole block {device_check_h100_2026_11_27:moe_layer.block.signed_mean_pct:+.1f}% "
     "(permute + unpermute take {device_check_h100_2026_11_27:moe_layer.permute_unpermute_bytes_multiple.qwen3-30b-a3b}x the routed rows' bytes "
     "at the streaming rate; the model prices 12x)",
     "`python benchmarks/device_check.py`"),
    ("the H200 again (`data/device/nvidia-h200-2026-11-27`) and the H100 (its 2026-11-27 session, fifth run), probe "
     "only: nn.GroupNorm kernels, the Stable Diffusion UNets and VAE decoder (fp16 NCHW; eager, as CUDA graphs, profiled) "
     "and MLPerf DLRM's training step on one GPU (plain eager PyTorch, and as a CUDA graph); the group norm's per-row "
     "rate is read off the H200's largest shapes, the rest is out of sample",
     "group norm forward, mean abs error: H200 {device_check_h200_2026_11_27:group_norm.model.mean_abs_pct}%, H100 "
     "{device_check_h100_2026_11_27:group_norm.model.mean_abs_pct}% (at the streaming rate alone "
     "{device_check_h200_2026_11_27:group_norm.streaming_only.signed_mean_pct:+.0f}%); one call's GPU time, model vs measured, H200 / H100: "
     "SD 1.5 UNet {device_check_h200_2026_11_27:diffusion.sd15-unet_2x4x64x64.gpu_error_pct:+.0f}% / "
     "{device_check_h100_2026_11_27:diffusion.sd15-unet_2x4x64x64.gpu_error_pct:+.0f}%, SDXL UNet "
     "{device_check_h200_2026_11_27:diffusion.sdxl-unet_2x4x128x128.gpu_error_pct:+.0f}% / {device_check_h100_2026_11_27:diffusion.sdxl-unet_2x4x128x128.gpu_error_pct:+.0f}%, "
     "VAE decode at 1024 px {device_check_h200_2026_11_27:diffusion.vae-decoder_1x4x128x128.gpu_error_pct:+.0f}% / "
     "{device_check_h100_2026_11_27:diffusion.vae-decoder_1x4x128x128.gpu_error_pct:+.0f}%; eager, the UNets are host-bound: SD 1.5 "
     "{device_check_h200_2026_11_27:diffusion.sd15-unet_2x4x64x64.eager_measured_ms} ms measured vs "
     "{device_check_h200_2026_11_27:diffusion.sd15-unet_2x4x64x64.latency_model_ms} ms at the default 10 us per op; `--host-op-us 50` (read "
     "off that row) gives SDXL {device_check_h200_2026_11_27:diffusion.sdxl-unet_2x4x128x128.eager_error_host_50us_pct:+.0f}% / "
     "{device_check_h100_2026_11_27:diffusion.sdxl-unet_2x4x128x128.eager_error_host_50us_pct:+.0f}% and SD 1.5 on the H100 "
     "{device_check_h100_2026_11_27:diffusion.sd15-unet_2x4x64x64.eager_error_host_50us_pct:+.0f}%; DLRM step at batch 6,912: model "
     "{device_check_h200_2026_11_27:dlrm_step.rows.0.model_ms} ms, CUDA graph {device_check_h200_2026_11_27:dlrm_step.rows.0.graph_ms} ms, eager "
     "{device_check_h200_2026_11_27:dlrm_step.rows.0.eager_ms} ms (plain PyTorch kernels, not NVIDIA's fused ones)",
     "`python benchmarks/device_check.py`"),
    ("1024-NPU 64 MiB ring all-reduce (symmetric) / Llama 405B on 16,384 GPUs (compile + simulate)",
     "{simulate_speed:allreduce_1024_ring_64MiB.symmetric_wall_s:.3f} s (ASTRA-sim ~10 s) / "
     "{simulate_speed:llama405b_16384_symmetric.simulate_plus_compile_wall_s:.2f} s",
     "`python benchmarks/simulate_speed.py`"),
    ("logged bytes of real jobs vs the tensor-level model, DDP/FSDP/TP×DP/PP×DP on 4 gloo ranks; "
     "`estimate --comm-volume` (the trace's bytes, every plan) vs that model",
     "equal, byte for byte (a test); the trace equal on DDP, PP×DP and DP traffic, short of the cross entropy's "
     "three fp32 all-reduces on TP and of FSDP2's root unit and padding (a test)",
     "`pytest tests/measure/test_layouts.py tests/trace/test_volume.py`"),
    ("captured real jobs (`trace capture`) vs `simulate`, against the job's own unprofiled step: the example GPT "
     "(--hidden 128 --seq-len 64) on 2 and 4 gloo ranks, DDP / FSDP / TP×DP / PP×DP, this machine's α-β profile",
     "mean abs error {capture_fidelity:mean_abs_error_pct:.1f}% over {capture_fidelity:captures} captures, "
     "{capture_fidelity:within_target} within 15% (target: every one; the profiled step itself is "
     "{capture_fidelity:mean_abs_profiled_error_pct:.0f}% off); 1 -> 2 ranks with `--dp 2`: "
     "DDP {capture_fidelity:scale_out.0.error_pct:+.1f}%; {capture_fidelity:repeatability.succeeded} of "
     "{capture_fidelity:repeatability.captures} repeated captures succeeded, their simulated steps spread "
     "{capture_fidelity:repeatability.simulated_spread_pct:.0f}% (the job's own steps: "
     "{capture_fidelity:repeatability.unprofiled_spread_pct:.0f}%), worst capture "
     "{capture_fidelity:repeatability.max_abs_capture_error_pct:.0f}% off; replaying one profiled step instead "
     "of the median of 3 (captures alternating with those): spread "
     "{capture_fidelity:repeatability_one_profiled_step.simulated_spread_pct:.0f}%, worst "
     "{capture_fidelity:repeatability_one_profiled_step.max_abs_capture_error_pct:.0f}%. The capture test's wider job (--hidden 256 "
     "--micro-batch 4, ops of tens of µs): {capture_fidelity_wide:mean_abs_error_pct:.1f}% mean abs, "
     "{capture_fidelity_wide:within_target} of {capture_fidelity_wide:captures} within 15%; 1 -> 2 ranks "
     "{capture_fidelity_wide:scale_out.0.error_pct:+.1f}%; {capture_fidelity_wide:repeatability.succeeded} of "
     "{capture_fidelity_wide:repeatability.captures} repeated captures, simulated spread "
     "{capture_fidelity_wide:repeatability.simulated_spread_pct:.0f}% (job: "
     "{capture_fidelity_wide:repeatability.unprofiled_spread_pct:.0f}%; one profiled step: "
     "{capture_fidelity_wide:repeatability_one_profiled_step.simulated_spread_pct:.0f}%), mean abs error "
     "{capture_fidelity_wide:repeatability.mean_abs_capture_error_pct:.1f}% (one profiled step: "
     "{capture_fidelity_wide:repeatability_one_profiled_step.mean_abs_capture_error_pct:.1f}%); capture "
     "{capture_fidelity_wide:capture_overhead.capture_wall_s:.1f} s vs the job's "
     "{capture_fidelity_wide:capture_overhead.job_wall_s:.1f} s; the fp16 comm hook as a what-if "
     "(`--compress dp=fp16` on the plain capture) against the hooked job: step change predicted "
     "{capture_fidelity_wide:fp16_hook_what_if.0.predicted_change_s:+.3f} s, measured "
     "{capture_fidelity_wide:fp16_hook_what_if.0.measured_change_s:+.3f} s on 2 ranks; "
     "{capture_fidelity_wide:fp16_hook_what_if.1.predicted_change_s:+.3f} vs "
     "{capture_fidelity_wide:fp16_hook_what_if.1.measured_change_s:+.3f} s on 4",
     "`python benchmarks/capture_fidelity.py [--wide]`"),
    ("what the capture's profiler adds to a step, by component: the example GPT under DDP on one gloo rank, the "
     "same with 8 layers (twice the ops), and the wider job (the same ops, each larger); and the capture's "
     "calibration loop as its working set grows",
     "over {profiler_overhead:jobs.gpt-h128.recorded_ops_per_step} recorded ops per step: execution-trace observer "
     "{profiler_overhead:jobs.gpt-h128.et.us_per_op:.1f} µs per op "
     "({profiler_overhead:jobs.gpt-h128-8layers.et.us_per_op:.1f} with twice the ops, "
     "{profiler_overhead:jobs.gpt-h256-mb4.et.us_per_op:.1f} with larger ones), Kineto with shapes "
     "{profiler_overhead:jobs.gpt-h128.kineto.us_per_op:.1f} µs; both (`trace capture`) add "
     "{profiler_overhead:jobs.gpt-h128.et+kineto.added_over_step:.2f}x the "
     "{profiler_overhead:jobs.gpt-h128.plain_step_ms:.1f} ms step, the observer "
     "{profiler_overhead:jobs.gpt-h128.et_share_of_capture_cost:.0%} of that; Kineto alone "
     "{profiler_overhead:jobs.gpt-h128.kineto.added_over_step:.2f}x; the calibration's training loop "
     "{profiler_overhead:calibration_by_width.512.train_us_per_op:.1f} µs per op with its default 512 kB of weights, "
     "{profiler_overhead:calibration_by_width.2048.train_us_per_op:.1f} with 2 MB, "
     "{profiler_overhead:calibration_by_width.8192.train_us_per_op:.1f} with 8 MB",
     "`python benchmarks/profiler_overhead.py`"),
    ("per-op, per-size collective choice (MCR-DL; `distscope measure algorithms`): gloo's own all_reduce, all_gather "
     "and reduce_scatter against decompositions into its other primitives, measured on 4 gloo ranks, then a workload "
     "at other sizes through the dispatcher and through each single candidate ({mcr_dispatch:repeats} interleaved repeats)",
     "dispatcher / best single candidate: all_reduce {mcr_dispatch:ops.all_reduce.ratio_vs_best_single:.3f}, all_gather "
     "{mcr_dispatch:ops.all_gather.ratio_vs_best_single:.3f}, reduce_scatter "
     "{mcr_dispatch:ops.reduce_scatter.ratio_vs_best_single:.3f}; the same candidate timed twice differs by up to "
     "{mcr_dispatch:noise_floor:.1%} on this host, so 'never slower' holds within that noise, not beyond it",
     "`python benchmarks/mcr_dispatch.py`"),
    ("comm logger overhead on unmodified torchrun jobs (4 gloo ranks)",
     "DDP step time ×{measure_logger_overhead:ddp_gpt_step.ratio:.2f}, all-reduce loop "
     "×{measure_logger_overhead:allreduce_loop.ratio:.2f} ({measure_logger_overhead:allreduce_loop.overhead_us_per_call:.0f} "
     "µs per logged call; noisy: 4 ranks share 2 cores)",
     "`python benchmarks/measure_logger_overhead.py`"),
    ("serving: published runs (serving_runs.csv), leave-one-source_id-out",
     "CV MAPE throughput {serve_calibrate:cv_mape_pct.throughput_out_tok_s:.1f}%, TTFT "
     "{serve_calibrate:cv_mape_pct.ttft_s:.1f}%, TPOT {serve_calibrate:cv_mape_pct.tpot_s:.1f}% (in-sample "
     "{serve_calibrate:mape_pct.throughput_out_tok_s:.1f}% / {serve_calibrate:mape_pct.ttft_s:.1f}% / "
     "{serve_calibrate:mape_pct.tpot_s:.1f}% over {serve_calibrate:n.throughput_out_tok_s}/"
     "{serve_calibrate:n.ttft_s}/{serve_calibrate:n.tpot_s} values)", "`python benchmarks/serve_calibrate.py`"),
    ("`serve simulate`, 10,000 requests on one replica, one core",
     "{serve_speed:max_wall_s:.2f} s at most over {serve_speed:cases|len} cases (Vidur ~50 requests/s per the issue)",
     "`taskset -c 0 python benchmarks/serve_speed.py`"),
    ("CPU serving of a torch module planned as Packrat does (`serve plan` / `serve measure --model torch:...`): "
     "ResNet-50, fp32, at 224x224 and 112x112, batches 1-8, on the benchmark host's cores: each plan's latency "
     "predicted from the solo profile vs its instances run side by side",
     "{cpu_serving:logical_cpus} cores: mean abs error {cpu_serving:mean_abs_error_pct:.1f}% over {cpu_serving:points} runs, max "
     "{cpu_serving:max_abs_error_pct:.1f}%; the best split beats one all-cores instance by up to "
     "{cpu_serving:measured_gain_max:.2f}x measured (two cores leave little to split)",
     "`python benchmarks/cpu_serving.py`"),
    ("`serve measure`: a GPT served on CPU vs `serve simulate` with this machine's iteration costs",
     "target: p50 TTFT and p50 TPOT within 20%; the test allows 20% plus the noise it measures (how far two "
     "runs' errors differ, and the spread of the iteration timings); the profile includes a prefill's cost after "
     "an idle spell (cold caches on a shared host, `Profiler.wake`) and times each decode right after a decode of "
     "its batch, as served decodes run", "`pytest tests/serve/test_serve_measure.py`"),
    ("compression convergence, 800 steps, 4 gloo ranks, seeds 0 / 1",
     "qWD+TLq-HS {compress_convergence_seed0:runs.qwd+tlq-hs.final_vs_baseline_pct:+.2f}% / "
     "{compress_convergence_seed1:runs.qwd+tlq-hs.final_vs_baseline_pct:+.2f}% final loss vs baseline; direct int4 "
     "weights {compress_convergence_seed0:runs.int4-weights.final_vs_baseline_pct:+.1f}% / "
     "{compress_convergence_seed1:runs.int4-weights.final_vs_baseline_pct:+.1f}%",
     "`python benchmarks/compress_convergence.py [--seed 1]`"),
)

_CELL = re.compile(r"\{(\w+):([\w.|+\-]+)(?::([^}]*))?\}")


def _lookup(name: str, path: str) -> Any:
    f = RESULTS / f"{name}.json"
    if not f.exists():
        raise SystemExit(f"readme_figures: {f.relative_to(ROOT)} is missing: run benchmarks/{name.split('_seed')[0]}.py")
    value: Any = json.loads(f.read_text())
    path, _, op = path.partition("|")
    for key in path.split("."):
        try:
            value = value[int(key)] if isinstance(value, list) else value[key]
        except (KeyError, IndexError, ValueError) as exc:
            raise SystemExit(f"readme_figures: {name}.json has no {path!r} ({exc})") from None
    return len(value) if op == "len" else value


def render() -> str:
    lines = [BEGIN, "| check | result | reproduce |", "|---|---|---|"]
    for check, template, how in ROWS:
        cell = _CELL.sub(lambda m: format(_lookup(m[1], m[2]), m[3] or ""), template)
        lines.append(f"| {check} | {cell} | {how} |")
    return "\n".join([*lines, END])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the README differs from the results")
    args = ap.parse_args()
    text = README.read_text()
    start, stop = text.find(BEGIN), text.find(END)
    if start < 0 or stop < 0:
        raise SystemExit(f"readme_figures: README.md lacks the markers {BEGIN} ... {END}")
    new = text[:start] + render() + text[stop + len(END):]
    if args.check:
        if new != text:
            print("README.md figures are stale: run python benchmarks/readme_figures.py", file=sys.stderr)
            raise SystemExit(1)
        print("README.md figures match benchmarks/results")
        return
    README.write_text(new)
    print("README.md figures rewritten from benchmarks/results")


if __name__ == "__main__":
    main()
