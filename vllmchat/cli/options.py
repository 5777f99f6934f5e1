"""Command-line options generated from the settings dataclasses.

Each option is a field of ``LoadSettings``, ``SamplingSettings``,
``ContextPolicy`` or ``FitSettings``: its name, type, choices, help and the
default shown come from the field, as llama-cpp-python's server builds its CLI
from its settings model. An option not given keeps the settings' own default.
A field that is itself a dataclass (the load settings' ``placement``) gives its
own fields as options, under their own names (``--n-gpu-layers``); ``build``
nests them again.
"""

from __future__ import annotations

import argparse
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

# Shorter names kept for options people type often.
ALIASES = {"model_path": ("--model",), "n_threads": ("--threads",), "mode": ("--policy",)}


def _default(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


def add_options(
    parser: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = ()
) -> list[str]:
    """Add an option per field of the dataclass ``cls``; returns the field names added."""
    hints = typing.get_type_hints(cls)
    added = []
    for f in fields(cls):
        if f.name in skip:
            continue
        kind = hints[f.name]
        if is_dataclass(kind):
            added += add_options(parser, kind, skip=skip)  # type: ignore[arg-type]
            continue
        flags = [f"--{f.name.replace('_', '-')}", *ALIASES.get(f.name, ())]
        default = _default(f)
        shown = f" (default: {default})" if default not in (None, "") else ""
        text = f.metadata.get("help", f.name.replace("_", " ")) + shown
        options: dict[str, Any] = {"dest": f.name, "default": None, "help": text}
        if kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(kind) is typing.Literal:
            options["choices"] = typing.get_args(kind)
        else:
            options["type"] = kind
        parser.add_argument(*flags, **options)
        added.append(f.name)
    return added


def given(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """The options among ``names`` that were given on the command line."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def build(cls: type, values: dict[str, Any]) -> Any:
    """An instance of the dataclass ``cls`` from option values by their flat names:
    the fields of a nested dataclass field are gathered into it."""
    hints = typing.get_type_hints(cls)
    own: dict[str, Any] = {}
    for f in fields(cls):
        kind = hints[f.name]
        if is_dataclass(kind):
            inner = {g.name for g in fields(kind)}
            picked = {k: v for k, v in values.items() if k in inner}
            if picked:
                own[f.name] = build(kind, picked)  # type: ignore[arg-type]
        elif f.name in values:
            own[f.name] = values[f.name]
    return cls(**own)
