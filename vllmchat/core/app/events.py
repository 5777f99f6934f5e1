"""The events the application layer yields: its own, the session's and the engine's."""

from __future__ import annotations

from dataclasses import dataclass

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import (
    MessageStored,
    PassagesUsed,
    PrefilledAhead,
    PromptPlanEvent,
    SummaryEvent,
    ThinkingEvent,
    ThoughtFor,
)
from vllmchat.core.engine.events import ErrorKind, Event
from vllmchat.core.engine.info import ModelInfo, ReloadResult
from vllmchat.core.models.advisor import Fit
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.placement import Placement
from vllmchat.core.tools.events import ToolEvent


@dataclass(frozen=True)
class LoadStarted:
    """A load or a live reload began; input waits until it ends."""

    live: bool


@dataclass(frozen=True)
class Loaded:
    """A model is ready; ``reload`` tells whether a live reload kept the KV state."""

    info: ModelInfo
    settings: AppSettings
    reload: ReloadResult | None = None
    restored_tokens: int = 0  # of the conversation's saved KV state, after a cold load
    hardware: HardwareInfo | None = None  # as the engine process sees it
    description: ModelDescription | None = None  # the GGUF's layers, for estimates


@dataclass(frozen=True)
class LoadFailed:
    """Loading failed; ``kind`` tells which fix applies."""

    kind: ErrorKind
    message: str
    fix: str


@dataclass(frozen=True)
class ConversationOpened:
    """The conversation the session now answers, and the KV tokens restored for it."""

    conversation_id: int
    restored_tokens: int


@dataclass(frozen=True)
class TurnStarted:
    """A reply, a regeneration, an edit or a summary began."""

    conversation_id: int


@dataclass(frozen=True)
class EngineDied:
    """The engine process ended unexpectedly; the conversation is kept."""

    reason: str


@dataclass(frozen=True)
class TitleMade:
    """A conversation's title; ``by_model`` False: its first words were kept."""

    conversation_id: int
    title: str
    by_model: bool


@dataclass(frozen=True)
class SettingsChanged:
    """The settings the application layer now runs with (it owns them): after a load
    with new settings, or new sampling and history settings."""

    settings: AppSettings


# -- settings and placement ---------------------------------------------------------------
@dataclass(frozen=True)
class PlacementNeedsConfirmation:
    """``placement`` is at or past the estimate's bound; it loads only when the intent
    is repeated with ``confirmed`` (``message``: the estimate's words)."""

    placement: Placement
    message: str


@dataclass(frozen=True)
class PlacementFellBack:
    """The engine ended or ran out of memory at ``failed``; it runs again at
    ``restored``, the last placement that ran (``message`` says so in words)."""

    failed: Placement
    restored: Placement
    reason: str
    message: str


@dataclass(frozen=True)
class SliderBounds:
    """Where the offload sliders turn red: the first count of GPU layers, and for a
    mixture of experts of expert layers on the GPU, at or past the estimate's bound
    with the other slider where the model runs (None: every position fits)."""

    layers: int | None = None
    experts: int | None = None


@dataclass(frozen=True)
class PlacementProposed:
    """The estimate of ``placement`` (a slider moved), made once by the application
    layer: ``fit`` on ``room``, the machine as a reload finds it (both None while no
    local model is loaded), and the sliders' ``bounds``."""

    placement: Placement
    fit: Fit | None
    room: HardwareInfo | None
    bounds: SliderBounds

    @property
    def past_bound(self) -> str:
        """Why the placement is at or past the estimate's bound ("" when it fits)."""
        return "" if self.fit is None or self.fit.fits else self.fit.message


@dataclass(frozen=True)
class StorageWarning:
    """Something could not be written to disk; ``message`` says what is safe."""

    message: str


# -- conversations changed by the user ------------------------------------------------------
@dataclass(frozen=True)
class ConversationCreated:
    """A new, empty conversation."""

    conversation_id: int


@dataclass(frozen=True)
class NewChatPending:
    """A new chat was started: it is stored (``ConversationCreated``) when its first
    message is sent; until then no conversation is open."""

    system_prompt: str


@dataclass(frozen=True)
class ConversationRenamed:
    """A conversation's title, as the user gave it."""

    conversation_id: int
    title: str


@dataclass(frozen=True)
class ConversationDeleted:
    """A conversation, its messages, summaries and saved KV state are gone."""

    conversation_id: int


@dataclass(frozen=True)
class ConversationImported:
    """A conversation read from a file, stored as a new one."""

    conversation_id: int
    title: str


@dataclass(frozen=True)
class MessagePinned:
    """A message pinned (word for word in every prompt) or unpinned."""

    conversation_id: int
    message_id: int
    pinned: bool


@dataclass(frozen=True)
class SummaryEdited:
    """A summary rewritten by hand (kept as written by later summaries)."""

    conversation_id: int
    summary_id: int
    text: str


@dataclass(frozen=True)
class EditRefused:
    """A change the user asked for was not made; ``action`` names it (``"rename"``,
    ``"delete"``, ``"pin"``, ``"summary"``, ``"import"``), ``message`` says why."""

    action: str
    message: str


ConversationEdit = (
    ConversationCreated
    | ConversationRenamed
    | ConversationDeleted
    | ConversationImported
    | MessagePinned
    | SummaryEdited
    | EditRefused
)


@dataclass(frozen=True)
class ToolPickChanged:
    """The tools a conversation offers from its next turn: all its servers' but ``off``
    (server names, or tools as the model names them, ``server_tool``)."""

    conversation_id: int
    off: tuple[str, ...]
    message: str  # what the user is told


# -- attachments ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AttachmentAdded:
    """A file is attached to the next user message: ``mode`` "whole" (in the message, its
    ``share`` of the context) or "retrieval" (each question gets passages of it)."""

    conversation_id: int
    attachment_id: int
    name: str
    kind: str  # "document" or "image"
    mode: str
    tokens: int
    share: float
    pages: int
    message: str  # what the user is told


@dataclass(frozen=True)
class AttachmentRejected:
    """A file was not attached (nothing changed): ``reason`` names why (``scanned_pdf``,
    ``password``, ``too_large``, ``not_text``, ``no_room``, …), ``message`` says it."""

    name: str
    reason: str
    message: str


@dataclass(frozen=True)
class AttachmentRemoved:
    """An attachment waiting for the next message was taken back."""

    attachment_id: int


AppEvent = (
    LoadStarted
    | Loaded
    | LoadFailed
    | ConversationOpened
    | TurnStarted
    | EngineDied
    | TitleMade
    | StorageWarning
    | SettingsChanged
    | PlacementNeedsConfirmation
    | PlacementFellBack
    | PlacementProposed
    | ConversationEdit
    | NewChatPending
    | AttachmentAdded
    | AttachmentRejected
    | AttachmentRemoved
    | MessageStored
    | PassagesUsed
    | PromptPlanEvent
    | SummaryEvent
    | PrefilledAhead
    | ToolPickChanged
    | ThinkingEvent
    | ThoughtFor
    | Event
    | ToolEvent
)
