"""Step time of published training runs of arbitrary torch modules (data/evidence/module_runs.csv: NVIDIA
DeepLearningExamples' ResNet-50 v1.5 and ResNeXt-101 32x4d on DGX A100, AMP and TF32, 1 and 8 GPUs; both on
DGX-1 V100 32GB, AMP and FP32, a GPU without kernel data of its own; SE-ResNeXt-101 32x4d on both, added
after the model),
traced on the meta device and priced by model/module_estimate.py. Nothing is fitted to these rows.
Writes benchmarks/results/module_accuracy.json.

    python benchmarks/module_accuracy.py
"""

from __future__ import annotations

import statistics
from pathlib import Path

from _results import save
from distscope.validate.module_rows import predict_file, summary

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    results = predict_file(REPO / "data/evidence/module_runs.csv", REPO)
    out = summary(results)
    for tag in ("A100-RN50-AMP", "A100-RNXT101-AMP", "AMP", "TF32", "V100-AMP", "V100-FP32", "SERNXT101"):
        parts = [f"-{p}-" for p in tag.split("-")]
        pool = [r for r in results if (r.run_id.startswith("M3-")) == (tag == "SERNXT101")]  # M1/M2, or M3 alone
        errs = [abs(r.error_pct) for r in pool if all(p in r.run_id for p in parts)]
        key = tag.lower().replace("-", "_")
        out[f"{key}_mean_abs_error_pct"] = round(statistics.fmean(errs), 2)
        out[f"{key}_rows"] = len(errs)
    for r in results:
        print(f"{r.run_id:28s} measured {r.measured_step_time_s:.4f} s  predicted {r.predicted_step_time_s:.4f} s  "
              f"{r.error_pct:+.1f}%")
    save("module_accuracy", out)


if __name__ == "__main__":
    main()
