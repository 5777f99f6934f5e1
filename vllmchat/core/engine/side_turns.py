"""A task of the window's conversation beside its turns (its title, its summary).

Where the engine runs API slots, the task runs in one, from a copy of the window
sequence's cells (``ApiSlot(fork_window=True)``): the window's cache is left as it
is, and the task is batched with the API's turns and the window's next one. Else it
runs in the window's sequence, after the conversation, as a turn does.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence

from vllmchat.core.engine.api_states import ApiSlot, RunsSlots, keeps_states
from vllmchat.core.engine.events import Event
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.settings import SamplingSettings

_tickets = itertools.count(-1, -1)  # apart from the API queue's tickets (from 1 up)


def forks_the_window(engine: Engine) -> bool:
    """Whether ``engine`` runs the window's tasks in slots of their own."""
    info = engine.info
    return keeps_states(engine) and info is not None and info.api_slots > 0


class SideTurn:
    """One task's stream on ``engine``, and its stop (any thread, within a token)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.in_slot = forks_the_window(engine)
        self.ticket = next(_tickets)

    def chat(
        self, messages: Sequence[Mapping[str, str]], sampling: SamplingSettings
    ) -> Iterator[Event]:
        if self.in_slot:
            assert isinstance(self.engine, RunsSlots)
            slot = ApiSlot(fork_window=True)
            yield from self.engine.chat(messages, sampling, slot=slot, ticket=self.ticket)
        else:
            yield from self.engine.chat(messages, sampling)

    def stop(self) -> None:
        if self.in_slot:
            assert isinstance(self.engine, RunsSlots)
            self.engine.stop_slot(self.ticket)
        else:
            self.engine.stop()
