"""Documents and images in a conversation's prompts.

A whole document is part of the message it was attached to: that message is kept
word for word like a pinned one (never summarized, never left out by keep-last), so
its tokens are prefilled once and stay in the KV cache and the saved KV state. A
document answered from passages gives each question the chunks that match it; the
reply records which. An image is given in place of one ``MEDIA_MARKER`` in its
message's text; a turn sends the images of the messages its prompt gives, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from vllmchat.core.attachments.chunking import CHARS_PER_TOKEN, TARGET_TOKENS, chunk_document
from vllmchat.core.attachments.errors import NoModel
from vllmchat.core.attachments.model import Attachment, ChunkHit, ExtractedDocument
from vllmchat.core.attachments.prompt import (
    MIN_PASSAGES,
    Fit,
    document_block,
    fit_document,
    passages_for,
    with_documents,
    with_passages,
)
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import Message
from vllmchat.core.conversations.turns.hybrid import HybridSearch
from vllmchat.core.engine.images import MEDIA_MARKER
from vllmchat.core.engine.media_text import neutralise
from vllmchat.core.engine.protocol import Engine


@dataclass(frozen=True)
class BranchDocuments:
    """The documents attached to a branch's messages, as its prompts use them."""

    by_message: dict[int, tuple[Attachment, ...]]
    images_by_message: dict[int, tuple[Attachment, ...]] = field(default_factory=dict)

    def whole(self, message: Message) -> tuple[Attachment, ...]:
        return tuple(a for a in self.by_message.get(message.id, ()) if a.mode == "whole")

    def view(self, path: Sequence[Message]) -> list[Message]:
        """``path`` as the prompt gives it: a message carrying whole documents holds
        them in its content and is kept word for word (pinned)."""
        out = []
        for m in path:
            docs = self.whole(m)
            out.append(
                replace(m, content=with_documents(m.content, docs), pinned=True) if docs else m
            )
        return out

    def keeps(self, message: Message) -> bool:
        """Whether ``message`` carries a whole document (so it is never summarized)."""
        return bool(self.whole(message))

    def with_images(self, message: Message) -> str:
        """``message``'s text (as ``view`` gives it) with one marker per image before it;
        a marker in the text itself (typed, or in a document) is made plain text."""
        images = self.images_by_message.get(message.id, ())
        return "".join(f"{MEDIA_MARKER}\n" for _ in images) + neutralise(message.content)

    def images(self, messages: Sequence[Message]) -> list[bytes]:
        """The bytes of the images of ``messages``, in the order their markers appear."""
        return [
            a.data
            for m in messages
            for a in self.images_by_message.get(m.id, ())
            if a.data is not None
        ]

    def image_tokens(self, messages: Sequence[Message]) -> int:
        """Context tokens the images of ``messages`` take (beyond their markers' text)."""
        return sum(a.tokens for m in messages for a in self.images_by_message.get(m.id, ()))

    @property
    def retrieval_ids(self) -> list[int]:
        return [a.id for atts in self.by_message.values() for a in atts if a.mode == "retrieval"]

    @property
    def whole_tokens(self) -> int:
        return sum(a.tokens for atts in self.by_message.values() for a in atts if a.mode == "whole")


def given_in_place(path: Sequence[Message], first_message_id: int | None) -> list[Message]:
    """The messages a prompt gives in place, from ``first_message_id`` (its plan's oldest
    verbatim one): they carry their images; those before it do not."""
    ids = [m.id for m in path]
    if first_message_id is None or first_message_id not in ids:
        return []
    return list(path[ids.index(first_message_id) :])


class Documents:
    """A conversation's documents for one chat session: attach, view, retrieve."""

    def __init__(
        self,
        attachments: AttachmentList,
        client: Engine,
        conversation_id: int,
        *,
        embedding_model: Callable[[], str] = lambda: "",
        should_stop: Callable[[], bool] = lambda: False,
    ) -> None:
        """``embedding_model()``: an embedding GGUF that ranks passages with FTS5 ("":
        FTS5 alone); ``should_stop()``: the turn was stopped."""
        self.attachments = attachments
        self.client = client
        self.conversation_id = conversation_id
        self._cached: tuple[tuple[int, ...], BranchDocuments] | None = None
        self._embedding_model = embedding_model
        self._should_stop = should_stop

    def of(self, path: Sequence[Message]) -> BranchDocuments:
        """The documents of ``path``'s user messages (read once per branch)."""
        key = tuple(m.id for m in path if m.role == "user")
        if self._cached is None or self._cached[0] != key:
            found = self.attachments.of_messages(key) if key else {}
            docs = {
                mid: tuple(a for a in atts if a.kind == "document") for mid, atts in found.items()
            }
            images = {
                mid: tuple(a for a in atts if a.kind == "image" and a.data)
                for mid, atts in found.items()
            }
            self._cached = (key, BranchDocuments(docs, {k: v for k, v in images.items() if v}))
        return self._cached[1]

    def forget(self) -> None:
        self._cached = None

    def reserve(self, path: Sequence[Message]) -> int:
        """Tokens kept free for passages when the branch has a document answered so."""
        return MIN_PASSAGES * TARGET_TOKENS if self.of(path).retrieval_ids else 0

    def attach(
        self, doc: ExtractedDocument, *, prompt_tokens: int, budget: int
    ) -> tuple[Attachment, Fit]:
        """Measure ``doc`` with the model, decide whole or passages, keep it for the
        next message; raises ``NoRoom`` or ``NoModel`` (nothing is kept then)."""
        info = self.client.info
        if info is None:
            raise NoModel(
                f"Load a model before attaching {doc.name}: its size in tokens "
                "decides how it reaches the model."
            )
        probe = Attachment(
            0,
            self.conversation_id,
            None,
            "document",
            doc.name,
            doc.sha256,
            doc.mime,
            doc.size,
            doc.text,
            doc.sections,
            doc.pages,
        )
        tokens = len(self.client.tokenize(document_block(probe)))
        waiting = sum(
            a.tokens for a in self.attachments.pending(self.conversation_id) if a.mode == "whole"
        )
        fit = fit_document(
            doc.name,
            tokens,
            prompt_tokens=prompt_tokens + waiting,
            budget=budget,
            n_ctx=info.n_ctx,
            chunk_tokens=TARGET_TOKENS,
            n_ctx_train=info.n_ctx_train,
            notice=doc.notice,
        )
        ratio = len(doc.text) / tokens if tokens else CHARS_PER_TOKEN
        chunks = chunk_document(doc, chars_per_token=ratio)
        att = self.attachments.add_document(
            self.conversation_id, doc, tokens=tokens, mode=fit.mode, chunks=chunks
        )
        return att, fit

    def passages(
        self, path: Sequence[Message], prompt: list[dict[str, str]], room: int
    ) -> tuple[list[dict[str, str]], list[ChunkHit]]:
        """``prompt`` with the passages for its last question put before it (as many
        as ``room`` tokens hold), and those passages."""
        ids = self.of(path).retrieval_ids
        if not ids or not path or path[-1].role != "user" or not prompt:
            return prompt, []
        hits = self.search(ids, path[-1].content, room)
        last, before = prompt[-1]["content"], len(self.client.render(prompt))
        while hits:
            shown = [replace(h, text=neutralise(h.text)) for h in hits]
            given = [*prompt[:-1], {"role": "user", "content": with_passages(last, shown)}]
            if len(self.client.render(given)) - before <= room:
                return given, hits
            hits = hits[:-1]
        return prompt, []

    def search(self, ids: Sequence[int], question: str, room: int) -> list[ChunkHit]:
        """The passages of documents ``ids`` for ``question`` that ``room`` tokens hold
        (FTS5's, or FTS5's and the embeddings' fused when an embedding model is set)."""
        k = passages_for(room, TARGET_TOKENS)
        embedding_model = self._embedding_model()
        if embedding_model:
            hybrid = HybridSearch(self.attachments, self.client, embedding_model, self._should_stop)
            return hybrid.search(ids, question, k)
        return self.attachments.search(ids, question, k)
