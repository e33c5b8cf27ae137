"""A recommendation model (DLRM / DLRM-DCNv2, as TorchRec builds it) as a workload: embedding tables and a
dense part, from `--model dlrm:tables.yaml` or a built-in preset (`dlrm:mlperf-dcnv2`).

```yaml
name: my-dlrm
dense_features: 13            # dense inputs per sample (the bottom MLP's input)
bottom_mlp: [512, 256, 128]   # layer widths; the last is every embedding's dim for the interaction
top_mlp: [1024, 1024, 512, 256, 1]
interaction: dcn              # dot (DLRM) or dcn (DCNv2: low-rank cross layers)
dcn_layers: 3
dcn_rank: 512
embedding_dtype: fp32         # table storage (fp32 or fp16)
output_dtype: fp16            # optional: pooled embeddings and their gradients as the all-to-alls move
                              # them (default: embedding_dtype; HugeCTR under mixed precision: fp16)
dense_dtype: bf16             # the MLPs' compute dtype
dense_grad_dtype: fp32        # optional: the dense gradients as the all-reduce moves them (default fp32:
                              # DDP under autocast; HugeCTR and apex O2 under mixed precision: fp16)
optimizer: rowwise_adagrad    # the tables' fused optimizer: sgd, rowwise_adagrad, adagrad or adam
tables:
  - {name: t0, rows: 40000000, dim: 128, pooling: 3}   # pooling: ids looked up per sample (mean)
```

A table with `count: k` stands for k identical tables (t0_0 .. t0_{k-1}). The preset is the MLPerf
Training DLRM-DCNv2 benchmark on Criteo 1TB multi-hot (the reference `torchrec_dlrm` arguments:
`--num_embeddings_per_feature 40000000,39060,... --multi_hot_sizes 3,2,1,... --dcn_num_layers=3
--dcn_low_rank_dim=512`).
"""

from __future__ import annotations

import dataclasses
import functools
from importlib import resources
from typing import Any

from distscope.dtypes import DType
from distscope.enums import Enum
from distscope.errors import DistscopeError, closest
from distscope.hashing import cached_hash
from distscope.userfile import check_keys, int_field, mappings, num_field, read_yaml

PREFIX = "dlrm:"
_TOP = ("name", "dense_features", "bottom_mlp", "top_mlp", "interaction", "dcn_layers", "dcn_rank",
        "embedding_dtype", "output_dtype", "dense_dtype", "dense_grad_dtype", "optimizer", "tables")
_TABLE = ("name", "rows", "dim", "pooling", "count")  # the first three name the shape in messages
PRESETS = {"mlperf-dcnv2": "data/dlrm_mlperf_dcnv2.yaml"}


class Interaction(Enum):
    DOT = "dot"  # DLRM: pairwise dot products of the (tables + 1) feature vectors
    DCN = "dcn"  # DCNv2: x_{l+1} = x0 ⊙ (U Vᵀ x_l + b) + x_l over the concatenated features


class TableOptimizer(Enum):
    """The fused optimizer FBGEMM's table-batched embedding applies in the backward pass, by the state it
    reads and writes per touched row."""

    SGD = "sgd"
    ROWWISE_ADAGRAD = "rowwise_adagrad"  # one fp32 accumulator per row
    ADAGRAD = "adagrad"  # one fp32 accumulator per element (HugeCTR's Adagrad: its planner counts 8 bytes
    # per element, weight and accumulator, MLPerf DLRM-DCNv2 sharding/generate_plan.py)
    ADAM = "adam"  # two fp32 moments per element

    def state_bytes(self, dim: int) -> float:
        """Optimizer state per row, bytes."""
        return {TableOptimizer.SGD: 0.0, TableOptimizer.ROWWISE_ADAGRAD: 4.0,
                TableOptimizer.ADAGRAD: 4.0 * dim, TableOptimizer.ADAM: 8.0 * dim}[self]


@dataclasses.dataclass(frozen=True, slots=True)
class EmbeddingTable:
    name: str
    rows: int
    dim: int
    pooling: float  # mean ids per sample looked up in this table (1 = one-hot)

    def bytes(self, dtype: DType) -> float:
        return self.rows * self.dim * dtype.bytes


@cached_hash  # a key of the step model's per-table cache
@dataclasses.dataclass(frozen=True)
class DlrmSpec:
    name: str
    tables: tuple[EmbeddingTable, ...]
    dense_features: int
    bottom_mlp: tuple[int, ...]
    top_mlp: tuple[int, ...]
    interaction: Interaction
    dcn_layers: int
    dcn_rank: int
    embedding_dtype: DType
    dense_dtype: DType
    optimizer: TableOptimizer
    output_dtype: DType | None = None  # on the wire; None: embedding_dtype
    dense_grad_dtype: DType = DType.FP32  # the dense gradients in the all-reduce

    @property
    def pooled_dtype(self) -> DType:
        """The dtype of pooled embeddings and their gradients: what the lookups write and the all-to-alls
        and reduce-scatters move."""
        return self.output_dtype or self.embedding_dtype

    @property
    def feature_dim(self) -> int:
        """Width of each feature vector entering the interaction: the bottom MLP's output."""
        return self.bottom_mlp[-1]

    def dense_layers(self) -> tuple[tuple[int, int], ...]:
        """(in, out) of every dense GEMM of one sample's forward: bottom MLP, interaction, top MLP."""
        layers: list[tuple[int, int]] = []
        width = self.dense_features
        for w in self.bottom_mlp:
            layers.append((width, w))
            width = w
        f = len(self.tables) + 1
        if self.interaction is Interaction.DCN:
            width = f * self.feature_dim
            for _ in range(self.dcn_layers):
                layers += [(width, self.dcn_rank), (self.dcn_rank, width)]
        else:
            width = self.feature_dim + f * (f - 1) // 2
        for w in self.top_mlp:
            layers.append((width, w))
            width = w
        return tuple(layers)

    @property
    def dense_params(self) -> int:
        return sum(i * o + o for i, o in self.dense_layers())

    @property
    def embedding_params(self) -> int:
        return sum(t.rows * t.dim for t in self.tables)


def is_dlrm_ref(model: str | None) -> bool:
    return model is not None and model.startswith(PREFIX)


def _dims(raw: Any, key: str, where: str) -> tuple[int, ...]:
    v = raw.get(key)
    if not isinstance(v, list) or not v:
        raise DistscopeError(f"{where}: {key}={v!r} must be a non-empty list of layer widths")
    return tuple(int_field({key: x}, key, where) for x in v)


def _enum(raw: dict[str, Any], key: str, cls: type[Enum], default: str, where: str) -> Any:
    v = str(raw.get(key, default)).strip().lower()
    try:
        return cls(v)
    except ValueError:
        raise DistscopeError(f"{where}: {key}={raw.get(key)!r} is not one of "
                             f"{', '.join(str(m.value) for m in cls)}{closest(v, [str(m.value) for m in cls])}") from None


def _tables(raw: Any, where: str) -> tuple[EmbeddingTable, ...]:
    out: list[EmbeddingTable] = []
    for i, (w, e) in enumerate(mappings(raw, "tables", _TABLE, where)):
        name = str(e.get("name", f"t{i}"))
        rows, dim = int_field(e, "rows", f"{w} ({name})"), int_field(e, "dim", f"{w} ({name})")
        pooling = num_field(e, "pooling", f"{w} ({name})", 1.0)
        count = int_field(e, "count", f"{w} ({name})", 1)
        names = [name] if count == 1 else [f"{name}_{k}" for k in range(count)]
        out += [EmbeddingTable(n, rows, dim, pooling) for n in names]
    seen: set[str] = set()
    for t in out:
        if t.name in seen:
            raise DistscopeError(f"{where}: table name {t.name!r} appears twice")
        seen.add(t.name)
    return tuple(out)


def parse_dlrm(raw: Any, where: str) -> DlrmSpec:
    """A DlrmSpec from the YAML's mapping (module docstring); every bad field is one line naming it."""
    if not isinstance(raw, dict):
        raise DistscopeError(f"{where}: expected a mapping with tables, bottom_mlp and top_mlp")
    check_keys(raw, _TOP, where)
    spec = DlrmSpec(
        name=str(raw.get("name", where)), tables=_tables(raw.get("tables"), where),
        dense_features=int_field(raw, "dense_features", where, 13),
        bottom_mlp=_dims(raw, "bottom_mlp", where), top_mlp=_dims(raw, "top_mlp", where),
        interaction=_enum(raw, "interaction", Interaction, "dot", where),
        dcn_layers=int_field(raw, "dcn_layers", where, 3), dcn_rank=int_field(raw, "dcn_rank", where, 512),
        embedding_dtype=_enum(raw, "embedding_dtype", DType, "fp32", where),
        dense_dtype=_enum(raw, "dense_dtype", DType, "bf16", where),
        optimizer=_enum(raw, "optimizer", TableOptimizer, "rowwise_adagrad", where),
        output_dtype=_enum(raw, "output_dtype", DType, "", where) if "output_dtype" in raw else None,
        dense_grad_dtype=_enum(raw, "dense_grad_dtype", DType, "fp32", where))
    if spec.embedding_dtype not in (DType.FP32, DType.FP16):
        raise DistscopeError(f"{where}: embedding_dtype={spec.embedding_dtype.value} (FBGEMM's trained tables: fp32 "
                             "or fp16)")
    if spec.output_dtype not in (None, DType.FP32, DType.FP16, DType.BF16):
        raise DistscopeError(f"{where}: output_dtype={spec.output_dtype.value} (fp32, fp16 or bf16)")
    if spec.dense_grad_dtype not in (DType.FP32, DType.FP16, DType.BF16):
        raise DistscopeError(f"{where}: dense_grad_dtype={spec.dense_grad_dtype.value} (fp32, fp16 or bf16)")
    if spec.dense_dtype not in (DType.FP32, DType.TF32, DType.FP16, DType.BF16):
        raise DistscopeError(f"{where}: dense_dtype={spec.dense_dtype.value} (fp32, tf32, fp16 or bf16)")
    if spec.interaction is Interaction.DOT:
        bad = [t.name for t in spec.tables if t.dim != spec.feature_dim]
        if bad:
            raise DistscopeError(f"{where}: table {bad[0]} dim differs from bottom_mlp's last width "
                                 f"{spec.feature_dim} (the dot interaction needs them equal)")
    return spec


@functools.cache
def _preset(name: str) -> DlrmSpec:
    import yaml

    text = resources.files("distscope.workload").joinpath(PRESETS[name]).read_text()
    return parse_dlrm(yaml.safe_load(text), f"dlrm:{name}")


def load_dlrm(ref: str) -> DlrmSpec:
    """`dlrm:PRESET` or `dlrm:path/to/tables.yaml`."""
    arg = ref.removeprefix(PREFIX)
    if arg in PRESETS:
        return _preset(arg)
    if not arg.endswith((".yaml", ".yml")):
        raise DistscopeError(f"--model {ref!r}: expected dlrm:FILE.yaml or a preset "
                             f"({', '.join('dlrm:' + p for p in PRESETS)}){closest(arg, PRESETS)}")
    return parse_dlrm(read_yaml(arg, "--model"), arg)
