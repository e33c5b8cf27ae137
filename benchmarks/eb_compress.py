"""Error-bounded compression of a DLRM's embedding all-to-all (issue 22, item 3): a small DLRM trained on
4 gloo ranks with table-wise sharded embeddings (compress/dlrm_train.py), uncompressed and with its
pooled-embedding all-to-all (forward and backward) compressed by SZ3 and ZFP at error bounds relative to
each chunk's value range;
the final loss against the uncompressed run (target: within 1%), the bytes the all-to-alls moved, and
each codec's ratio, error and throughput on the trained model's own pooled embeddings and gradients.

    python benchmarks/eb_compress.py [--steps 300] [--write-data]

--write-data stores each (codec, bound)'s ratio on the pooled embeddings and on their gradients, its
throughput here and its convergence result in src/distscope/compress/data/eb_codecs.json, which
`estimate`/`plan --model dlrm:... --compress emb=CODEC:BOUND` price.

The codec throughputs are this host's (one CPU thread, the libraries' CPU builds): they say what the
codec costs here, not on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from _results import save
from distscope.compress.dlrm_train import DlrmTrainConfig, train_worker
from distscope.compress.eb_codec import EbCodec, measure
from distscope.compress.launch import run_gloo

WORLD = 4
DATA = Path(__file__).resolve().parent.parent / "src/distscope/compress/data/eb_codecs.json"
RUNS = [("sz3", 1e-2), ("sz3", 1e-3), ("zfp", 1e-2), ("zfp", 1e-3)]  # bounds relative to each chunk's range


def final(losses: list[float]) -> float:
    """Mean loss of the last tenth of the steps (at least 10)."""
    return statistics.mean(losses[-max(10, len(losses) // 10):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--write-data", action="store_true", help="write src/distscope/compress/data/eb_codecs.json")
    args = ap.parse_args()
    base_cfg = DlrmTrainConfig(steps=args.steps)
    base = run_gloo(train_worker, WORLD, base_cfg, timeout_s=900)
    ref = final(base["losses"])
    print(f"uncompressed: final loss {ref:.4f} (first {base['losses'][0]:.4f}), all-to-all bytes {base['a2a_bytes']:,}")
    runs = []
    for codec, bound in RUNS:
        cfg = DlrmTrainConfig(steps=args.steps, codec=codec, bound=bound)
        r = run_gloo(train_worker, WORLD, cfg, timeout_s=900)
        loss = final(r["losses"])
        runs.append({"codec": codec, "bound": bound, "final_loss": loss, "vs_uncompressed_pct": 100 * (loss / ref - 1),
                     "a2a_bytes": r["a2a_bytes"], "a2a_ratio": base["a2a_bytes"] / r["a2a_bytes"]})
        print(f"{codec} bound {bound:g}: final loss {loss:.4f} ({runs[-1]['vs_uncompressed_pct']:+.2f}%), all-to-all "
              f"bytes {r['a2a_bytes']:,} ({runs[-1]['a2a_ratio']:.2f}x fewer)")
    tensors = {"pooled embeddings": base["pooled"], "their gradients": base["grad"]}
    codecs = []
    for what, x in tensors.items():
        for codec in EbCodec:
            for bound in (1e-2, 1e-3, 1e-4):
                s = measure(x, codec, bound, relative=True)
                codecs.append({"tensor": what, "shape": list(x.shape), **s.to_dict()})
                print(f"{what} {tuple(x.shape)} {codec.value} {bound:g}: ratio {s.ratio:.2f}, max err "
                      f"{s.max_abs_error:.2e}, rel L2 {s.rel_l2_error:.2e}, encode {s.encode_GBps:.2f} GB/s, "
                      f"decode {s.decode_GBps:.2f} GB/s")
    worst = max(abs(r["vs_uncompressed_pct"]) for r in runs)
    if args.write_data:
        table = {}
        for r in runs:
            rows = [c for c in codecs if c["codec"] == r["codec"] and c["bound"] == r["bound"]]
            emb = next(c for c in rows if c["tensor"] == "pooled embeddings")
            grad = next(c for c in rows if c["tensor"] == "their gradients")
            table[f"{r['codec']}:{r['bound']:g}"] = {
                "ratio_embeddings": emb["ratio"], "ratio_gradients": grad["ratio"],
                "encode_GBps": min(emb["encode_GBps"], grad["encode_GBps"]),
                "decode_GBps": min(emb["decode_GBps"], grad["decode_GBps"]),
                "final_loss_vs_uncompressed_pct": r["vs_uncompressed_pct"]}
        DATA.write_text(json.dumps({
            "source": "benchmarks/eb_compress.py: a DLRM (8 tables of 2000 x 16, pooling 3) trained on 4 gloo ranks; "
                      "ratios on its pooled embeddings and their gradients, bounds relative to each chunk's value "
                      "range; throughputs are one CPU thread of this host running the libraries' CPU builds",
            "steps": args.steps, "host_cpus": os.cpu_count(), "codecs": table}, indent=1) + "\n")
    save("eb_compress", {"world": WORLD, "steps": args.steps, "config": base_cfg.__dict__ | {"codec": None},
                         "uncompressed_final_loss": ref, "uncompressed_a2a_bytes": base["a2a_bytes"], "runs": runs,
                         "worst_abs_pct": worst, "within_1pct": worst <= 1.0, "codecs": codecs})


if __name__ == "__main__":
    main()
