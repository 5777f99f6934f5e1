"""Speculative decoding: cheap guesses for the next tokens, checked in one batch.

Drafts come from the conversation itself (the tokens that followed the latest
earlier occurrence of the last n-gram, prompt lookup) or from a draft model.
The target model evaluates the sampled token and the k drafts in one batch,
with logits for those k + 1 positions only; its sampler samples at each
position in turn and a draft is accepted while it equals the sampled token.
That keeps the target's distribution exactly (greedy output is the same token
for token), and the first sampled token that differs is the next token anyway.

Whether to speculate is decided per conversation from measured acceptance and
measured cost: a verify of k drafts costs ``cost[k]`` single steps and yields
``(1 - a^(k+1)) / (1 - a)`` tokens at acceptance ``a``. In ``auto`` it drafts
while that pays or while the last verify paid (copying comes in stretches);
after a verify that lost it rests, then probes with a short draft, each failed
probe doubling the rest (48 tokens up to 384).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

MODES = ("off", "auto", "always")
NGRAM_SIZES = (4, 3, 2)
K_CHOICES = (1, 2, 3, 4, 6, 8)
# A batch of k + 1 tokens in units of one decode step, before any is measured
# (measured on this project's 2-core CPU and on an H200: verify costs grow slower there).
# Every k up to 8 has one: a draft can come back shorter than the k asked for.
CPU_COST = {1: 1.25, 2: 1.46, 3: 1.8, 4: 2.19, 5: 3.1, 6: 4.0, 7: 5.1, 8: 6.17}
GPU_COST = {1: 1.06, 2: 1.12, 3: 1.3, 4: 1.51, 5: 1.7, 6: 1.9, 7: 2.06, 8: 2.22}
PAYS = 1.08  # expected speed-up a draft must promise in auto mode
REST_TOKENS = 48  # after a draft that did not pay (auto), decode plainly this long
MAX_REST_TOKENS = 384  # each probe that fails again doubles the rest, up to this
PROBE_K = 4  # a probe drafts at most this many: is this a stretch that copies?
PRIOR_ACCEPTANCE = 0.55


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the shared prefix of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class NgramIndex:
    """Where each n-gram of the conversation's tokens last ended (prompt lookup)."""

    def __init__(self, tokens: Sequence[int] = ()) -> None:
        self.tokens: list[int] = []
        self._last: dict[tuple[int, ...], int] = {}
        self._previous: dict[tuple[int, ...], int] = {}
        for t in tokens:
            self.append(t)

    def append(self, token: int) -> None:
        self.tokens.append(token)
        end = len(self.tokens)
        for n in NGRAM_SIZES:
            if end >= n:
                key = tuple(self.tokens[end - n :])
                if key in self._last:
                    self._previous[key] = self._last[key]
                self._last[key] = end

    def draft(self, k: int) -> list[int]:
        """Up to ``k`` tokens that followed the latest earlier match of the longest
        suffix n-gram; [] when there is none."""
        end = len(self.tokens)
        for n in NGRAM_SIZES:
            if end < n:
                continue
            key = tuple(self.tokens[end - n :])
            at = self._previous.get(key) if self._last.get(key) == end else self._last.get(key)
            if at is not None and at < end:
                return self.tokens[at : min(at + k, end)]
        return []


@dataclass
class Acceptance:
    """Drafted and accepted tokens of one conversation, and a running rate."""

    drafted: int = 0
    accepted: int = 0
    rate: float = PRIOR_ACCEPTANCE
    rest_until: int = 0  # the decode step before which auto mode does not draft
    rest: int = REST_TOKENS  # the next rest's length
    last_paid: float = 0.0  # what the last verify yielded per unit of its cost

    def record(self, drafted: int, accepted: int) -> None:
        self.drafted += drafted
        self.accepted += accepted
        if drafted:
            weight = min(0.5, drafted / 16)
            self.rate = (1 - weight) * self.rate + weight * (accepted / drafted)


def expected_tokens(rate: float, k: int) -> float:
    """Tokens one verify of ``k`` drafts yields at per-token acceptance ``rate``."""
    if rate >= 0.999:
        return float(k + 1)
    return (1 - rate ** (k + 1)) / (1 - rate)


@dataclass
class Speculator:
    """The choice of k per step, from acceptance and the costs measured here."""

    mode: str = "auto"
    gpu: bool = False
    max_k: int = 8
    max_batch: int = 0  # most tokens one verify may hold (the kernels' limit); 0: none
    cost: dict[int, float] = field(default_factory=dict)
    single_s: float = 0.0  # a running mean of one plain decode step
    conversations: OrderedDict[int, Acceptance] = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        self.cost = dict(GPU_COST if self.gpu else CPU_COST)

    def for_conversation(self, key: int) -> Acceptance:
        acceptance = self.conversations.pop(key, None) or Acceptance()
        self.conversations[key] = acceptance
        while len(self.conversations) > 64:
            self.conversations.popitem(last=False)
        return acceptance

    def choose_k(self, acceptance: Acceptance, step: int, room: int) -> int:
        """How many drafts to verify at this step (0: decode plainly)."""
        if self.mode == "off" or room < 2:
            return 0
        if self.mode == "auto" and step < acceptance.rest_until:
            return 0  # resting: no work on this token
        choices = self._choices(min(self.max_k, room - 1, self._batch_limit()))
        gain = self._gains(acceptance.rate, choices)
        best = max(gain, key=lambda k: gain[k])
        if self.mode == "always":
            return best
        # Copying comes in stretches: while the last verify paid, draft as if the
        # stretch goes on (the k that pays most at full acceptance).
        bound = {k: (k + 1) / self.cost[k] for k in choices}
        if acceptance.last_paid >= PAYS:
            return max(bound, key=lambda k: bound[k])
        if gain[best] >= PAYS:
            return best
        # Not at the running rate: after a rest, probe whether a stretch has begun.
        probes = [k for k in choices if k <= PROBE_K] or choices[:1]
        return max(probes, key=lambda k: bound[k])

    def after_verify(
        self, acceptance: Acceptance, k: int, accepted: int, seconds: float, step: int
    ) -> None:
        """Learn from one verify: its cost, and whether drafting pays here."""
        acceptance.record(k, accepted)
        if self.single_s > 0:
            ratio = seconds / self.single_s
            self.cost[k] = 0.8 * self.cost[k] + 0.2 * max(1.0, ratio)
        paid = (accepted + 1) / self.cost[k]
        acceptance.last_paid = paid
        if paid >= PAYS:
            acceptance.rest = REST_TOKENS
        elif self.mode == "auto" and paid < 1.0:
            limit = min(self.max_k, self._batch_limit())
            gains = self._gains(acceptance.rate, self._choices(limit))
            if max(gains.values()) < PAYS:  # nor at the running acceptance: rest
                acceptance.rest_until = step + acceptance.rest
                acceptance.rest = min(2 * acceptance.rest, MAX_REST_TOKENS)

    def _batch_limit(self) -> int:
        """Most drafts one verify may hold: the sampled token plus k within ``max_batch``."""
        return self.max_batch - 1 if self.max_batch > 1 else self.max_k

    @staticmethod
    def _choices(limit: int) -> list[int]:
        return [k for k in K_CHOICES if k <= limit] or [1]

    def _gains(self, rate: float, choices: list[int]) -> dict[int, float]:
        """Expected speed-up of each k at acceptance ``rate``, by the measured costs."""
        return {k: expected_tokens(rate, k) / self.cost[k] for k in choices}

    def after_single(self, seconds: float) -> None:
        self.single_s = seconds if self.single_s <= 0 else 0.9 * self.single_s + 0.1 * seconds
