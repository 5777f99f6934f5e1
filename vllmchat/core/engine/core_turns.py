"""A core of the engine's, lent for a moment between two tokens.

Where llama.cpp's threads take every core (no core to spare, nothing offloaded to a
GPU), other work on this machine can only run by taking a core from them, and since
those threads wait for each other at every step, a core taken from one stalls the
others too. Work that must run while a reply decodes (the voice making the next clause
of the reply) costs the decode less when it is lent a core: at its next token the decode
goes on with one thread fewer, the work runs on the core that thread leaves, and the
decode takes it back at the token after the work ends. A decode on one thread waits
instead (``give_way``). The time lent counts in the decode's own speed, as the user
meets it.

One ``CoreTurns`` is made by the client side with the engine's process and handed to
it; the process side says whether it lends (``lend_when``), marks its decoding, and
between tokens sees whether a core is asked for (``asked``) and says it was lent
(``lent``); the client side borrows (``borrowed``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.context import BaseContext

from vllmchat.core.settings import LoadSettings, usable_cores, within_cores

WAIT_FOR_TURN_S = 0.2  # the longest a borrower waits for the decode's next token
LONGEST_TURN_S = 2.0  # the longest a decode on one thread waits (a borrower that hangs)
_POLL_S = 0.001


class CoreTurns:
    """Shared by the engine's process and its client (multiprocessing events)."""

    def __init__(self, context: BaseContext) -> None:
        self._lends = context.Event()  # the loaded placement leaves no core to spare
        self._decoding = context.Event()  # a reply is decoding
        self._wanted = context.Event()  # a borrower asks for a core
        self._given = context.Event()  # the decode has lent it

    # -- the process side ----------------------------------------------------------------
    def lend_when(self, settings: LoadSettings, *, offloaded: bool) -> None:
        """Lend from now on when ``settings`` keep every core busy decoding on the CPU
        (``offloaded``: a GPU takes part, and the cores wait on it)."""
        spare = usable_cores() - within_cores(settings.n_threads)
        if spare < 1 and not offloaded:
            self._lends.set()
        else:
            self._lends.clear()

    @contextmanager
    def decoding(self) -> Iterator[None]:
        """A reply decodes within: a borrower waits for its next token."""
        self._decoding.set()
        try:
            yield
        finally:
            self._decoding.clear()
            self._given.clear()

    def asked(self) -> bool:
        """Whether a borrower asks for a core now."""
        return self._wanted.is_set()

    def lent(self, lent: bool) -> None:
        """The decode lent its core (True) or took it back (False)."""
        if lent:
            self._given.set()
        else:
            self._given.clear()

    def give_way(self) -> None:
        """Between two tokens of a decode on one thread: while a borrower holds the
        core, wait (at most ``LONGEST_TURN_S``)."""
        if not self._wanted.is_set():
            return
        self._given.set()
        deadline = time.monotonic() + LONGEST_TURN_S
        while self._wanted.is_set() and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        self._given.clear()

    # -- the client side -----------------------------------------------------------------
    @contextmanager
    def borrowed(self) -> Iterator[bool]:
        """A core for the work within, once the decode has lent it (True); at once where
        the engine does not lend or nothing decodes (False)."""
        if not (self._lends.is_set() and self._decoding.is_set()):
            yield False
            return
        self._wanted.set()
        try:
            yield self._given.wait(WAIT_FOR_TURN_S)
        finally:
            self._wanted.clear()
