"""Work done while the user reads a reply: the conversation's title, and the summary
the next turn will need, written and prefilled ahead so that turn starts at once.

Both give way to a turn: ``waiting`` is checked per token, and a stopped summary is
never stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from vllmchat.core.conversations.events import PrefilledAhead, SummaryEvent
from vllmchat.core.conversations.store.store import Message
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, Event, StatsEvent
from vllmchat.core.settings import SamplingSettings

MIN_NEXT_MESSAGE_TOKENS = 32


def has_one_reply(session: ChatSession) -> bool:
    """Whether the branch holds exactly one complete reply (time for a title)."""
    path = session.store.path(session.conversation_id)
    replies = [m for m in path if m.role == "assistant"]
    return len(replies) == 1 and not path[-1].partial


def _next_message_tokens(session: ChatSession, path: list[Message]) -> int:
    """A guess at the next user message's size: the last one's, at least a sentence."""
    last = next((m for m in reversed(path) if m.role == "user"), None)
    n = len(session.client.tokenize(last.content)) if last else 0
    return max(MIN_NEXT_MESSAGE_TOKENS, n + 8)


def summary_due(session: ChatSession, path: list[Message]) -> bool:
    """Whether the turn after this reply would summarize (threshold, budget or period)."""
    policy = session.config.policy
    if policy.mode != "summarize" or not path or path[-1].role != "assistant":
        return False
    if path[-1].partial or not session.summaries.to_summarize(path, ahead=True):
        return False
    _, plan = session.plan(path)
    predicted = plan.prompt_tokens + _next_message_tokens(session, path)
    periodic = bool(policy.every_k_turns) and (
        session.summaries.turns_since_summary + 1 >= policy.every_k_turns
    )
    over = predicted > min(policy.threshold * plan.n_ctx, session.prompt_budget())
    return over or periodic


def summarize_ahead(
    session: ChatSession, waiting: Callable[[], bool]
) -> Iterator[SummaryEvent | PrefilledAhead | Event]:
    """If the next turn would summarize: write that summary now, then prefill the
    prompt it makes (system, summary, kept turns). ``waiting`` stops either within a
    token; the turn then does what is left itself."""
    path = session.store.path(session.conversation_id)
    if waiting() or not summary_due(session, path):
        return
    done = False
    for event in session.summarize_ahead(path, waiting):
        done = done or (isinstance(event, SummaryEvent) and event.status == "done")
        yield event
    if done and session.client.capabilities.prompt_cache and not waiting():
        yield _prefill(session, path, waiting)


def _prefill(
    session: ChatSession, path: list[Message], waiting: Callable[[], bool]
) -> PrefilledAhead:
    """Evaluate the prompt without a reply (no token is sampled)."""
    client = session.client
    prompt, plan = session.plan(path)
    prefilled, complete = 0, False
    for event in client.chat(prompt, SamplingSettings(max_tokens=0, temperature=0.0)):
        if waiting():
            client.stop()
        if isinstance(event, StatsEvent):
            prefilled = event.stats.tokens_prefilled
        elif isinstance(event, DoneEvent):
            complete = event.stop_reason != "stopped"
        elif isinstance(event, ErrorEvent):
            complete = False
    return PrefilledAhead(plan.prompt_tokens, prefilled, complete)
