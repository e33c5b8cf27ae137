#!/usr/bin/env bash
# The GPU checks behind data/device/<device>-<date>/, as run on a one-GPU machine (repository root as the
# working directory; results go to $OUT, default ./device-out). KERNELS=0 / PROBE=0 / CPU=0 skip steps 1 / 2 / 4 (PROBE_SECTIONS picks the probe's sections);
# CAPTURES="layout hidden seq micro-batch;..." replaces step 3's list (CAPTURES=none skips it). No distscope install is needed there:
# src/ is put on PYTHONPATH; `trace capture` needs mlc-chakra (and protobuf >= its generated code's).
#   1. distscope measure kernels (the GPU sweep: GEMM bf16/fp16/fp8, SDPA attention, element-wise)
#   2. benchmarks/device_probe.py (grouped GEMM, ResNet training/inference steps, the int8/int4 codec, host
#      microseconds per eager call)
#   3. trace capture of the example GPT on the GPU (1 rank, NCCL), five sizes and layouts
#   4. on the same host's CPU cores: gloo alpha-beta profile for 8 ranks, capture of 2 ranks, and the
#      8-rank job (its unprofiled step is the truth for `simulate CAP2 --dp 8`)
set -u
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
ds() { python3 -m distscope "$@"; }
job() { echo python3 -m torch.distributed.run --standalone --nproc-per-node "$1" examples/train_gpt.py --steps 14 "${@:2}"; }
t0=$(date +%s)
stamp() { echo "== $1: $(( $(date +%s) - t0 )) s"; }

nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv > "$OUT/env.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" >> "$OUT/env.txt"
cat "$OUT/env.txt"

if [ "${KERNELS:-1}" = 1 ]; then
timeout 240 python3 -m distscope measure kernels --out "$OUT/kernels.json" > "$OUT/kernels.log" 2>&1
stamp "kernels rc=$?"; tail -9 "$OUT/kernels.log"
fi
if [ "${PROBE:-1}" = 1 ]; then
timeout "${PROBE_TIMEOUT_S:-300}" python3 benchmarks/device_probe.py --out "$OUT/probe.json" --sections "${PROBE_SECTIONS:-grouped_gemm,grouped_gemm_fp8,modules,codec,host,embedding_bag,fp8_scaling,mla_attention,conv}"
stamp "probe rc=$?"
fi

caps=/tmp/caps; rm -rf $caps; mkdir -p $caps
CAPTURES=${CAPTURES:-"ddp 512 1024 8;ddp 768 512 4;ddp 1024 1024 8;ddp 1536 1024 4;fsdp 1024 1024 8"}
specs=(); [ "$CAPTURES" = none ] || IFS=';' read -ra specs <<< "$CAPTURES"
for spec in ${specs[@]+"${specs[@]}"}; do
  set -- $spec
  name=gpu_$1_h$2_s$3_b$4
  timeout 120 python3 -m distscope trace capture --out $caps/$name --warmup 3 --timed-steps 5 --timeout-s 110 --no-convert \
    -- $(job 1 --device cuda --layout $1 --hidden $2 --seq-len $3 --micro-batch $4) > $caps/$name.log 2>&1
  stamp "capture $name rc=$?"; grep -E "^(profiled|unprofiled)" $caps/$name.log
done

if [ "${CPU:-1}" = 1 ]; then
export OMP_NUM_THREADS=1
timeout 150 python3 -m distscope measure collectives --backend gloo --nproc 8 --ops all_reduce,all_gather,reduce_scatter,send_recv \
  --min-bytes 1024 --max-bytes $((4 << 20)) --out $caps/cpu_sweep8.json --timeout-s 140 > /dev/null 2>&1
stamp "cpu sweep rc=$?"
python3 -m distscope measure calibrate $caps/cpu_sweep8.json --out $caps/cpu_profile8.json > /dev/null 2>&1
for n in 2 8; do
  timeout 120 python3 -m distscope trace capture --out $caps/cpu_ddp_$n --warmup 3 --timed-steps 5 --timeout-s 110 --no-convert \
    -- $(job $n --layout ddp --hidden 128 --seq-len 64) > $caps/cpu_ddp_$n.log 2>&1
  stamp "cpu capture $n rc=$?"; grep -E "^(profiled|unprofiled)" $caps/cpu_ddp_$n.log
done
fi
# the raw files only: linked traces and .et files are rebuilt from them
[ -z "$(ls -A $caps)" ] || tar czf "$OUT/captures.tar.gz" -C $caps --exclude='linked.*.json' --exclude='*.et' --exclude=chakra .
ls -la "$OUT"
