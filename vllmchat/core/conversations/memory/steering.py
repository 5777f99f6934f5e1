"""Sentences that steer the conversation: requests, however they are phrased.

A user sets the conversation's topic, says what to talk about next or what kind of
answer they want in sentences shaped like statements ("My question is about taxes",
"Next I want to discuss the budget", "I prefer short answers"). Such a sentence is
a request, not a fact about the user. It is told by closed word classes again:

- its subject is a word for the conversation itself ("the topic", "my next
  question", "this conversation", "the answer");
- a first person and its auxiliaries are followed by a verb of talking ("I want to
  talk about", "we need to discuss", "I'll give you", "I was hoping we could go
  over"), or a wish aimed at the listener by a verb of making ("I want to write",
  "I'd like to create", "I'll explain"), which asks the listener to take part;
- a preference or a wish names a kind of answer ("I prefer short answers", "I'd
  rather have a list", "I'm looking for a summary"), or an interest sets the topic
  ("I'm interested in the history of Rome");
- "should" or "shall" makes it a specification ("The table should be broken down
  by month", "It should rhyme").
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words for the conversation and what it produces.
_CONVERSATION = _words(
    "answer answers reply replies response responses question questions topic topics "
    "conversation chat discussion explanation explanations request prompt task focus "
    "output summary"
)
_KINDS_OF_ANSWER = _CONVERSATION | _words(
    "list lists table tables bullet bullets example examples version versions paragraph "
    "paragraphs sentence sentences words tone format formats detail details overview "
    "outline breakdown step steps summaries code"
)
# Verbs of talking: after a first person and its auxiliaries they steer the talk ("we
# need to discuss", "we were talking about"); a verb listed with words after it counts
# only before one of them ("talk about", not "talk to my boss").
_TALKING = _words("discuss discussing brainstorm")
_TALKING_PARTICLE = {
    "talk": ("about", "of", "more", "through", "it"),
    "talking": ("about", "of"),
    "chat": ("about",),
    "ask": ("you", "about", "a", "some", "another", "questions", "question"),
    "tell": ("you",),
    "give": ("you",),
    "send": ("you",),
    "show": ("you",),
    "hear": ("about", "more", "your", "what", "how"),
    "go": ("over", "back", "through", "on", "ahead"),
    "move": ("on",),
    "start": ("with", "by", "again", "over"),
    "begin": ("with", "by"),
    "change": ("the", "topic", "subject"),
    "learn": ("about", "more"),
    "get": ("back",),
}
# Verbs of making and telling: after a wish or a plan aimed at the listener ("I want
# to", "I'll", "I'm going to") they ask the listener to take part.
_MAKING = _words(
    "know write create generate design develop implement code program convert translate "
    "embed delete remove modify fix update extract calculate compute plot print compare "
    "check rewrite edit improve optimize summarize draft explain describe clarify mention "
    "understand share paste provide focus cover switch review continue"
)
_ASKING = _words("want wanna would 'd wish will 'll shall going gonna let rather")
_TASTES = _words("like love prefer")  # a wish only after "would" ("I'd like to ...")
_DUTIES = _words("need needs have has must got should could can may might hope hoping")
# Between the subject and the verb: auxiliaries, adverbs, "to", "we could", "you to".
_BETWEEN = (
    _ASKING
    | _TASTES
    | _DUTIES
    | _words(
        "to 'm am are 're was were be do try just really also now then next first still "
        "actually maybe perhaps somehow quickly briefly further you we us me and please "
        "again today"
    )
)
_FIRST_PERSON_SUBJECTS = _words("i we let's lets let")
_PREFERRING = _words(
    "prefer prefers preferred like love want wanted need expect rather looking asking hoping"
)
_SPECIFYING = _words("should shall")
_DETERMINERS = _words("the this that these those my our your a an next first last any")
_OPENERS = re.compile(
    r"^(?:(?:next|now|first|firstly|then|today|finally|lastly|this time|for now|from now on|"
    r"for the next one|so|ok|okay|and|also)\b[\s,:]*)+",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"[\w'’]+")


def _tokens(clause: str) -> list[str]:
    return [t.lower().replace("’", "'") for t in _TOKEN.findall(_OPENERS.sub("", clause))]


def _split_contraction(tokens: list[str]) -> list[str]:
    """``i'll`` -> ``i 'll`` so that auxiliaries are read alike, spelt out or not."""
    out: list[str] = []
    for token in tokens:
        head, sep, tail = token.partition("'")
        if sep and head and tail in ("ll", "m", "re", "d", "ve"):
            out += [head, "'" + tail]
        else:
            out.append(token)
    return out


def _talking_at(words: list[str], i: int) -> bool:
    word = words[i]
    if word in _TALKING:
        return True
    after = words[i + 1] if i + 1 < len(words) else ""
    return after in _TALKING_PARTICLE.get(word, ())


def _wish_then_verb(words: list[str]) -> bool:
    """A first person followed, within a few auxiliaries, by a verb of talking, or by
    a wish aimed at the listener and a verb of making (or "you")."""
    asked = False
    for i, word in enumerate(words[1:8], 1):
        if _talking_at(words, i):
            return True  # "I want to talk about", "we were talking about"
        if asked and (word in _MAKING or word == "you"):
            return True  # "I'll write", "I'd rather you"
        if word in _ASKING:
            asked = True
        elif word in _TASTES:
            if words[i - 1] not in ("would", "'d"):
                return False  # "I like to write": a taste
            asked = True
        elif word not in _BETWEEN:
            return False
    return False


def _prefers_a_kind_of_answer(words: list[str]) -> bool:
    """A preference or wish whose object, a few words on, is a kind of answer; or an
    interest, which sets the topic ("I'm interested in the history of Rome")."""
    for i, word in enumerate(words[:6]):
        if word == "interested" and words[i + 1 : i + 2] == ["in"]:
            return True
        if word in _PREFERRING:
            return any(w in _KINDS_OF_ANSWER for w in words[i + 1 : i + 6])
    return False


def _subject_is_the_conversation(words: list[str]) -> bool:
    """Its subject, a noun phrase before the first verb, names the conversation."""
    if words[0] not in _DETERMINERS:
        return False
    for word in words[1:5]:
        if word in _CONVERSATION:
            return True
        if word in ("is", "are", "was", "were", "'s", "should", "will", "'ll", "has", "have"):
            return False
    return False


def steers(clause: str) -> bool:
    """Whether a clause shaped like a statement asks for something in the talk: its
    topic, what comes next, the kind of answer wanted."""
    words = _split_contraction(_tokens(clause))
    if len(words) < 2:
        return False
    if _subject_is_the_conversation(words) or any(w in _SPECIFYING for w in words[1:4]):
        return True
    if words[0] not in _FIRST_PERSON_SUBJECTS:
        return False
    if words[0] in ("let's", "lets", "let"):
        return True
    return _wish_then_verb(words) or _prefers_a_kind_of_answer(words)
