"""`distscope compress ...`: measured figures for the quantized collectives. torch is imported lazily."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Communication compression: quantized collectives, DDP hooks, measured figures.",
                  no_args_is_help=True)


PHASES = 3  # run_bench's phases: real tensors, CPU quantize throughput, gloo collectives (+1 with a GPU: its throughput)


def _progress(msg: str) -> None:
    from rich.console import Console

    Console(stderr=True).log(msg)


@app.command()
def bench(
    json_out: Annotated[bool, typer.Option("--json", help="Print only the JSON result on stdout.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="Small tensors, 1 repeat (smoke test).")] = False,
    numel: Annotated[int, typer.Option(help="Elements per rank, timed gloo collectives.")] = 1 << 22,
    repeats: Annotated[int, typer.Option(help="Timed repetitions per measurement (median reported).")] = 3,
    out: Annotated[Path | None, typer.Option(help="Also write the JSON result to this file.")] = None,
) -> None:
    """Ratio vs bf16, relative L2 error on real TinyGPT gradients/weights, CPU quantize/dequantize GB/s,
    and collective time vs uncompressed on 4 gloo ranks, for int8, int4, int4-hs, qwd-int4, tlq-hs, bf16,
    powersgd."""
    import torch

    from distscope.compress.bench import BenchConfig, run_bench
    from distscope.report.progress import progress

    cfg = (BenchConfig(numel=1 << 18, throughput_numel=1 << 18, train_steps=5, repeats=1) if quick
           else BenchConfig(numel=numel, repeats=repeats))
    phases = PHASES + int(torch.cuda.is_available())
    with progress(phases, "compress bench") as bar:
        started: list[str] = []

        def phase(msg: str) -> None:  # run_bench announces each phase as it starts
            if not bar.shown:
                _progress(msg)
            bar.update(len(started), phases)
            bar.describe(f"compress bench: {msg}")
            started.append(msg)

        result = run_bench(cfg, progress=phase)
    text = json.dumps(result)
    if out is not None:
        out.write_text(text + "\n")
    if json_out:
        print(text)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"distscope compress bench ({result['setup']['world']} gloo ranks, CPU)")  # type: ignore[index]
    for col in ("method", "ratio vs bf16", "rel L2 err", "quant GB/s", "dequant GB/s", "coll. s",
                "uncompr. s", "speedup", "error on"):
        table.add_column(col)
    for m in result["methods"]:  # type: ignore[attr-defined]
        table.add_row(m["name"], f"{m['ratio_vs_bf16']:.4f}", f"{m['rel_l2_error']:.4g}",
                      f"{m['quant_GBps']:.3g}", f"{m['dequant_GBps']:.3g}", f"{m['collective_s']:.4f}",
                      f"{m['uncompressed_s']:.4f}", f"{m['speedup_vs_uncompressed']:.2f}x", m["error_on"])
    Console().print(table)


@app.command()
def convergence(
    steps: Annotated[int, typer.Option(help="Training steps per run.")] = 300,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the JSON result on stdout.")] = False,
) -> None:
    """Train a small GPT with 4-rank sharded data parallelism: baseline vs qWD+TLq-HS vs direct int4
    weights; prints final and held-out losses."""
    from distscope.compress.convergence import run_convergence

    res = run_convergence(steps, progress=_progress)
    summary = {k: {kk: vv for kk, vv in v.items() if kk != "losses"} for k, v in res.items()}
    if json_out:
        print(json.dumps(summary))
        return
    for name, row in summary.items():
        print(f"{name:14s} final {row['final_loss']:.4f}  eval {row['eval_loss']:.4f}  "
              f"vs baseline {row.get('final_vs_baseline_pct', 0.0):+.2f}%")
