"""Which tools a conversation offers, and the turn that offers them.

A conversation offers its servers' tools less those the user turned off for it
(a server, or one tool); a new conversation starts with the user's last pick. A
change is an intent (``ToolPicks.switch``) announced as ``ToolPickChanged``, or
refused (``EditRefused``) with the reason; it holds from the conversation's next
turn. ``ToolOffer`` is what ``ChatApp.use_tools`` sets up: the tools service and
each conversation's pick, for its turns and for the context bar (the tokens the
offered schemas take).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from vllmchat.core.app.events import EditRefused, ToolPickChanged
from vllmchat.core.app.tools.service import ToolsService
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.store.tool_prompts import ToolPickStore
from vllmchat.core.conversations.turns.session import ChatSession, ToolStream
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.tools.events import ToolInfo
from vllmchat.core.tools.prompting import fallback_system_prompt, openai_tools


@dataclass(frozen=True)
class ToolPick:
    """The names turned off in a conversation: servers, or tools (``server_tool``)."""

    off: frozenset[str] = frozenset()

    def offers(self, tool: ToolInfo) -> bool:
        return tool.server not in self.off and tool.model_name not in self.off


class ToolPicks:
    """Each conversation's pick of tools: read, and changed by the user's intents."""

    def __init__(self, store: ConversationStore) -> None:
        self._picks = ToolPickStore(store)
        self.service: ToolsService | None = None  # the servers whose tools are picked
        self._new_chat: frozenset[str] | None = None  # picked before the new chat is stored

    def pick(self, conversation_id: int | None) -> ToolPick:
        """The conversation's pick; one never picked takes the pick made for the new chat,
        else the user's last pick (kept). None: the new chat, not stored yet."""
        if conversation_id is None:
            chosen = self._new_chat
            return ToolPick(chosen if chosen is not None else frozenset(self._picks.last()))
        off = self._picks.off(conversation_id)
        if off is None:
            chosen, self._new_chat = self._new_chat, None
            off = tuple(chosen) if chosen is not None else self._picks.last()
            self._picks.set(conversation_id, off, last=chosen is not None)
        return ToolPick(frozenset(off))

    def switch(
        self, conversation_id: int | None, names: Sequence[str], on: bool
    ) -> ToolPickChanged | EditRefused:
        """Turn servers or tools (by ``server_tool``, or a tool's own name when only one
        server has it) on or off in a conversation, from its next turn (None: the new
        chat, from its first turn; its ``ToolPickChanged`` names conversation 0)."""
        service = self.service
        if service is None or not service.config.servers:
            return EditRefused("tools", "No MCP servers are configured.")
        if not names:
            return EditRefused("tools", "Name a server or a tool (/tools lists them).")
        tools = service.tools()
        servers = {s.name for s in service.config.servers}
        try:
            off = set(self.pick(conversation_id).off)
        except StoreError as exc:
            return EditRefused("tools", str(exc))
        for name in names:
            found = _resolve(name, servers, tools)
            if found is None:
                known = ", ".join(sorted(servers | {t.model_name for t in tools}))
                return EditRefused(
                    "tools", f"There is no server or tool named {name!r} (known: {known})."
                )
            server, tool = found
            if tool is None:
                off -= {server, *(t.model_name for t in tools if t.server == server)}
                if not on:
                    off.add(server)
            elif not on:
                off.add(tool)
            else:
                if server in off:  # the server's other tools stay off
                    off -= {server}
                    off |= {t.model_name for t in tools if t.server == server}
                off.discard(tool)
        try:
            if conversation_id is None:
                self._new_chat = frozenset(off)
            else:
                self._picks.set(conversation_id, off)
        except StoreError as exc:
            return EditRefused("tools", str(exc))
        word = "on" if on else "off"
        offered = [t.model_name for t in tools if ToolPick(frozenset(off)).offers(t)]
        told = f"{', '.join(names)} {word} in this conversation from its next turn; offered: "
        return ToolPickChanged(
            conversation_id or 0, tuple(sorted(off)), told + (", ".join(offered) or "no tools")
        )


def _resolve(
    name: str, servers: set[str], tools: Sequence[ToolInfo]
) -> tuple[str, str | None] | None:
    """(server, None) for a server, (server, model name) for a tool, None when unknown."""
    if name in servers:
        return name, None
    for tool in tools:
        if name == tool.model_name or name == f"{tool.server}.{tool.name}":
            return tool.server, tool.model_name
    plain = [t for t in tools if t.name == name]
    return (plain[0].server, plain[0].model_name) if len(plain) == 1 else None


class ToolOffer:
    """The tools offered in each conversation's turns, as its pick allows."""

    def __init__(self, service: ToolsService, picks: ToolPicks) -> None:
        self.service, self.picks = service, picks
        self._counted: dict[str, int] = {}

    def tools(self, conversation_id: int) -> list[ToolInfo]:
        """The ready servers' tools this conversation offers."""
        pick = self.picks.pick(conversation_id)
        return [t for t in self.service.tools() if pick.offers(t)]

    def stream(self, engine: Engine, session: ChatSession) -> ToolStream:
        """A turn of ``session`` with the tools it offers at that turn."""
        stop = lambda: session.stop_requested  # noqa: E731
        conversation = session.conversation_id
        return self.service.turn_stream(
            engine, str(conversation), stop, offered=lambda: self.tools(conversation)
        )

    def serve(self, engine: Engine, session: ChatSession) -> None:
        """Offer the tools in ``session``'s turns, and count them in its prompt plans."""
        session.tool_stream = self.stream(engine, session)
        conversation = session.conversation_id
        session.tool_tokens = lambda: self.tokens(engine, conversation)

    def tokens(self, engine: Engine, conversation_id: int) -> int:
        """Tokens the offered tools' schemas take in the prompt (as the template gets them)."""
        tools = self.tools(conversation_id)
        if not tools or self.service.tool_choice == "none" or engine.info is None:
            return 0
        if engine.info.tool_format:
            text = json.dumps(openai_tools(tools), ensure_ascii=False)
        else:
            text = fallback_system_prompt(tools)
        if text not in self._counted:
            self._counted = {text: len(engine.tokenize(text))}  # the last one: a pick changes
        return self._counted[text]
