"""Facts the user stated, taken word for word from their messages.

A small model seldom writes a usable fact list, so the user's own statements about
themselves, their people, plans and constraints are kept as they were written. The
rule reads a sentence's *shape* through closed word classes (pronouns, determiners,
copulas, discourse markers, in a few languages), never through the topic's words:

- a statement starts with a subject: a first-person pronoun or possessive ("I'm
  vegetarian", "Wir haben zwei Kinder", "J'habite à Lyon"), or a determiner or a
  name before a copula ("The deadline is 30 September", "Bruno is our cat") that
  carries a first-person possessive, a number or a name;
- an imperative starts with its verb ("Now write about Oslo", "Use React ..."), a
  question ends with "?" or starts with an auxiliary: neither is kept, but a
  statement in another clause of one is ("Since we have a dog, which ...", "It was
  good but I don't eat fries");
- first-person reactions and requests are not facts ("I see", "I like this
  version", "I need you to ...", "I'd like a recipe"), nor is a sentence that
  steers the conversation, however it is phrased (``steering``: "My question is
  about taxes", "Next I want to discuss the budget", "I prefer short answers").

``tests/chat_sentences.py`` measures it on labelled sentences from real chats.

A later statement on the same subject ("My budget is now 5,200 euros" after "My
budget is 4,500 euros") supersedes the earlier one.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Iterable, Sequence

from vllmchat.core.conversations.memory.steering import steers

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_CLAUSES = re.compile(
    r"\s*[,;:–—]\s+|\s+-\s+|\s+(?:but|so|because|though|although)\s+", re.IGNORECASE
)
MAX_CLAUSES = 4
_WORD = re.compile(r"[\w][\w'’,.:-]*\w|\w")
_NUMBER = re.compile(r"\d")
MAX_WORDS, MIN_WORDS = 30, 2
MAX_MESSAGE_CHARS = 1200  # a longer message is material (a document, code), not a statement


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Subjects and possessives of the first person (en de fr es it pt nl no/da/sv ru pl).
_FIRST_PERSON = _words(
    "i i'm i've i'd i'll my me we we're we've we'd we'll our ours mine "
    "ich mein meine meinen meinem meiner meines wir unser unsere unseren unserem unserer "
    "je moi mon ma mes nous notre nos yo mi mis nosotros nosotras nuestro nuestra nuestros "
    "nuestras io mio mia miei mie noi nostro nostra nostri nostre eu meu minha meus minhas "
    "nós nosso nossa nossos nossas ik mijn wij ons onze jeg jag min mitt mine mina mit vi "
    "vår vårt våre våra vores vor я мой моя моё мои мы наш наша наше наши ja mój moja moje"
)
_POSSESSIVES = _FIRST_PERSON - _words(
    "i i'm i've i'd i'll me we we're we've we'd we'll "
    "ich wir je moi nous yo io eu ik wij jeg jag vi я мы ja"
)
_SECOND_PERSON = _words(
    "you you're you've your yours u du dein deine tu vous votre toi tú usted ty ты вы dere ni"
)
_DETERMINERS = _words(
    "the a an this that that's these those it it's its every each all both some no "
    "der die das den dem ein eine le la les un une ce cette ces el los las una il lo gli "
    "o os as uma de het det en ei et"
)
_COPULAS = _words(
    "is are was were 's has have had will ist sind war hat heißt est sont était es son "
    "está están era è sono er var har heter är blir"
)
# Openings that ask rather than state (a question without its "?").
_ASKING = _words(
    "what what's how how's why when where where's who who's which whose can could would "
    "will shall should do does did is are was were have has may might here there "
    "was wie warum wann wo wer welche kannst können que qu'est-ce comment pourquoi quand "
    "où qui quel quelle qué cómo cuándo dónde quién cuál puedes che come perché dove chi "
    "hva hvordan hvorfor når hvor hvem"
)
# Discourse markers that may precede a statement ("By the way, my flight ...").
_MARKERS = re.compile(
    r"^(?:(?:just so you know|for the record|for context|fyi|by the way|btw|oh|ok|okay|"
    r"yeah|yes|yep|haha|ha|hehe|lol|ah|wow|hmm|exactly|maybe|honestly|personally|"
    r"so|also|and|but|well|actually|anyway|now|then|plus|hi|hello|hey|please|"
    r"(?:please )?(?:remember|note|keep in mind|don'?t forget)(?: that)?|übrigens|außerdem|"
    r"au fait|d'ailleurs|alors|por cierto|además|pues|comunque|forresten|förresten)\b[\s,:!.-]*)+",
    re.IGNORECASE,
)
_SUBORDINATE = re.compile(
    r"^(?:since|as|because|given that|now that|da|weil|puisque|comme|parce que|ya que|"
    r"porque|como|siccome|poiché|fordi|siden|eftersom)\s+",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"^(?:i|we) (?:think|believe|guess|suppose|reckon|assume|feel like)(?: that)? (?=\S+ \S)",
    re.IGNORECASE,
)
_AUX = r"(?:\s+(?:do|don't|don’t|did|didn't|not|really|just|also|still|totally|am|are|was))*"
# First-person sentences that react to the reply or ask for something.
_REACTION = re.compile(
    r"^(?:(?:i|we)(?:'m|’m|'re|’re)?" + _AUX + r"\s+(?:see|agree|disagree|understand|think|"
    r"thought|guess|mean|meant|suppose|believe|wonder|wondering|doubt|hope|bet|appreciate|"
    r"apologi[sz]e|follow$|follow you|get it|got it|sure|confused|lost$|curious|sorry|glad|"
    r"know$)\b|"
    r"me (?:too|neither|either)\b|"
    r"(?:i|we)" + _AUX + r"\s+(?:like|love|liked|loved|hate|prefer|enjoy|enjoyed|dislike)\s+"
    r"(?:it|this|that|these|those|your|yours|them|the (?:answer|idea|first|second|last))\b)",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"^(?:(?:i|we)(?:'d|’d| would)(?: really)? (?:like|love|prefer)|"
    r"(?:i|we)(?: really| just| also)? (?:want|need|wish|wanted|needed)|"
    r"(?:i|we)(?:'m|’m| am| are| 're) (?:wondering|curious)|"
    r"(?:i|we) (?:have|got) (?:a|another|one more|some) (?:question|request|favou?r)|"
    r"i was wondering|ich möchte|ich hätte gern|je voudrais|j'aimerais|quiero|quisiera|"
    r"me gustaría|vorrei|gostaria|jeg vil ha|jag vill ha|я хочу)"
    r"(?:\s+(?:you|u|a|an|some|help|more|another|to know|to see|to ask|to understand|"
    r"to get|to have)\b|\s|$)",
    re.IGNORECASE,
)
_LEADING_REQUEST = re.compile(r"^(?:i|we)(?:'d|’d| would) |^(?:ich|je|j'|vorrei|quiero)", re.I)


_NOT_NAMES = _words("I I'm I’m OK Ok")
# Contractions typed without their apostrophe, as chats have them.
_UNSPELT = {
    "im": "I'm",
    "ive": "I've",
    "dont": "don't",
    "didnt": "didn't",
    "cant": "can't",
    "wont": "won't",
    "doesnt": "doesn't",
    "isnt": "isn't",
}


def _specifics(sentence: str) -> list[str]:
    """Numbers and names: words with a digit, and capitalised words after the first."""
    words = _WORD.findall(sentence)
    found = [w for w in words if _NUMBER.search(w)]
    found += [w for w in words[1:] if w[:1].isupper() and w not in _NOT_NAMES]
    return found


def _first_person(word: str) -> bool:
    word = word.lower().replace("’", "'")
    return word in _FIRST_PERSON or word.startswith(("j'", "m'"))


def _plain(sentence: str) -> str:
    """The sentence without the discourse markers and hedges in front of it."""
    text = sentence.strip()
    while True:
        stripped = _HEDGE.sub("", _MARKERS.sub("", text)).strip()
        if stripped == text or not stripped:
            return text
        text = stripped


def _states(clause: str) -> bool:
    """Whether a clause (its markers removed) states a fact about the user."""
    words = [_UNSPELT.get(w.lower(), w) for w in _WORD.findall(clause)]
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return False
    first = words[0].lower().replace("’", "'")
    if _first_person(first):
        flat = " ".join(w.replace("’", "'") for w in words)
        return not (_REACTION.match(flat) or _is_request(flat) or steers(flat))
    lowered = {w.lower() for w in words}
    if first in _SECOND_PERSON or first in _ASKING:
        return False
    described = first in _DETERMINERS or bool(_NUMBER.search(first)) or _named_subject(words)
    return described and bool(lowered & _POSSESSIVES or _specifics(clause)) and not steers(clause)


def _named_subject(words: list[str]) -> bool:
    """A name (capitalised words, "President Nelson") before a copula."""
    names = 0
    while names < len(words) - 1 and words[names][:1].isupper():
        names += 1
    return 0 < names <= 3 and words[names].lower() in _COPULAS


def _is_request(flat: str) -> bool:
    match = _REQUEST.match(flat)
    if match is None:
        return False
    # "I want to move to Spain" is a plan; "I want to know ..." is a question.
    rest = flat[match.end() :].lower()
    return not (rest.startswith("to ") and not _LEADING_REQUEST.match(flat))


def is_statement(sentence: str) -> bool:
    """Whether a sentence states something about the user worth keeping."""
    sentence = sentence.strip()
    if sentence.endswith("?") or sentence.startswith("¿"):
        return False
    return _states(_plain(sentence))


def _kept_part(sentence: str) -> str:
    """What of a sentence is kept: a statement less the markers before it; else its
    first clause that states ("Since we have a dog, which flat ...", "It was good but
    I don't eat fries"), less a question's last clause; else ""."""
    if is_statement(sentence):
        return _capital(_MARKERS.sub("", sentence))  # "By the way, my flight ..." less the marker
    clauses = _CLAUSES.split(sentence)
    if len(clauses) < 2:
        return ""
    if sentence.rstrip().endswith("?"):
        clauses = clauses[:-1]
    for part in clauses[:MAX_CLAUSES]:
        clause = _SUBORDINATE.sub("", _plain(part))
        if _states(clause):
            return _capital(clause)
        if _asks(clause):
            break  # what follows a request is part of it ("I want X but not Y")
    return ""


def _asks(clause: str) -> bool:
    """Whether a first-person clause asks for something ("I want to embed ...")."""
    flat = " ".join(w.replace("’", "'") for w in _WORD.findall(clause))
    return _first_person(flat.split(" ", 1)[0]) and (_is_request(flat) or steers(flat))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def statements(texts: Iterable[str]) -> list[str]:
    """The user's statements of fact in ``texts``, in order, without repeats (none from
    long messages or code: pasted material is the model's to summarize)."""
    found: list[str] = []
    for text in texts:
        if len(text) > MAX_MESSAGE_CHARS or "```" in text:
            continue
        for part in _SENTENCE_END.split(text):
            sentence = _kept_part(" ".join(part.split())).rstrip(".;!。")
            if sentence and sentence not in found:
                found.append(sentence)
    return found


_STOP = _words(
    "the a an and or of to in on at for is are was were be been my our i we me us it this "
    "that with by as from now also"
)


@functools.lru_cache(maxsize=4096)
def _shape(sentence: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """A statement's frame (its words less the specifics and filler) and specifics."""
    specifics = tuple(_specifics(sentence))
    words = {w.lower() for w in _WORD.findall(sentence)}
    return frozenset(words - {w.lower() for w in specifics} - _STOP), specifics


def same_subject(a: str, b: str) -> bool:
    """Whether two statements say something about the same thing (``b`` updates ``a``)."""
    (fa, sa), (fb, sb) = _shape(a), _shape(b)
    if not fa or not fb or sa == sb:
        return False
    return len(fa & fb) / len(fa | fb) >= 0.6


def superseded(stated: Sequence[str]) -> set[int]:
    """Indexes of the statements that a later one on the same subject updates."""
    return set(_superseded(tuple(stated)))


@functools.lru_cache(maxsize=64)
def _superseded(stated: tuple[str, ...]) -> frozenset[int]:
    """Only statements that share a word are compared, the nearest later one first (an
    update usually follows soon), so a long list costs little."""
    later: dict[str, list[int]] = {}  # word -> the later statements with it, farthest first
    gone = set()
    for i in range(len(stated) - 1, -1, -1):
        frame = _shape(stated[i])[0]
        seen: set[int] = set()
        for j in heapq.merge(*(reversed(later.get(w, [])) for w in frame)):
            if j not in seen:
                seen.add(j)
                if same_subject(stated[i], stated[j]):
                    gone.add(i)
                    break
        for w in frame:
            later.setdefault(w, []).append(i)
    return frozenset(gone)
