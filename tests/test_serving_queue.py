"""The window's chat and the API's clients share one engine, each in a sequence of its
own: each finds its own KV state again, and the queue shows who runs."""

from __future__ import annotations

from vllmchat.core.app.engine_queue import API, WINDOW, QueueChanged
from vllmchat.core.app.serving.api_turn import ApiChat, ApiDone
from vllmchat.core.app.serving.service import ApiService
from vllmchat.core.engine.events import DoneEvent
from vllmchat.core.settings import SamplingSettings


def _window_turn(app, text: str) -> DoneEvent:
    done = [e for e in app.send(text) if isinstance(e, DoneEvent)]
    assert done, "the window's turn did not finish"
    return done[-1]


def _api_turn(service: ApiService, text: str) -> ApiDone:
    request = ApiChat(
        ({"role": "system", "content": "You are terse. " * 60}, {"role": "user", "content": text}),
        SamplingSettings(temperature=0.0, max_tokens=4),
        client="script",
    )
    done = [e for e in service.chat(request, None) if isinstance(e, ApiDone)]
    assert done, "the API's turn did not finish"
    return done[-1]


def test_the_window_and_a_client_each_find_their_state_again(make_demo_app, tmp_path) -> None:
    app, _ = make_demo_app(n_ctx=4096, max_tokens=8)
    service = ApiService(app)
    seen: list[QueueChanged] = []
    app.engine_queue.changes.subscribe(seen.append)
    try:
        first = _window_turn(app, "Tell me about rivers in one sentence. " * 8)
        api = _api_turn(service, "Hello.")
        again = _window_turn(app, "And lakes?")
        api_again = _api_turn(service, "Hello again.")
        states = service.states()
    finally:
        service.close()
    # The window's second turn read its history from its own sequence (carried across
    # the reload that gave the model its API slots), and the client's from its own.
    assert again.stats.tokens_reused >= first.stats.prompt_tokens
    assert api_again.usage.cached > api.usage.prompt / 2
    assert app.engine.info is not None and app.engine.info.api_slots == 4
    sources = [c.running.source for c in seen if c.running is not None]
    turns = [s for i, s in enumerate(sources) if i == 0 or sources[i - 1] != s]
    assert turns[:4] == [WINDOW, API, WINDOW, API]
    assert states is not None
    kept = {s.key for s in states.states}
    assert "script" in kept and f"conversation-{app.conversation_id}" not in kept
