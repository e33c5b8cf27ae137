"""The flag families (scenario/flags.py) as typer options, declared once for every verb.

`@with_flags(WorkloadFlags, SystemFlags, PlanFlags)` on a command `fn(workload, system, plan, *, own...)`
exposes every field of the families as an option (help panels Workload / System / Plan, defaults from
the dataclasses) beside the command's own options, and calls `fn` with one instance of each family.
A verb with a different demo scenario passes its own family instances (`defaults=`), never its own
default literals.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from distscope.scenario.flags import PLAN, SYSTEM, WORKLOAD, PlanFlags, SystemFlags, WorkloadFlags

F = TypeVar("F", bound=Callable[..., Any])
PANELS: dict[type, tuple[str, str]] = {  # family -> (the command's parameter name, help panel)
    WorkloadFlags: ("workload", WORKLOAD),
    SystemFlags: ("system", SYSTEM),
    PlanFlags: ("plan", PLAN),
}


def help_of(family: type, name: str) -> str:
    """A field's help text (for a verb that declares the option itself, with its own semantics)."""
    return str(next(f for f in dataclasses.fields(family) if f.name == name).metadata["help"])


def option(family: type, name: str, *, default: Any = dataclasses.MISSING, **override: Any) -> Any:
    """One field of a family as an `Annotated[type, typer.Option(...)]` (for verbs that take only some)."""
    f = next(x for x in dataclasses.fields(family) if x.name == name)
    hint = typing.get_type_hints(family)[name]
    meta = {"help": f.metadata["help"], "rich_help_panel": PANELS[family][1], **override}
    return Annotated[hint, typer.Option(*f.metadata["decls"], **meta)]


def _names(family: type, only: dict[type, tuple[str, ...]]) -> tuple[str, ...]:
    return only.get(family) or tuple(f.name for f in dataclasses.fields(family))


def _parameters(instance: Any, names: tuple[str, ...]) -> list[inspect.Parameter]:
    family = type(instance)
    return [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=getattr(instance, n),
                              annotation=option(family, n)) for n in names]


def with_flags(*families: type, defaults: tuple[Any, ...] = (),
               only: dict[type, tuple[str, ...]] | None = None) -> Callable[[F], F]:
    """Decorate a typer command with the families' options (module doc). `defaults`: family instances
    whose field values replace the dataclass defaults for this verb; `only`: the fields a verb exposes
    of a family (the rest keep their defaults in the instance it receives)."""
    given = {type(d): d for d in defaults}
    only = only or {}

    def wrap(fn: F) -> F:
        own = inspect.signature(fn, eval_str=True)
        names = {PANELS[fam][0] for fam in families}
        own_params = [p for p in own.parameters.values() if p.name not in names]
        family_params = [p for fam in families for p in _parameters(given.get(fam, fam()), _names(fam, only))]
        clash = {p.name for p in family_params} & {p.name for p in own_params}
        assert not clash, f"{fn.__name__}: options {clash} are both the verb's own and a flag family's"

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            built = {PANELS[fam][0]: dataclasses.replace(given.get(fam, fam()),
                                                         **{n: kwargs.pop(n) for n in _names(fam, only)})
                     for fam in families}
            return fn(**built, **kwargs)

        params = sorted([*own_params, *family_params], key=lambda p: p.kind != inspect.Parameter.POSITIONAL_OR_KEYWORD)
        command.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer must read __signature__, not the wrapped function's
        return command  # type: ignore[return-value]

    return wrap
