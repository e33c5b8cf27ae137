"""cached_hash: a frozen config hashes once per process, equal configs hash equal, pickling drops it."""

from __future__ import annotations

import dataclasses
import pickle

from distscope.plan import Plan
from distscope.workload import get_model


def test_cached_hash_is_the_field_hash_and_is_not_pickled() -> None:
    spec = get_model("llama3-8b")
    again = dataclasses.replace(spec)  # equal, a new object: hashed afresh
    assert again == spec and hash(again) == hash(spec)
    assert hash(spec) == hash(spec)  # the cached value
    other = dataclasses.replace(spec, layers=spec.layers + 1)
    assert other != spec and hash(other) != hash(spec)
    state = spec.__getstate__()  # type: ignore[attr-defined]
    assert all(not k.startswith("_distscope") for k in state)
    copy = pickle.loads(pickle.dumps(spec))
    assert copy == spec and hash(copy) == hash(spec) and {spec: 1}[copy] == 1
    plan = Plan(tp=2, pp=2, dp=2)
    assert {plan: 1}[pickle.loads(pickle.dumps(plan))] == 1
