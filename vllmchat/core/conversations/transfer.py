"""Export conversations to Markdown and JSON; import JSON with clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vllmchat.core.conversations.attachment_transfer import (
    attachments_to_json,
    check_attachments,
    import_attachments,
)
from vllmchat.core.conversations.memory.fact_list import FactList, checked_text
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import Conversation, ConversationStore, StoreError
from vllmchat.core.conversations.store.tool_prompts import ToolPickStore
from vllmchat.core.conversations.store.tool_steps import ToolStepList
from vllmchat.core.conversations.tool_step_transfer import (
    check_prompts,
    check_steps,
    import_prompts,
    import_steps,
    prompts_to_json,
    steps_markdown,
    steps_to_json,
)

FORMAT = "vllmchat-conversation"
MAX_IMPORT_BYTES = 256 << 20


def to_markdown(store: ConversationStore, conversation_id: int) -> str:
    """The current branch as Markdown, summaries shown where they apply."""
    conv = store.conversation(conversation_id)
    lines = [f"# {conv.title or 'Conversation'}", ""]
    if conv.system_prompt:
        lines += ["> **System:** " + conv.system_prompt.replace("\n", "\n> "), ""]
    facts = FactList(store).facts(conversation_id)
    if facts:
        lines += ["> **Facts kept:**", *(f"> - {f.text}" for f in facts), ""]
    summaries = {s.last_message_id: s for s in store.summaries(conversation_id)}
    path = store.path(conversation_id)
    attached = AttachmentList(store).of_messages([m.id for m in path])
    steps = ToolStepList(store).of_messages([m.id for m in path])
    for m in path:
        who = {"user": "You", "assistant": "Assistant", "system": "System"}[m.role]
        mark = " *(stopped)*" if m.partial else ""
        lines += [f"**{who}:**{mark}", ""]
        lines += [*steps_markdown(steps.get(m.id, [])), m.content, ""]
        for a in attached.get(m.id, []):
            pages = f", {a.pages} pages" if a.pages else ""
            lines += [f"> 📎 *{a.name}* ({a.kind}{pages}, sha256 {a.sha256[:12]})", ""]
        if m.id in summaries:
            lines += [
                "> **Summary of the conversation so far:** "
                + summaries[m.id].content.replace("\n", "\n> "),
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def to_json(store: ConversationStore, conversation_id: int) -> dict[str, Any]:
    """Everything of a conversation, all branches included."""
    conv = store.conversation(conversation_id)
    return {
        "format": FORMAT,
        "version": 1,
        "title": conv.title,
        "system_prompt": conv.system_prompt,
        "created": conv.created,
        "leaf_id": conv.leaf_id,
        "messages": [
            {
                "id": m.id,
                "parent_id": m.parent_id,
                "role": m.role,
                "content": m.content,
                "created": m.created,
                "tokens": m.tokens,
                "model": m.model,
                "partial": m.partial,
                "stats": m.stats,
                "settings": m.settings,
            }
            for m in store.all_messages(conversation_id)
        ],
        "summaries": [
            {
                "content": s.content,
                "first_message_id": s.first_message_id,
                "last_message_id": s.last_message_id,
                "edited": s.edited,
            }
            for s in store.summaries(conversation_id)
        ],
        "facts": [
            {"text": f.text, "message_id": f.message_id, "edited": f.edited}
            for f in FactList(store).stored(conversation_id)
        ],
        "attachments": attachments_to_json(store, conversation_id),
        "tool_steps": steps_to_json(store, [m.id for m in store.all_messages(conversation_id)]),
        "tool_prompts": prompts_to_json(store, [m.id for m in store.all_messages(conversation_id)]),
        "tool_pick": _list(ToolPickStore(store).off(conversation_id)),
    }


def _list(names: tuple[str, ...] | None) -> list[str] | None:
    return None if names is None else list(names)


def export_file(store: ConversationStore, conversation_id: int, path: str | Path) -> Path:
    """Write ``.md`` or ``.json`` by the file's extension."""
    p = Path(path)
    if p.suffix.lower() == ".md":
        p.write_text(to_markdown(store, conversation_id), encoding="utf-8")
    else:
        p.write_text(
            json.dumps(to_json(store, conversation_id), ensure_ascii=False, indent=1),
            encoding="utf-8",
        )
    return p


def import_file(store: ConversationStore, path: str | Path) -> Conversation:
    """Import a JSON export as a new conversation; raises ``StoreError`` saying what is wrong."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise StoreError(f"Cannot read {p.name}: {exc.strerror}.") from exc
    if len(raw) > MAX_IMPORT_BYTES:
        raise StoreError(f"{p.name} is too large to be a conversation ({len(raw):,} bytes).")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoreError(f"{p.name} is not UTF-8 text (bad byte at offset {exc.start}).") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StoreError(f"{p.name} is not valid JSON (line {exc.lineno}: {exc.msg}).") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StoreError(f"{p.name} is not a vllmchat conversation export.")
    messages = data.get("messages")
    if not isinstance(messages, list) or not all(
        isinstance(m, dict)
        and m.get("role") in ("user", "assistant", "system")
        and isinstance(m.get("content"), str)
        for m in messages
    ):
        raise StoreError(f"{p.name} has malformed messages.")
    facts = _facts_of(data, {m.get("id") for m in messages}, p.name)
    attachments = check_attachments(data, {m.get("id") for m in messages}, p.name)
    steps = check_steps(data, {m.get("id") for m in messages}, p.name)
    prompts = check_prompts(data, {m.get("id") for m in messages}, p.name)
    conv = store.create(
        title=str(data.get("title", "")), system_prompt=str(data.get("system_prompt", ""))
    )
    ids: dict[Any, int] = {}
    for m in messages:
        parent = ids.get(m.get("parent_id")) if m.get("parent_id") is not None else None
        new = store.add_message(
            conv.id,
            m["role"],
            m["content"],
            parent_id=parent,
            tokens=int(m.get("tokens") or 0),
            model=str(m.get("model", "")),
            stats=m.get("stats") or {},
            settings=m.get("settings") or {},
            partial=bool(m.get("partial")),
            make_leaf=False,
        )
        ids[m.get("id")] = new.id
    import_attachments(store, conv.id, attachments, ids)
    import_steps(store, steps, ids)
    import_prompts(store, conv.id, prompts, ids, data.get("tool_pick"))
    leaf = ids.get(data.get("leaf_id")) or (max(ids.values()) if ids else None)
    store.set_leaf(conv.id, leaf)
    for s in data.get("summaries") or []:
        if s.get("first_message_id") in ids and s.get("last_message_id") in ids:
            store.add_summary(
                conv.id, str(s["content"]), ids[s["first_message_id"]], ids[s["last_message_id"]]
            )
    if facts is not None:  # an older export has none: they are read from the messages
        taken = [ids[m.get("id")] for m in messages if m["role"] == "user" and m.get("id") in ids]
        items = [(f["text"], ids.get(f.get("message_id")), bool(f.get("edited"))) for f in facts]
        FactList(store).restore(conv.id, items, taken)
    if data.get("title"):
        store.rename(conv.id, str(data["title"]))
    return store.conversation(conv.id)


def _facts_of(data: dict[str, Any], ids: set[Any], name: str) -> list[dict[str, Any]] | None:
    """An export's facts, checked before anything is imported (None: it has none)."""
    facts = data.get("facts")
    if facts is None:
        return None
    if not isinstance(facts, list) or not all(
        isinstance(f, dict)
        and isinstance(f.get("text"), str)
        and (f.get("message_id") is None or f.get("message_id") in ids)
        for f in facts
    ):
        raise StoreError(f"{name} has malformed facts.")
    for number, f in enumerate(facts, 1):
        try:
            checked_text(f["text"])
        except StoreError as exc:
            raise StoreError(f"{name}: fact {number}: {exc}") from exc
    return facts
