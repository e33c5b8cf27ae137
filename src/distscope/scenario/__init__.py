"""Flags -> (workload, system, plan), once for every verb: flags.py (the three families and every
default), options.py (the families as typer options), build.py (flags -> Scenario), argv.py (a Plan
back to the flags that reproduce it)."""

from distscope.scenario.build import (
    DEFAULT_SEQ,
    Scenario,
    build_cluster,
    build_plan,
    build_scenario,
    build_workload,
    check_seq,
    default_seq,
    parse_int_list,
    parse_links,
    parse_overlap,
    plan_on,
    software_of,
    warn_kernel_fallbacks,
)
from distscope.scenario.flags import (
    PLANNER_SYSTEM,
    PLANNER_WORKLOAD,
    PlanFlags,
    SystemFlags,
    WorkloadFlags,
    first_set_flag,
)
from distscope.scenario.options import help_of, with_flags

__all__ = [
    "DEFAULT_SEQ", "PLANNER_SYSTEM", "PLANNER_WORKLOAD", "PlanFlags", "Scenario", "SystemFlags", "WorkloadFlags",
    "build_cluster", "build_plan", "build_scenario", "build_workload", "check_seq", "default_seq", "first_set_flag",
    "help_of",
    "parse_int_list", "parse_links", "parse_overlap", "plan_on", "software_of", "warn_kernel_fallbacks",
    "with_flags",
]
