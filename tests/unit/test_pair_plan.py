"""The node-pair planner: rounds at 8, 64 and 512 nodes, disjoint pairs, every node's partners,
the suspects and the re-tests against nodes known good."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from clusterbench.benchmarks.collectives.groups import plan_groups, round_robin_pairs
from clusterbench.benchmarks.pair_plan import (
    DEFAULT_PARTNERS,
    GOOD_BELOW,
    RETESTS,
    SPARSE_ABOVE,
    SUSPECT_REL,
    all_pairs_round_count,
    met_pairs,
    planned_rounds,
    remeasure_rounds,
    resolve_strategy,
    retest_rounds,
    round_robin,
    survey_rounds,
    suspects,
)


def _assert_disjoint(rounds: list[list[tuple[int, int]]]) -> None:
    for pairs in rounds:
        nodes = [n for pair in pairs for n in pair]
        assert len(nodes) == len(set(nodes)), pairs
        assert all(a != b for a, b in pairs)


@pytest.mark.parametrize(
    ("num_nodes", "strategy", "survey", "retest", "every"),
    [
        (8, "all", 7, 2, 7),  # auto keeps all pairs up to SPARSE_ABOVE nodes
        (64, "sparse", 3, 2, 63),
        (512, "sparse", 3, 2, 511),
    ],
)
def test_rounds_at_8_64_512_nodes(
    num_nodes: int, strategy: str, survey: int, retest: int, every: int
) -> None:
    count = planned_rounds(num_nodes)
    assert (count.strategy, count.survey, count.retest, count.all_pairs) == (
        strategy, survey, retest, every,
    )  # fmt: skip
    # the formulas the README states: all pairs k - 1 + (k mod 2); sparse d + (k mod 2) + 2
    k, d = num_nodes, DEFAULT_PARTNERS
    assert count.all_pairs == k - 1 + k % 2 == len(round_robin(k))
    if strategy == "sparse":
        assert count.total == d + k % 2 + RETESTS == len(survey_rounds(k, d)) + RETESTS
        assert planned_rounds(k, with_suspects=False).total == d + k % 2
    else:  # all pairs, and their slow pairs again
        assert count.total == k - 1 + k % 2 + RETESTS
        assert planned_rounds(k, with_suspects=False).total == k - 1 + k % 2
    assert planned_rounds(2).total == 1  # one pair: no median to judge it by
    # sparse forced at 8 nodes is cheaper than all pairs too
    assert planned_rounds(8, strategy="sparse").total == 5 < 7


@pytest.mark.parametrize("num_nodes", [8, 9, 10, 33, 64, 65, 512])
@pytest.mark.parametrize("partners", [2, 3, 4])
def test_survey_gives_every_node_its_partners_in_disjoint_rounds(
    num_nodes: int, partners: int
) -> None:
    rounds = survey_rounds(num_nodes, partners)
    _assert_disjoint(rounds)
    assert len(rounds) == partners + num_nodes % 2
    pairs = [tuple(sorted(p)) for r in rounds for p in r]
    assert len(pairs) == len(set(pairs))  # no pair twice: each partner is a new one
    degree = Counter(n for p in pairs for n in p)
    assert set(degree) == set(range(num_nodes))
    assert min(degree.values()) >= partners
    assert max(degree.values()) <= partners + 1  # the odd k's extra round adds one at most


def test_round_robin_is_all_pairs_in_disjoint_rounds() -> None:
    for k in range(2, 12):
        rounds = round_robin(k)
        _assert_disjoint(rounds)
        assert len(rounds) == all_pairs_round_count(k)
        assert sorted(tuple(sorted(p)) for r in rounds for p in r) == list(
            itertools.combinations(range(k), 2)
        )
        assert round_robin_pairs(k) == [tuple(sorted(p)) for r in rounds for p in r]


def test_strategy_cutover_and_small_fleets() -> None:
    assert resolve_strategy("auto", num_nodes=SPARSE_ABOVE) == "all"
    assert resolve_strategy("auto", num_nodes=SPARSE_ABOVE + 1) == "sparse"
    assert resolve_strategy("sparse", num_nodes=4) == "all"  # 3 partners: everyone anyway
    assert resolve_strategy("sparse", num_nodes=5) == "sparse"
    assert resolve_strategy("all", num_nodes=512) == "all"


def test_plan_groups_follow_a_sparse_plan() -> None:
    survey = survey_rounds(10, 3)
    groups = plan_groups(
        ["node_pairs"], node_of_rank=[n for n in range(10) for _ in range(2)],
        host_of_node=[f"h{n}" for n in range(10)], pair_rounds=survey,
    )  # fmt: skip
    assert [g.nodes for g in groups] == [tuple(sorted(p)) for r in survey for p in r]
    assert groups[0].ranks == (2 * groups[0].nodes[0], 2 * groups[0].nodes[0] + 1,
                               2 * groups[0].nodes[1], 2 * groups[0].nodes[1] + 1)  # fmt: skip


def _figures(
    pairs: list[tuple[int, int]], *, rng: random.Random, bad: set[int], noise: float = 0.1
) -> dict[tuple[int, int], float]:
    return {p: 10.0 * rng.lognormvariate(0, noise) * (0.01 if bad & set(p) else 1.0) for p in pairs}


def test_suspects_are_both_ends_of_slow_pairs_and_the_bad_node_leads() -> None:
    rng = random.Random(1)
    survey = survey_rounds(64, 3)
    figures = _figures([p for r in survey for p in r], rng=rng, bad={17})
    score = suspects([figures])
    partners = {b if a == 17 else a for a, b in met_pairs(survey) if 17 in (a, b)}
    # every partner of the bad node is a suspect (noise may add a few more, at 1/3 at most)
    assert set(score) >= {17, *partners}
    assert score[17] == 1.0 and all(score[p] == pytest.approx(1 / 3) for p in partners)
    assert max(v for n, v in score.items() if n != 17) < 0.5
    quiet = suspects([_figures(list(figures), rng=rng, bad={17}, noise=0.02)])
    assert set(quiet) == {17, *partners}


def test_retests_pair_suspects_with_good_unmet_nodes_in_disjoint_rounds() -> None:
    survey = survey_rounds(64, 3)
    met = met_pairs(survey)
    partners = {b if a == 17 else a for a, b in met if 17 in (a, b)}
    score = {17: 1.0, **dict.fromkeys(partners, 1 / 3)}
    rounds = retest_rounds(num_nodes=64, met=met, suspect_score=score)
    assert len(rounds) == RETESTS
    _assert_disjoint(rounds)
    tested = Counter()
    for a, b in (p for r in rounds for p in r):
        suspect, good = (a, b) if a in score else (b, a)
        assert suspect in score and good not in score  # against nodes known good
        assert (min(a, b), max(a, b)) not in met  # new partners
        tested[suspect] += 1
    assert tested == dict.fromkeys(score, RETESTS)
    # with no suspect there is nothing to re-test
    assert retest_rounds(num_nodes=64, met=met, suspect_score={}) == []


def test_retests_go_to_the_most_suspect_when_good_nodes_are_few() -> None:
    # 8 nodes, noise made all but one suspects: the bad node (slow with all its partners) gets its
    # two re-tests, each against a node slow with fewer than half of its own partners
    survey = survey_rounds(8, 3)
    met = met_pairs(survey)
    clean, busy = sorted(n for n in range(1, 8) if (0, n) not in met)[:2]
    score = {0: 1.0, busy: 0.6, **{n: 0.33 for n in range(1, 8) if n not in (clean, busy)}}
    rounds = retest_rounds(num_nodes=8, met=met, suspect_score=score)
    assert len(rounds) == RETESTS
    _assert_disjoint(rounds)
    mine = [p for r in rounds for p in r if 0 in p]
    assert len(mine) == RETESTS
    partners = [b if a == 0 else a for a, b in mine]
    assert partners[0] == clean  # the one node with no slow pair comes first
    assert all(score.get(g, 0) < GOOD_BELOW for g in partners)
    assert not set(mine) & met
    # a node slow with most of its partners is re-tested, but never a partner
    assert all(min(score.get(a, 0), score.get(b, 0)) < GOOD_BELOW for r in rounds for a, b in r)


def test_healthy_noise_makes_few_suspects() -> None:
    # 10% lognormal noise: a pair 20% below the median is 2.2 sigma, so few suspects, and the
    # re-tests stay within RETESTS rounds whatever their number
    many = 0
    for seed in range(50):
        survey = survey_rounds(64, 3)
        figures = _figures([p for r in survey for p in r], rng=random.Random(seed), bad=set())
        score = suspects([figures], rel=SUSPECT_REL)
        many = max(many, len(score))
        rounds = retest_rounds(num_nodes=64, met=met_pairs(survey), suspect_score=score)
        assert len(rounds) <= RETESTS
    assert many < 16


def test_plan_settings_are_checked_and_chosen_from_the_command_line() -> None:
    from clusterbench.config import ConfigError, build_run_config

    config = build_run_config(
        device_type="cpu",
        only=["collectives", "network"],
        sets=["collectives.node_pairs=sparse", "network.pair_partners=4"],
    )
    assert config.benchmarks["collectives"].node_pairs == "sparse"
    assert config.benchmarks["network"].pair_partners == 4
    for bad, text in [
        ("collectives.node_pairs=some", "collectives.node_pairs: input should be 'auto'"),
        ("network.pair_partners=1", "pair_partners must be >= 2"),
    ]:
        with pytest.raises(ConfigError, match=text):
            build_run_config(device_type="cpu", sets=[bad])


def test_all_pairs_measure_their_slow_pairs_again_the_slowest_first() -> None:
    healthy = {pair: 10.0 for r in round_robin(6) for pair in r}
    assert remeasure_rounds([healthy]) == []
    # a burst of noise on one pair of three nodes: that pair once more
    three = {(0, 1): 5.0, (0, 2): 10.0, (1, 2): 9.5}
    assert remeasure_rounds([three]) == [[(0, 1)]]
    # 8.5 is within 0.8 x the best node's median pair (node 2's: 10): not slow
    assert remeasure_rounds([{(0, 1): 8.5, (0, 2): 10.0, (1, 2): 10.0}]) == []
    # a bad node among three is slow with two of the three pairs (their median is slow): the
    # best node's median pair (node 0's, (10 + 1) / 2) still finds them, the slower first
    assert remeasure_rounds([{(0, 1): 10.0, (0, 2): 1.0, (1, 2): 1.1}]) == [[(0, 2)], [(1, 2)]]
    # a bad node (5) is slow with all five partners: RETESTS rounds of one of its pairs each,
    # the furthest below first; a slow link (2, 3) elsewhere shares the first round
    bad = {**healthy, **{(n, 5): 1.0 + n / 10 for n in range(5)}, (2, 3): 4.0}
    rounds = remeasure_rounds([bad])
    assert rounds == [[(0, 5), (2, 3)], [(1, 5)]]
    assert len(rounds) == RETESTS
    _assert_disjoint(rounds)
    # directed pairs (the network test) come back as (low, high); a series of fewer than
    # three pairs has no median to judge by
    directed = {(1, 0): 1.0, (0, 1): 10.0, (0, 2): 10.0, (2, 0): 10.0}
    assert remeasure_rounds([directed]) == [[(0, 1)]]
    assert remeasure_rounds([{(0, 1): 1.0, (0, 2): 10.0}]) == []
    # the worst figure over the series decides the order
    a = {(0, 1): 7.0, (2, 3): 10.0, (0, 2): 10.0, (1, 3): 10.0}
    b = {(0, 1): 10.0, (2, 3): 1.0, (0, 2): 10.0, (1, 3): 10.0}
    assert remeasure_rounds([a, b]) == [[(0, 1), (2, 3)]]
    assert remeasure_rounds([a, b], retests=0) == []
