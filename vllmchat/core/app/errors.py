"""The conversations' failures and lock waits a front end tells the user about, named
where front ends may import them (they never import the store)."""

from __future__ import annotations

from vllmchat.core.conversations.store.faults import LockEvent, LockListener, StoreBusy, StoreFree
from vllmchat.core.conversations.store.schema import NewerStoreError
from vllmchat.core.conversations.store.store import StoreError

__all__ = [
    "LockEvent",
    "LockListener",
    "NewerStoreError",
    "StoreBusy",
    "StoreError",
    "StoreFree",
]
