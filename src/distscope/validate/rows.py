"""Read the published-runs CSV contract (data/validation/README.md) into typed rows.

A cell may hold `auto` for micro_batch, sequence_parallel, distributed_optimizer, overlap and
recompute: those become `None` here and the harness picks the best feasible value. A bad cell raises
a one-line DistscopeError naming the run_id and the column; the harness reports it and goes on.

What a run's software could do comes from its software profile (software/presets.py): the optional
`software` column names a preset (megatron-lm-2021, megatron-core-0.8, nemo-24, torchtitan-2024, ...);
when it is blank the free-text `framework` column is mapped to one (software.from_framework). The
profile fixes the attention kernel, which communication an `auto` overlap may hide, and the engine
traits the estimator reads. An optional `attention` column (flash|cudnn|fa3|unfused) overrides the
kernel.

Optional layout columns (blank = default): `vp` may be `auto` (the harness tries 1..MAX_AUTO_VP);
`first_stage_layers` / `last_stage_layers` (Megatron's --decoder-first/last-pipeline-num-layers;
without them a split that does not divide uses Megatron's embedding/loss accounting);
`reshard_after_forward` 0/1 (ZeRO-3/FSDP; 0 keeps parameters gathered across micro-batches);
`schedule` (plan.Schedule); `head_dim` where it is not hidden/heads (Qwen3: kv-channels 128 at
hidden/heads 64). MoE columns: `experts`, `top_k`, `moe_ffn_hidden` (default ffn_hidden),
`shared_experts`, `moe_dense_layers` (leading dense layers), `etp`, `capacity_factor` (blank =
dropless), `moe_dispatcher` (alltoall | deepep; blank = alltoall). `mtp_layers`: multi-token
prediction depth (blank = the model's own, 0 for column-built models). `moe_a2a_overlap` 0/1: the EP
all-to-all overlapped with another micro-batch's compute (Megatron --overlap-moe-expert-parallel-comm,
1F1B A2A overlap; blank = 0). `moe_balance` (forced | aux-free | aux-loss: the router's load balancing,
model/routing.py; blank = the plan default). `arch=catalog` takes the architecture of the built-in model named in `model` (for what
the columns cannot express, e.g. DeepSeek-V3's MLA, or a hybrid's Mamba-2 / Gated DeltaNet mixers); its shape columns
must then match it (a hybrid's `layers` may count its FFN layers or, as Megatron's --num-layers does, its blocks);
`model` may also be a Hugging Face config.json path.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
from pathlib import Path
from typing import TypeVar

from distscope.dtypes import Precision
from distscope.errors import DistscopeError
from distscope.plan import AttentionImpl, Dim, MoeBalance, MoeDispatcher, Recompute, Schedule
from distscope.software.presets import SoftwareProfile, from_framework, get_software
from distscope.userfile import read_csv
from distscope.workload.spec import FfnKind, ModelSpec, MoESpec, NormKind, PositionKind

E = TypeVar("E", bound=enum.Enum)

REQUIRED = (
    "run_id", "arch", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "ffn_act", "vocab", "seq_len",
    "global_batch", "micro_batch", "tp", "pp", "vp", "dp", "cp", "ep", "sequence_parallel", "zero_stage",
    "distributed_optimizer", "overlap", "recompute", "precision", "gpu", "num_gpus", "gpus_per_node",
    "intra_node_GBps", "inter_node_GBps_per_gpu", "measured_step_time_s",
)
@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    run_id: str
    spec: ModelSpec
    seq_len: int
    global_batch: int
    micro_batch: int | None
    tp: int
    pp: int
    vp: int | None  # None = auto
    dp: int
    cp: int
    ep: int
    sequence_parallel: bool | None
    zero_stage: int
    distributed_optimizer: bool | None
    overlap: frozenset[Dim] | None
    recompute: Recompute | None
    precision: Precision
    attention: AttentionImpl
    overlap_capable: frozenset[Dim]
    software: SoftwareProfile
    gpu: str
    num_gpus: int
    gpus_per_node: int
    intra_node_GBps: float
    inter_node_GBps_per_gpu: float
    measured_step_time_s: float
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    reshard_after_forward: bool = True
    schedule: Schedule | None = None  # None: 1f1b, or interleaved-1f1b when vp > 1
    etp: int | None = None
    capacity_factor: float | None = None
    moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL
    moe_a2a_overlap: bool = False
    moe_balance: MoeBalance | None = None


class _Cells:
    def __init__(self, row: dict[str, str], rid: str) -> None:
        self.row, self.rid = row, rid

    def fail(self, col: str, why: str) -> DistscopeError:
        return DistscopeError(f"run_id={self.rid}: column {col}={self.row.get(col)!r} {why}")

    def raw(self, col: str) -> str:
        v = self.row.get(col)
        if v is None or v.strip() == "":
            raise self.fail(col, "is empty")
        return v.strip()

    def auto(self, col: str) -> bool:
        return self.raw(col).lower() == "auto"

    def int(self, col: str, lo: int = 1) -> int:
        try:
            v = int(float(self.raw(col)))
        except (ValueError, OverflowError):
            raise self.fail(col, "is not an integer") from None
        if v < lo or float(self.raw(col)) != v:
            raise self.fail(col, f"must be an integer >= {lo}")
        return v

    def float(self, col: str) -> float:
        try:
            v = float(self.raw(col))
        except ValueError:
            raise self.fail(col, "is not a number") from None
        if not 0 < v < float("inf"):
            raise self.fail(col, "must be a finite number > 0")
        return v

    def blank(self, col: str) -> bool:
        return (self.row.get(col) or "").strip() == ""

    def opt_int(self, col: str, lo: builtins.int = 1) -> builtins.int | None:
        return None if self.blank(col) else self.int(col, lo)

    def choice(self, col: str, kind: type[E]) -> E | None:
        """An enum cell: None when blank, else one of `kind`'s values (case-insensitive)."""
        if self.blank(col):
            return None
        try:
            return kind(self.raw(col).lower())
        except ValueError:
            raise self.fail(col, "must be one of " + ", ".join(x.value for x in kind)) from None

    def flag(self, col: str) -> bool | None:
        if self.auto(col):
            return None
        v = self.raw(col)
        if v not in ("0", "1"):
            raise self.fail(col, "must be 0, 1 or auto")
        return v == "1"


def _spec(c: _Cells) -> ModelSpec:
    spec = _architecture(c)
    mtp = c.opt_int("mtp_layers", lo=0)
    return dataclasses.replace(spec, mtp_layers=mtp) if mtp is not None else spec


def _architecture(c: _Cells) -> ModelSpec:
    arch = c.raw("arch").lower()
    ffn_raw = c.raw("ffn_act").lower()
    try:
        ffn = FfnKind(ffn_raw)
    except ValueError:
        raise c.fail("ffn_act", "must be gelu, swiglu or relu2") from None
    styles = {
        "gpt": dict(position=PositionKind.LEARNED, norm=NormKind.LAYERNORM, bias=True, tied_embeddings=True),
        "bloom": dict(position=PositionKind.ALIBI, norm=NormKind.LAYERNORM, bias=True, tied_embeddings=True,
                      embedding_norm=True),
        "llama": dict(position=PositionKind.ROPE, norm=NormKind.RMSNORM, bias=False, tied_embeddings=False),
        "nemotron": dict(position=PositionKind.ROPE, norm=NormKind.LAYERNORM, bias=False, tied_embeddings=False),
    }
    if arch == "catalog":
        return _catalog_spec(c)
    if arch not in styles:
        raise c.fail("arch", f"must be one of {', '.join(styles)}, catalog")
    seq = c.int("seq_len")
    try:
        return ModelSpec(
            name=c.row.get("model") or c.rid, layers=c.int("layers"), hidden=c.int("hidden"), heads=c.int("heads"),
            kv_heads=c.int("kv_heads"), ffn_hidden=c.int("ffn_hidden"), vocab=c.int("vocab"), ffn=ffn,
            max_positions=seq, moe=_moe(c), head_dim=c.opt_int("head_dim") or 0, **styles[arch],  # type: ignore[arg-type]
        )
    except DistscopeError as exc:
        raise DistscopeError(f"run_id={c.rid}: {exc}") from None


def _moe(c: _Cells) -> MoESpec | None:
    experts = c.opt_int("experts")
    if experts is None or experts == 1:
        for col in ("top_k", "moe_ffn_hidden", "shared_experts", "moe_dense_layers"):
            if not c.blank(col):
                raise c.fail(col, "needs an experts column > 1")
        return None
    if c.blank("top_k"):
        raise c.fail("top_k", f"is empty but experts={experts}")
    try:
        return MoESpec(experts=experts, top_k=c.int("top_k"),
                       expert_ffn_hidden=c.opt_int("moe_ffn_hidden") or c.int("ffn_hidden"),
                       shared_experts=c.opt_int("shared_experts", lo=0) or 0,
                       dense_layers=c.opt_int("moe_dense_layers", lo=0) or 0)
    except DistscopeError as exc:
        raise c.fail("top_k", str(exc)) from None


def _catalog_spec(c: _Cells) -> ModelSpec:
    from distscope.workload.catalog import get_model

    name = (c.row.get("model") or "").strip()
    try:
        spec = get_model(name)
    except DistscopeError as exc:
        raise c.fail("model", f"is not a catalog model for arch=catalog ({exc})") from None
    if c.int("layers") not in (spec.layers, spec.blocks):  # a hybrid's rows may count Megatron's blocks
        raise c.fail("layers", f"does not match catalog model {name} (layers={spec.layers}"
                     + (f", or its {spec.blocks} mixer and FFN blocks)" if spec.blocks != spec.layers else ")"))
    for col, want in (("hidden", spec.hidden), ("heads", spec.heads), ("vocab", spec.vocab)):
        if c.int(col) != want:
            raise c.fail(col, f"does not match catalog model {name} ({col}={want})")
    if spec.max_positions and c.int("seq_len") > spec.max_positions and spec.position is PositionKind.LEARNED:
        raise c.fail("seq_len", f"exceeds catalog model {name}'s {spec.max_positions} positions")
    return spec


def parse_row(row: dict[str, str], line: int) -> Row:
    rid = (row.get("run_id") or "").strip() or f"line{line}"
    c = _Cells(row, rid)
    for col in REQUIRED:
        if col not in row:
            raise DistscopeError(f"run_id={rid}: column {col} is missing")
    # csv.DictReader files cells past the header's last column under None: a stray comma shifts cells.
    extra = [x for k, cells in row.items() if k is None for x in cells if (x or "").strip()]
    if extra:
        raise DistscopeError(f"run_id={rid}: line {line} has more cells than the header has columns "
                             f"(extra: {', '.join(repr(x) for x in extra[:3])}); quote cells that hold a comma")
    overlap: frozenset[Dim] | None = None
    if not c.auto("overlap"):
        items = [x.strip().lower() for x in c.raw("overlap").split(",") if x.strip()]
        if items != ["none"]:
            try:
                overlap = frozenset(Dim(x) for x in items)
            except ValueError:
                raise c.fail("overlap", "must be a comma list of dp, tp, pp, or none, or auto") from None
        else:
            overlap = frozenset()
    recompute = None
    if not c.auto("recompute"):
        try:
            recompute = Recompute(c.raw("recompute").lower())
        except ValueError:
            raise c.fail("recompute", f"must be {', '.join(r.value for r in Recompute)} or auto") from None
    try:
        precision = Precision.parse(c.raw("precision"))
    except DistscopeError:
        raise c.fail("precision", f"must be one of {', '.join(p.value for p in Precision)}") from None
    sw_cell = (row.get("software") or "").strip()
    if sw_cell:
        try:
            software = get_software(sw_cell, field=f"run_id={rid}: column software")
        except DistscopeError as exc:
            raise DistscopeError(str(exc)) from None
    else:
        software = from_framework(row.get("framework") or "")
    attention, overlap_capable = software.attention_on(c.raw("gpu").lower()), software.overlap
    attn_cell = (row.get("attention") or "").strip().lower()
    if attn_cell:
        try:
            attention = AttentionImpl(attn_cell)
        except ValueError:
            raise c.fail("attention", f"must be one of {', '.join(a.value for a in AttentionImpl)}") from None
    zero = c.int("zero_stage", lo=0)
    if zero > 3:
        raise c.fail("zero_stage", "must be 0, 1, 2 or 3")
    reshard = True
    if not c.blank("reshard_after_forward"):
        if c.raw("reshard_after_forward") not in ("0", "1"):
            raise c.fail("reshard_after_forward", "must be 0 or 1")
        reshard = c.raw("reshard_after_forward") == "1"
        if not reshard and zero != 3:
            raise c.fail("reshard_after_forward", f"=0 needs zero_stage=3 (FSDP), got {zero}")
    capacity = None
    if not c.blank("capacity_factor"):
        capacity = c.float("capacity_factor")
    dispatcher = c.choice("moe_dispatcher", MoeDispatcher) or MoeDispatcher.ALLTOALL
    balance = c.choice("moe_balance", MoeBalance)
    spec = _spec(c)
    if spec.moe is None:
        for col in ("etp", "capacity_factor", "moe_dispatcher", "moe_a2a_overlap", "moe_balance"):
            if not c.blank(col):
                raise c.fail(col, "needs a MoE model (experts > 1)")
    a2a_overlap = False if c.blank("moe_a2a_overlap") else c.flag("moe_a2a_overlap")
    if a2a_overlap is None:
        raise c.fail("moe_a2a_overlap", "must be 0 or 1")
    return Row(
        run_id=rid, spec=spec, seq_len=c.int("seq_len"), global_batch=c.int("global_batch"),
        micro_batch=None if c.auto("micro_batch") else c.int("micro_batch"),
        tp=c.int("tp"), pp=c.int("pp"), vp=None if c.auto("vp") else c.int("vp"), dp=c.int("dp"), cp=c.int("cp"),
        ep=c.int("ep"),
        sequence_parallel=c.flag("sequence_parallel"), zero_stage=zero,
        distributed_optimizer=c.flag("distributed_optimizer"), overlap=overlap, recompute=recompute,
        precision=precision, attention=attention, overlap_capable=overlap_capable, software=software, gpu=c.raw("gpu").lower(), num_gpus=c.int("num_gpus"),
        gpus_per_node=c.int("gpus_per_node"), intra_node_GBps=c.float("intra_node_GBps"),
        inter_node_GBps_per_gpu=c.float("inter_node_GBps_per_gpu"),
        measured_step_time_s=c.float("measured_step_time_s"),
        first_stage_layers=c.opt_int("first_stage_layers", lo=0), last_stage_layers=c.opt_int("last_stage_layers", lo=0),
        reshard_after_forward=reshard, schedule=c.choice("schedule", Schedule), etp=c.opt_int("etp"), capacity_factor=capacity,
        moe_dispatcher=dispatcher, moe_a2a_overlap=a2a_overlap, moe_balance=balance,
    )


def read_rows(path: str | Path) -> list[tuple[int, dict[str, str]]]:
    """Raw rows with their line numbers; a file that is not a readable CSV is one clear error.

    Header names are normalised in userfile.parse_csv (a byte-order mark or spaces around a name are
    not part of it)."""
    names, rows = read_csv(path, "CSV")
    if not names:
        raise DistscopeError(f"{path}: empty CSV")
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise DistscopeError(f"{path}: missing columns {', '.join(missing)}")
    return rows  # type: ignore[return-value]  # the None key (extra cells) is checked in parse_row
