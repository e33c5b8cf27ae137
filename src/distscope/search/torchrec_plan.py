"""TorchRec's own sharding planner on a DlrmSpec, for comparison with search/embedding_plan.py.

The same tables become an `EmbeddingBagCollection` on the meta device; TorchRec's
`EmbeddingShardingPlanner` plans it for a `Topology` of the cluster's world size, GPUs per node and
memory per GPU, at the per-rank batch, with each table's pooling factor as a `ParameterConstraints`
and the sharding types distscope prices (TorchRec's grid and table-column-wise shardings are left out,
so both planners choose from the same five). Its plan becomes distscope's `TableSharding`s, to be
priced by the same cost model, and each rank's TorchRec perf estimate (the sum of its shards'
`Perf.total`, what TorchRec's partitioner balances) is returned beside it.

Needs `torchrec` and FBGEMM (CPU build). TorchRec 1.8.0 with fbgemm-gpu-cpu 1.8.0 imports against
PyTorch 2.13's CPU build; pip resolves torchrec's `fbgemm-gpu` requirement to the CUDA build, whose
libraries need libtorch_cuda, so the CPU build is installed over it last:
    pip install torchrec==1.8.0 && pip install --force-reinstall --no-deps fbgemm-gpu-cpu==1.8.0
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from typing import Any

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.model.embedding_cost import Shard, ShardingType, TableSharding
from distscope.system.topology import Cluster
from distscope.workload.embedding import DlrmSpec

INSTALL = "pip install torchrec==1.8.0 && pip install --force-reinstall --no-deps fbgemm-gpu-cpu==1.8.0"


def available() -> bool:
    try:
        _import()
    except DistscopeError:
        return False
    return True


def _import() -> Any:
    logging.disable(logging.ERROR)  # fbgemm logs its optional libraries at import
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            import torchrec.distributed.planner as planner
    except Exception as exc:  # ImportError, or OSError from a library built for another torch
        raise DistscopeError(f"TorchRec's planner does not import here ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:120]}); install it with: {INSTALL}") from None
    finally:
        logging.disable(logging.NOTSET)
    return planner


def torchrec_plan(spec: DlrmSpec, cluster: Cluster, *, global_batch: int
                  ) -> tuple[tuple[TableSharding, ...], tuple[float, ...]]:
    """TorchRec's sharding of `spec` and its perf estimate per rank, in seconds (module docstring)."""
    planner_mod = _import()
    import torch
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.planner.types import ParameterConstraints
    from torchrec.modules.embedding_configs import DataType, EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    n = cluster.num_gpus
    dtype = DataType.FP16 if spec.embedding_dtype is DType.FP16 else DataType.FP32
    configs = [EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.rows, feature_names=[t.name],
                                  data_type=dtype) for t in spec.tables]
    ebc = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
    types = [k.value for k in ShardingType]
    constraints = {t.name: ParameterConstraints(sharding_types=types, compute_kernels=["fused"],
                                                pooling_factors=[t.pooling]) for t in spec.tables}
    # the cluster's own bandwidths, in TorchRec's bytes per millisecond (its defaults are 897 GB/s HBM,
    # 600 and 12.5 GB/s between GPUs inside and across hosts)
    inner, outer = cluster.levels[0], cluster.levels[-1]
    topo = planner_mod.Topology(world_size=n, compute_device="cuda", local_world_size=min(cluster.gpus_per_node, n),
                                hbm_cap=int(cluster.memory_capacity_bytes), hbm_mem_bw=cluster.device.hbm_Bps / 1e3,
                                intra_host_bw=inner.eff_Bps / 1e3, inter_host_bw=outer.eff_Bps / 1e3)
    pl = planner_mod.EmbeddingShardingPlanner(topology=topo, batch_size=global_batch // n, constraints=constraints)
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its storage-reservation policy's FutureWarning, on every plan
            pl.plan(ebc, [EmbeddingBagCollectionSharder()])
    except Exception as exc:  # TorchRec's PlannerError when nothing fits, among others
        raise DistscopeError(f"TorchRec's planner found no plan: {str(exc).splitlines()[0][:200]}") from None
    finally:
        logging.disable(logging.NOTSET)
    by_name = {t.name: t for t in spec.tables}
    per_rank = [0.0] * n
    out: dict[str, TableSharding] = {}
    for so in pl._best_plan or []:  # its chosen ShardingOptions, with each shard's Perf
        table = by_name[so.name]
        kind = ShardingType(so.sharding_type)
        shards = []
        for s in so.shards:
            rows, cols = int(s.size[0]), int(s.size[1])
            shards.append(Shard(int(s.rank), rows, cols))
            per_rank[int(s.rank)] += float(s.perf.total) / 1e3  # TorchRec's perf is in milliseconds
        out[so.name] = TableSharding(table, kind, tuple(shards))
    return tuple(out[t.name] for t in spec.tables), tuple(per_rank)
