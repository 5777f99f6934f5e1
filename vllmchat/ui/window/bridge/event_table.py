"""The event types of the events modules, and the name of each one's signal.

An event type is a frozen dataclass defined in one of the events modules. Those a
module's unions name come first, in the unions' order; a dataclass no union names
yet is an event too, unless another dataclass of the module carries it in a field
(``TurnStats`` in ``StatsEvent``, ``ToolInfo`` in ``ServerStatus``): that is a payload.
A new event type gets its signal without anyone declaring one.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Iterable
from typing import TypeGuard, get_args

from vllmchat.core.app import events as app_events
from vllmchat.core.app.voice import events as voice_events
from vllmchat.core.conversations import events as conversation_events
from vllmchat.core.engine import events as engine_events
from vllmchat.core.models import events as model_events
from vllmchat.core.tools import events as tool_events
from vllmchat.core.tuning import events as tuning_events

EVENT_MODULES: tuple[types.ModuleType, ...] = (
    engine_events,
    conversation_events,
    tuning_events,
    tool_events,
    model_events,
    app_events,
    voice_events,
)
"""One module per layer; each declares its events, and its unions name them."""


def _is_event_class(value: object) -> TypeGuard[type]:
    return isinstance(value, type) and dataclasses.is_dataclass(value)


def _defined_dataclasses(module: types.ModuleType) -> list[type]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and value.__module__ == module.__name__
        and dataclasses.is_dataclass(value)
    ]


def _payloads(classes: list[type]) -> set[type]:
    """The dataclasses another one of ``classes`` names in a field's annotation."""
    carried: set[type] = set()
    for cls in classes:
        for f in dataclasses.fields(cls):
            words = set(re.findall(r"\w+", str(f.type)))
            carried.update(c for c in classes if c is not cls and c.__name__ in words)
    return carried


def event_types(modules: Iterable[types.ModuleType] = EVENT_MODULES) -> tuple[type, ...]:
    """Every event type of ``modules``, each once: the unions' members in order, then the
    dataclasses no union names and no other dataclass carries."""
    modules = tuple(modules)
    found: dict[type, None] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, types.UnionType):
                found.update(dict.fromkeys(t for t in get_args(value) if _is_event_class(t)))
    for module in modules:
        defined = _defined_dataclasses(module)
        payloads = _payloads(defined)
        found.update(dict.fromkeys(c for c in defined if c not in payloads and c not in found))
    return tuple(found)


_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def signal_name(event_type: type) -> str:
    """The signal's name: the type's name in snake case (``LoadStarted``: ``load_started``)."""
    return re.sub(
        r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", event_type.__name__
    ).lower()
