"""Which node pairs to test, in rounds of disjoint pairs: every pair, or a sparse survey and
re-tests of the suspects (fleets of tens to hundreds of nodes).

All pairs (the circle method of a round-robin tournament, :func:`round_robin`) take k - 1
rounds for k nodes (k when k is odd: one node sits out each round); the network benchmark runs
each round in both directions, 2(k - 1).  That is 511 rounds at 512 nodes.  The sparse plan
takes a number of rounds that does not grow with k:

1. survey (:func:`survey_rounds`): ``partners`` (d) rounds of the tournament, spread evenly
   over it, so that each node meets d distinct partners; with an odd k the d nodes that sat
   out one of those rounds meet a partner in one round more: d + (k mod 2) rounds.
2. suspects (:func:`suspects`): both ends of every survey pair below (1 - SUSPECT_REL) of the
   survey's median, per series (an op's busbw; a metric and tool of the network test).  The
   rule is lenient on purpose (half of ``node_pair_min_rel``'s default): a suspect costs a
   re-test, a node missed here is judged on its survey pairs alone.  The verdict is the
   analysis' (the slow node pairs over every pair measured), not this rule's.
3. re-tests (:func:`retest_rounds`): at most RETESTS rounds pairing each suspect, the most
   suspect first, with a node it has not met that was fast with most of its survey partners
   (no slow pair preferred); a slow pair whose two ends are fast with most of theirs is
   measured again once.  A bad node is then slow with two more partners known good; a bad link
   stays slow while its ends are fast with their new partners, and noise does not stay.

Rounds of the sparse plan: d + (k mod 2) on a fleet with no suspect, d + (k mod 2) + RETESTS
at most otherwise; 5 at d = 3 and an even k.  ``auto`` keeps all pairs up to
:data:`SPARSE_ABOVE` nodes, where they cost at most 7 rounds and measure every link.  All
pairs measure their slow pairs again too (:func:`remeasure_rounds`): at most RETESTS rounds
more, none on a fleet with no pair below (1 - SUSPECT_REL) of the best node's median pair, so
that a burst of load on a node during one pair's round is not taken for a slow link.

Pure: node indices in, rounds of pairs out; the benchmarks run them and decide the re-tests
on rank 0 (``pair_rounds``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_PARTNERS",
    "GOOD_BELOW",
    "RETESTS",
    "SPARSE_ABOVE",
    "SUSPECT_REL",
    "PairStrategy",
    "RoundCount",
    "all_pairs_round_count",
    "met_pairs",
    "planned_rounds",
    "remeasure_rounds",
    "resolve_strategy",
    "retest_rounds",
    "round_robin",
    "slow_pairs",
    "survey_rounds",
    "suspects",
]

Pair = tuple[int, int]
Round = list[Pair]
PairStrategy = Literal["auto", "all", "sparse"]
"""auto: all pairs up to :data:`SPARSE_ABOVE` nodes, sparse above; all; sparse."""

SPARSE_ABOVE = 8
"""``auto`` tests all pairs up to this many nodes (7 rounds at 8, against the sparse plan's 3
to 5: all pairs cost little more there and measure every link)."""
DEFAULT_PARTNERS = 3
"""Survey partners per node: with 3 a bad node is slow with 3 partners in the survey, each of
them slow with 1 of its 3 only, so the node's median pair tells it from its partners."""
RETESTS = 2
"""Re-tests per suspect against nodes known good (each in a round of its own): a verdict needs
two slow pairs with distinct partners."""
SUSPECT_REL = 0.2
"""A survey pair this fraction below the survey's median makes both its ends suspects."""
GOOD_BELOW = 0.5
"""A node slow with fewer than this share of its survey partners may be a re-test partner."""


def round_robin(num_nodes: int) -> list[Round]:
    """Rounds of node pairs (circle method): every pair once, no node twice in a round."""
    slots: list[int | None] = list(range(num_nodes))
    if num_nodes % 2:
        slots.append(None)  # a bye
    rounds = []
    for _ in range(len(slots) - 1):
        half = len(slots) // 2
        pairs = [(slots[i], slots[-1 - i]) for i in range(half)]
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        slots = [slots[0], slots[-1], *slots[1:-1]]  # rotate all but the first
    return rounds


def all_pairs_round_count(num_nodes: int) -> int:
    """Rounds of :func:`round_robin`: k - 1 for an even k, k for an odd one, 0 below 2."""
    return 0 if num_nodes < 2 else num_nodes - 1 + num_nodes % 2


def resolve_strategy(
    strategy: PairStrategy, *, num_nodes: int, partners: int = DEFAULT_PARTNERS
) -> Literal["all", "sparse"]:
    """The plan ``strategy`` means for ``num_nodes``: auto is sparse above :data:`SPARSE_ABOVE`
    nodes; a survey that would meet every partner anyway is all pairs."""
    if strategy == "auto":
        strategy = "sparse" if num_nodes > SPARSE_ABOVE else "all"
    if strategy == "sparse" and partners >= num_nodes - 1:
        return "all"
    return strategy


def met_pairs(rounds: Iterable[Iterable[Pair]]) -> set[Pair]:
    """Every pair of ``rounds`` as (low, high)."""
    return {(min(a, b), max(a, b)) for pairs in rounds for a, b in pairs}


def survey_rounds(num_nodes: int, partners: int = DEFAULT_PARTNERS) -> list[Round]:
    """``partners`` rounds of the tournament spread evenly over it (each node meets that many
    distinct partners), and with an odd k one more round for the nodes that sat one out."""
    tournament = round_robin(num_nodes)
    if partners >= len(tournament):
        return tournament
    picked = [tournament[j * len(tournament) // partners] for j in range(partners)]
    if num_nodes % 2:
        picked.append(_bye_round(num_nodes, picked))
    return picked


def _bye_round(num_nodes: int, rounds: Sequence[Round]) -> Round:
    """A round pairing each node that met fewer partners than there are rounds with one it has
    not met, another such node first."""
    met = met_pairs(rounds)
    degree = {n: sum(n in pair for pair in met) for n in range(num_nodes)}
    short = [n for n in range(num_nodes) if degree[n] < len(rounds)]
    busy: set[int] = set()
    out: Round = []
    for node in short:
        if node in busy:
            continue
        options = [*short, *range(num_nodes)]
        partner = next(
            (m for m in options if m != node and m not in busy
             and (min(node, m), max(node, m)) not in met),
            None,
        )  # fmt: skip
        if partner is not None:
            out.append((min(node, partner), max(node, partner)))
            busy |= {node, partner}
    return out


def _flags(series: Iterable[Mapping[Pair, float]], rel: float) -> Iterator[tuple[Pair, bool]]:
    """Each pair of each series with whether it is below (1 - ``rel``) x the series' median
    (series of fewer than three pairs have no majority to judge by, and are left out)."""
    for figures in series:
        values = [v for v in figures.values() if v > 0]
        if len(values) < 3:
            continue
        limit = (1 - rel) * statistics.median(values)
        for pair, value in figures.items():
            yield pair, value < limit


def suspects(
    series: Iterable[Mapping[Pair, float]], *, rel: float = SUSPECT_REL
) -> dict[int, float]:
    """Node -> how suspect it is: the share of its pairs below (1 - ``rel``) x the median of
    the series' pairs, at its worst over the series (each series maps a pair, directed or not,
    to a higher-is-better figure).  Nodes with no slow pair are left out."""
    score: dict[int, float] = {}
    for figures in series:
        flags: dict[int, list[bool]] = defaultdict(list)
        for (a, b), slow in _flags([figures], rel):
            for node in {a, b}:
                flags[node].append(slow)
        for node, marks in flags.items():
            if any(marks):
                score[node] = max(score.get(node, 0.0), sum(marks) / len(marks))
    return score


def slow_pairs(series: Iterable[Mapping[Pair, float]], *, rel: float = SUSPECT_REL) -> set[Pair]:
    """The pairs (low, high) below (1 - ``rel``) x their series' median in any series."""
    return {(min(a, b), max(a, b)) for (a, b), slow in _flags(series, rel) if slow}


def remeasure_rounds(
    series: Iterable[Mapping[Pair, float]], *, rel: float = SUSPECT_REL, retests: int = RETESTS
) -> list[Round]:
    """All pairs: up to ``retests`` rounds of disjoint pairs measuring again each pair (low,
    high) below (1 - ``rel``) x its series' reference, the furthest below first.

    The reference is the best node's median pair: a bad node among three is slow with two of
    the three pairs, so the pairs' own median would be slow.  A pair is judged by its best
    test, so a burst of noise does not stay; a bad node's pairs stay slow (it has k - 1 of
    them and is measured again with ``retests`` partners), and so does a bad link."""
    worst: dict[Pair, float] = {}
    for figures in series:
        if len(figures) < 3:  # no majority to judge by (as _flags)
            continue
        per_node: dict[int, list[float]] = defaultdict(list)
        for (a, b), value in figures.items():
            per_node[a].append(value)
            per_node[b].append(value)
        reference = max(statistics.median(values) for values in per_node.values())
        if reference <= 0:
            continue
        for (a, b), value in figures.items():
            ratio = value / reference
            if ratio < 1 - rel:
                pair = (min(a, b), max(a, b))
                worst[pair] = min(ratio, worst.get(pair, ratio))
    order = sorted(worst, key=lambda p: (worst[p], p))
    rounds: list[Round] = []
    while order and len(rounds) < retests:
        busy: set[int] = set()
        pairs: Round = []
        for pair in order:
            if not set(pair) & busy:
                pairs.append(pair)
                busy |= set(pair)
        order = [p for p in order if p not in pairs]
        rounds.append(sorted(pairs))
    return rounds


def retest_rounds(
    *,
    num_nodes: int,
    met: Iterable[Pair],
    suspect_score: Mapping[int, float],
    slow: Iterable[Pair] = (),
    retests: int = RETESTS,
) -> list[Round]:
    """Up to ``retests`` rounds of re-tests of the suspects, the most suspect first.

    Each suspect meets nodes it has not met that were slow with fewer than
    :data:`GOOD_BELOW` of their survey partners (those with no slow pair first, then the least
    used): a partner of a bad node (slow with 1 of its 3) is such a node, so a fleet whose
    noise makes many suspects still has partners to re-test against.  In the first round,
    each ``slow`` survey pair whose two ends are both such nodes (a bad link, or noise) is
    measured again, after the suspects slow with most of their partners have theirs: a link
    is judged by its best test, and only one that stays slow is bad."""
    seen = {(min(a, b), max(a, b)) for a, b in met}
    partners = [n for n in range(num_nodes) if suspect_score.get(n, 0.0) < GOOD_BELOW]
    fine = set(partners)
    again = sorted(p for p in {(min(a, b), max(a, b)) for a, b in slow} if set(p) <= fine)
    order = sorted(suspect_score, key=lambda n: (-suspect_score[n], n))
    need = dict.fromkeys(order, retests)
    used: dict[int, int] = defaultdict(int)
    rounds: list[Round] = []
    for index in range(retests):
        busy: set[int] = set()
        pairs: Round = []
        for node in order:
            if index == 0 and node in fine and again:  # the re-measures come in here
                pairs += [p for p in again if not set(p) & busy]
                busy |= {n for p in pairs for n in p}
                again = []
            if node in busy or not need[node]:
                continue
            options = [
                g for g in partners
                if g != node and g not in busy and (min(node, g), max(node, g)) not in seen
            ]  # fmt: skip
            if not options:
                continue
            partner = min(options, key=lambda g: (suspect_score.get(g, 0.0), used[g], g))
            pair = (min(node, partner), max(node, partner))
            pairs.append(pair)
            seen.add(pair)
            busy |= {node, partner}
            used[partner] += 1
            need[node] -= 1
        if not pairs:
            break
        rounds.append(sorted(pairs))
    return rounds


@dataclass(frozen=True, slots=True)
class RoundCount:
    """Rounds of one plan: its survey and (at most) its re-tests, against all pairs."""

    strategy: Literal["all", "sparse"]
    survey: int
    """All pairs: every round; sparse: the survey's."""
    retest: int
    """The re-test rounds at most (0 for a fleet with no suspect or slow pair)."""
    all_pairs: int

    @property
    def total(self) -> int:
        return self.survey + self.retest


def planned_rounds(
    num_nodes: int,
    *,
    strategy: PairStrategy = "auto",
    partners: int = DEFAULT_PARTNERS,
    with_suspects: bool = True,
) -> RoundCount:
    """The rounds ``strategy`` takes at ``num_nodes`` (the README's table): sparse is
    d + (k mod 2) + RETESTS with suspects, d + (k mod 2) without; all pairs k - 1 + (k mod 2)
    + RETESTS with a slow pair to measure again (:func:`remeasure_rounds`; from 3 nodes, the
    fewest that have a median to judge by), k - 1 + (k mod 2) without."""
    every = all_pairs_round_count(num_nodes)
    retest = RETESTS if with_suspects else 0
    if resolve_strategy(strategy, num_nodes=num_nodes, partners=partners) == "all":
        return RoundCount("all", every, retest if num_nodes >= 3 else 0, every)
    survey = partners + num_nodes % 2
    return RoundCount("sparse", survey, retest, every)
