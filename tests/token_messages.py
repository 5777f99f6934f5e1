"""Reading the token messages a slot loop sent: ``("tok", rid, text, id)``,
``("toks", rid, [(text, id), ...])`` and ``("tokset", 0, [(rid, text, id), ...])``."""

from __future__ import annotations


def sent_tokens(sent: list) -> list[tuple[int, int, int]]:
    """(message index, rid, token id) of every token sent, in order."""
    out = []
    for i, m in enumerate(sent):
        if not isinstance(m, tuple):
            continue
        if m[0] == "tok":
            out.append((i, m[1], m[3]))
        elif m[0] == "toks":
            out += [(i, m[1], token) for _, token in m[2]]
        elif m[0] == "tokset":
            out += [(i, rid, token) for rid, _, token in m[2]]
    return out
