"""An embedding sharding as a file: what `plan --model dlrm:... --write-sharding FILE` writes and
`estimate --sharding FILE` reads back, so that the estimate of the written plan is the plan's own.

```yaml
tables:
  - table: cat_0
    sharding: table_wise
    shards: [{rank: 3, rows: 40000000, cols: 128}]
```

Every table of the model appears once; each shard's rank is in 0..gpus-1; table-wise has one shard
holding the whole table; column-wise shards hold all rows and their columns add up to the dim; row-wise
shards (one per rank) and table-row-wise shards (the ranks of one node) hold all columns and their rows
add up to the table's; data-parallel has the whole table on every rank.
"""

from __future__ import annotations

from typing import Any

import yaml

from distscope.errors import DistscopeError, closest
from distscope.model.embedding_cost import Shard, ShardingType, TableSharding
from distscope.system.topology import Cluster
from distscope.userfile import check_keys, int_field, mappings, read_yaml, write_text
from distscope.workload.embedding import DlrmSpec


def dump_sharding(shardings: tuple[TableSharding, ...]) -> str:
    return yaml.safe_dump({"tables": [ts.to_dict() for ts in shardings]}, sort_keys=False, default_flow_style=None)


def write_sharding(path: str, shardings: tuple[TableSharding, ...]) -> None:
    write_text(path, dump_sharding(shardings), "--write-sharding")


def _check(ts: TableSharding, cluster: Cluster, where: str) -> None:
    t, n = ts.table, cluster.num_gpus
    local = min(cluster.gpus_per_node, n)
    ranks = [s.rank for s in ts.shards]
    bad = next((r for r in ranks if not 0 <= r < n), None)
    if bad is not None:
        raise DistscopeError(f"{where}: rank={bad} is outside 0..{n - 1} (--gpus {n})")
    rows, cols = sum(s.rows for s in ts.shards), sum(s.cols for s in ts.shards)
    kind = ts.kind
    if kind is ShardingType.TABLE_WISE and (len(ts.shards) != 1 or rows != t.rows or cols != t.dim):
        raise DistscopeError(f"{where}: table_wise needs one shard of {t.rows} rows x {t.dim} cols")
    if kind is ShardingType.COLUMN_WISE and (cols != t.dim or any(s.rows != t.rows for s in ts.shards)):
        raise DistscopeError(f"{where}: column_wise shards hold all {t.rows} rows and their cols add up to {t.dim} "
                             f"(they add up to {cols})")
    if kind in (ShardingType.ROW_WISE, ShardingType.TABLE_ROW_WISE) and (
            rows != t.rows or any(s.cols != t.dim for s in ts.shards)):
        raise DistscopeError(f"{where}: {kind.value} shards hold all {t.dim} cols and their rows add up to {t.rows} "
                             f"(they add up to {rows})")
    if kind is ShardingType.ROW_WISE and sorted(ranks) != list(range(n)):
        raise DistscopeError(f"{where}: row_wise needs one shard on each of the {n} ranks")
    if kind is ShardingType.TABLE_ROW_WISE:
        nodes = sorted({r // local for r in ranks})
        if sorted(ranks) != [h * local + j for h in nodes for j in range(local)]:
            raise DistscopeError(f"{where}: table_row_wise needs one shard on each of the {local} ranks of the nodes it "
                                 f"spans (ranks {sorted(ranks)})")
    if kind is ShardingType.DATA_PARALLEL and (sorted(ranks) != list(range(n)) or any(
            s.rows != t.rows or s.cols != t.dim for s in ts.shards)):
        raise DistscopeError(f"{where}: data_parallel needs the whole table on each of the {n} ranks")


def parse_sharding(raw: Any, spec: DlrmSpec, cluster: Cluster, where: str) -> tuple[TableSharding, ...]:
    if not isinstance(raw, dict) or not isinstance(raw.get("tables"), list):
        raise DistscopeError(f"{where}: expected a mapping with a 'tables' list (what plan --write-sharding writes)")
    check_keys(raw, ("tables",), where)
    by_name = {t.name: t for t in spec.tables}
    got: dict[str, TableSharding] = {}
    for w, e in mappings(raw["tables"], "tables", ("table", "sharding", "shards"), where):
        name = str(e.get("table"))
        if name not in by_name:
            raise DistscopeError(f"{w}: table={name!r} is not a table of {spec.name}{closest(name, by_name)}")
        if name in got:
            raise DistscopeError(f"{w}: table {name} appears twice")
        kind = ShardingType.parse(str(e.get("sharding")), f"{w} sharding")
        shards: list[Shard] = []
        for ws, s in mappings(e.get("shards"), "shards", ("rank", "rows", "cols"), w):
            rank = s.get("rank")
            if not isinstance(rank, int) or isinstance(rank, bool):
                raise DistscopeError(f"{ws}: rank={rank!r} is not a whole number")
            rows = s.get("rows")
            if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
                raise DistscopeError(f"{ws}: rows={rows!r} is not a whole number >= 0 (a row-wise shard may be empty)")
            shards.append(Shard(rank, rows, int_field(s, "cols", ws)))
        ts = TableSharding(by_name[name], kind, tuple(shards))
        _check(ts, cluster, f"{w} ({name})")
        got[name] = ts
    missing = [t.name for t in spec.tables if t.name not in got]
    if missing:
        raise DistscopeError(f"{where}: table {missing[0]} has no sharding ({len(missing)} of {len(spec.tables)} missing)")
    return tuple(got[t.name] for t in spec.tables)


def load_sharding(path: str, spec: DlrmSpec, cluster: Cluster) -> tuple[TableSharding, ...]:
    return parse_sharding(read_yaml(path, "--sharding"), spec, cluster, path)
