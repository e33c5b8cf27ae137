"""The GPU sessions under data/device/ (one folder per machine and date, made by run_gpu_checks.sh): which
distscope device and cluster each one ran on, read from its env.txt, and the module_runs.csv of each one,
written from its probe.json in the schema of data/evidence/module_runs.csv.

    python benchmarks/_device.py data/device/nvidia-h100-2026-11-26   # (re)writes its module_runs.csv
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEVICE_DATA = REPO / "data" / "device"


@dataclass(frozen=True)
class Host:
    """One GPU as nvidia-smi names it, in distscope's terms."""

    device: str  # system/data/devices.json key
    cluster: str  # the preset whose node holds it (captures are re-priced there)
    short: str  # in run ids: D<n>-<short>-...
    intra_node_GBps: int  # the preset's NVLink and NIC bandwidths, for module_runs.csv
    inter_node_GBps_per_gpu: int


HOSTS = {
    "NVIDIA H200": Host("h200-sxm-141gb", "dgx-h200", "H200", 450, 50),
    "NVIDIA H100 80GB HBM3": Host("h100-sxm5-80gb", "dgx-h100", "H100", 450, 50),
}


# every session folder, in the order they were made (their run ids' D1, D2, ...), and the name of its
# benchmarks/results/ file (device_check.py)
SESSIONS = {"nvidia-h200-2026-11-26": "device_check_h200", "nvidia-h100-2026-11-26": "device_check_h100",
            "nvidia-h100-2026-11-27": "device_check_h100_2026_11_27",
            "nvidia-h200-2026-11-27": "device_check_h200_2026_11_27"}


def sessions() -> list[Path]:
    return [DEVICE_DATA / name for name in SESSIONS]


def host(data: Path) -> Host:
    """The GPU a session ran on (env.txt's nvidia-smi line)."""
    name = (data / "env.txt").read_text().splitlines()[1].split(",")[0].strip()
    if name not in HOSTS:
        raise SystemExit(f"{data.name}: GPU {name!r} is not in benchmarks/_device.py HOSTS ({', '.join(HOSTS)})")
    return HOSTS[name]


_MODELS = {"resnet50": "RN50", "resnext101_32x4d": "RNXT101"}
# probe.json's dtype label -> (module_runs input spelling, its description)
_DTYPES = {"bf16-autocast": ("bf16", "bf16 autocast"), "tf32": ("tf32", "fp32 weights, TF32 tensor cores on"),
           "fp32": ("fp32", "fp32 weights, TF32 off")}


def write_module_runs(data: Path) -> Path:
    """module_runs.csv from probe.json's training steps ("modules" and "modules_precision"): the session's D
    number is its place in sessions()."""
    h, probe = host(data), json.loads((data / "probe.json").read_text())
    tag = f"D{list(SESSIONS).index(data.name) + 1}"
    cols = ["run_id", "source", "model", "input", "gpu", "num_gpus", "gpus_per_node", "intra_node_GBps",
            "inter_node_GBps_per_gpu", "dp", "zero", "global_batch", "measured_step_time_s", "step_time_basis",
            "reported", "notes"]
    out = data / "module_runs.csv"
    with out.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(cols)
        for r in (r for sec in ("modules", "modules_precision") for r in probe.get(sec, {}).get("rows", [])):
            if r["mode"] != "train":
                continue
            b, (dt, how) = r["batch"], _DTYPES[r.get("dtype", "bf16-autocast")]
            w.writerow([f"{tag}-{h.short}-{_MODELS[r['model']]}-{dt.upper()}-B{b}",
                        f"{tag} distscope device run: one {h.short} (data/device/{data.name})",
                        f"torch:examples/modules/resnet.py:{r['model']}", f"x:{b}x3x{r['resolution']}x{r['resolution']}:{dt}",
                        h.device, 1, 8, h.intra_node_GBps, h.inter_node_GBps_per_gpu, 1, 0, b, f"{r['step_s']:.6f}",
                        "median of 15 CUDA-event-timed steps after 5 warm-up", f"{r['images_per_s']:.0f} img/s",
                        f"benchmarks/device_probe.py modules: forward, backward, SGD momentum; {how}, channels-last, "
                        f"cudnn.benchmark, synthetic data on the GPU; torch {probe['torch']}"])
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(write_module_runs(Path(arg).resolve()))
