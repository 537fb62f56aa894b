"""The run's scaling prediction from a run's results: the link fits recovered from synthetic
sweeps of known alpha and beta, links assumed (and marked) where the run did not measure
them, where every workload figure came from, the rows against the scaling model called
directly, the choice of fit sizes for the validation and its errors, and the findings."""

from __future__ import annotations

import json
import math

import pytest

from clusterbench.analyses.prediction import findings as prediction_findings
from clusterbench.analyses.prediction.inputs import (
    ASSUMED_INTER_ALPHA_S,
    ASSUMED_INTRA_ALPHA_S,
    DEFAULT_NIC_GBPS,
)
from clusterbench.analyses.prediction.predict import (
    NIC_CEILING_GBPS,
    NoPrediction,
    applies,
    predict,
)
from clusterbench.analyses.prediction.scaling_model import (
    Links,
    Workload,
    bandwidth_for_efficiency,
    beta_for_node_gbps,
    node_gbps,
    predict_step,
    validate,
)
from clusterbench.analyses.prediction.section import predictions_grid
from clusterbench.analyses.run import analyze
from clusterbench.benchmarks.training.decoder import Decoder
from clusterbench.model_shapes import DECODER_PRESETS
from clusterbench.thresholds import Thresholds
from tests.pages import analysed
from tests.prediction_runs import COMPUTE_S, GRAD_BYTES, INTER, INTRA, model_steps, run_of

# --- links ------------------------------------------------------------------------------------


def test_links_are_fitted_per_level_and_the_slowest_is_used() -> None:
    """Node 1's NVLink 30% slower, rail 5 50% slower: each level's slowest fit is used, within
    2% of the alpha and beta put in; every group's fit is kept; the world (both links mixed)
    is not fitted."""
    r = run_of(num_nodes=2, intra_slowdown={1: 1.3}, rail_slowdown={5: 1.5})
    p = predict(r)
    assert p.intra is not None and p.intra.kind == "measured" and p.intra.group == "node1"
    assert p.inter.kind == "measured" and p.inter.group == "rail5"
    assert p.intra.fit.alpha_s == pytest.approx(INTRA[0], rel=0.02)
    assert p.intra.fit.beta_s_per_byte == pytest.approx(INTRA[1] * 1.3, rel=0.02)
    assert p.inter.fit.alpha_s == pytest.approx(INTER[0], rel=0.02)
    assert p.inter.fit.beta_s_per_byte == pytest.approx(INTER[1] * 1.5, rel=0.02)
    assert sorted(f.group or "" for f in p.fits) == sorted(
        ["node0", "node1", *(f"rail{j}" for j in range(8))]
    )
    assert {f.fit.p for f in p.fits if f.level == "inter"} == {2}
    assert p.assumptions() == [] and all(not r.assumed for r in p.rows)
    # the node's bandwidth: 8 rails of 20 / 1.5 GB/s
    assert p.inter_node_gbps == pytest.approx(8 * 8 * 20 / 1.5, rel=0.02)


def test_one_node_fits_the_world_and_assumes_the_inter_node_link() -> None:
    r = run_of(num_nodes=1, gpus_per_node=4, nics=2, nic_gbps=400.0)
    p = predict(r)
    assert p.intra is not None and p.intra.group == "world" and p.intra.fit.p == 4
    assert p.intra.fit.beta_s_per_byte == pytest.approx(INTRA[1], rel=0.02)
    assert p.gpus_per_node == 4 and p.gpus_per_node_source == "the run's 4 GPUs per node"
    # the NIC inventory: 2 x 400 Gb/s per node, the assumed alpha
    assert p.inter.kind == "assumed" and p.inter_node_gbps == pytest.approx(800.0)
    assert p.inter.fit.alpha_s == ASSUMED_INTER_ALPHA_S
    assert (p.inter.fit.alpha_stderr_s, p.inter.fit.rel_sigma) == (0.0, 0.0)
    [assumed] = p.assumptions()
    assert assumed.startswith("inter-node link: 800 Gb/s per node") and "NIC inventory" in assumed
    assert all(r.assumed == ("inter-node link",) for r in p.rows)
    # an assumed link has no band of its own: a row's band is the intra-node fit's alone
    lk = Links(gpus_per_node=4, intra=p.intra.fit, inter=p.inter.fit)
    w = Workload(compute_s=p.compute.value, grad_bytes=GRAD_BYTES, overlap=p.overlap.value)
    row = p.rows[0]
    direct = predict_step(w, lk, world_size=row.world_size, strategy=row.strategy)
    assert (row.step.step_low_s, row.step.step_high_s) == (direct.step_low_s, direct.step_high_s)
    # no NIC rate known: 400 Gb/s per node, said so
    p = predict(run_of(num_nodes=1, gpus_per_node=4, nic_gbps=None))
    assert p.inter_node_gbps == pytest.approx(DEFAULT_NIC_GBPS)
    assert "no NIC of the run reports a rate" in p.inter.source


def test_a_given_nic_speed_keeps_the_measured_alpha() -> None:
    r = run_of(num_nodes=2)
    p = predict(r, nic_gbps=3200.0)
    assert p.inter.kind == "given" and p.inter_node_gbps == pytest.approx(3200.0)
    measured = predict(r).inter.fit
    assert p.inter.fit.alpha_s == measured.alpha_s
    assert p.inter.fit.beta_s_per_byte == pytest.approx(beta_for_node_gbps(3200, gpus_per_node=8))
    assert p.assumptions() == []  # given, not assumed
    # the validation still checks the model on the run's own links
    assert p.validation == predict(r).validation


def test_one_gpu_assumes_both_links_from_the_spec_and_the_nics() -> None:
    r = run_of(num_nodes=1, gpus_per_node=1, collectives=False, overlap_pairs=None)
    assert applies(r)  # collectives were asked for: a run of one GPU has nothing to measure
    p = predict(r)
    assert p.gpus_per_node == 8 and p.gpus_per_node_source.startswith("assumed 8")
    assert p.intra is not None and p.intra.kind == "assumed"
    # the busbw healthy 2x H200 reach (spec table), not the raw 450 GB/s of NVLink
    assert p.intra.fit.busbw_gbps == pytest.approx(342.0)
    assert p.intra.fit.alpha_s == ASSUMED_INTRA_ALPHA_S
    assert "docs/reference.md" in p.intra.source and "342 GB/s" in p.intra.source
    assert p.overlap.kind == "assumed" and p.overlap.value == 0.0
    assert {"intra-node link", "inter-node link", "overlap"} <= set(p.rows[0].assumed)
    assert p.validation is None
    assert p.validation_reason == (
        "needs 2 measured world sizes; one GPU measured: the 1→2 check waits for two GPUs"
    )
    # no spec, no measured intra-node link: nothing to predict with
    cpu = run_of(num_nodes=1, gpus_per_node=4, collectives=False, cpu=True)
    with pytest.raises(NoPrediction, match="intra-node link is neither measured"):
        predict(cpu)


# --- workload -------------------------------------------------------------------------------


def test_workload_figures_say_where_they_came_from() -> None:
    p = predict(run_of(num_nodes=1, overlap_pairs=[(2.0, 8.0), (5.0, 5.0), (1.0, 9.0)]))
    assert (p.compute.kind, p.compute.value) == ("measured", COMPUTE_S)
    assert "at 1 GPU (median of 10 steps)" in p.compute.source
    assert (p.grad_bytes.kind, p.grad_bytes.value) == ("measured", GRAD_BYTES)
    # overlapped / (overlapped + exposed) per rank: 0.2, 0.5, 0.1 -> median 0.2
    assert (p.overlap.kind, p.overlap.value) == ("measured", pytest.approx(0.2))
    assert "median over 3 ranks" in p.overlap.source
    # an attribution of another strategy is not this workload's
    r = run_of(num_nodes=1)
    for m in r.measurements:
        if m.benchmark == "attribution":
            m.params["strategy"] = "fsdp2"
    p = predict(r)
    assert p.overlap.kind == "assumed" and "no attribution of 1.3b ddp" in p.overlap.source


def test_without_world_size_1_the_compute_is_fitted_to_the_smallest_size() -> None:
    steps = model_steps([8, 16], gpus_per_node=8, compute_s=0.3)
    p = predict(run_of(num_nodes=2, world_sizes=[8, 16], steps_s=steps))
    assert p.compute.kind == "fitted" and p.compute.value == pytest.approx(0.3, rel=0.01)
    assert "the step at 8 GPUs less its modelled communication" in p.compute.source


def test_gradient_bytes_of_an_older_run_come_from_the_preset() -> None:
    p = predict(run_of(num_nodes=1, model="tiny", grad_bytes=None))
    model = Decoder(DECODER_PRESETS["tiny"])
    assert p.grad_bytes.kind == "assumed"
    assert p.grad_bytes.value == 4 * sum(t.numel() for t in model.parameters())
    assert all("gradient bytes" in r.assumed for r in p.rows)
    with pytest.raises(NoPrediction, match=r"no training\.gradient_bytes"):
        predict(run_of(num_nodes=1, model="resnet50", grad_bytes=None))


def test_what_cannot_be_predicted_says_why() -> None:
    with pytest.raises(NoPrediction, match="tensor or pipeline"):
        predict(run_of(num_nodes=1, strategy="tp"))
    no_training = run_of(num_nodes=1)
    no_training.measurements = [m for m in no_training.measurements if m.benchmark != "training"]
    with pytest.raises(NoPrediction, match="no training scaling series"):
        predict(no_training)
    assert not applies(no_training)
    for bad, message in (
        ({"gpu_counts": [0]}, ">= 1"),
        ({"gpu_counts": [12]}, "12 GPUs is not a multiple of 8"),
        ({"gpus_per_node": 0}, "gpus-per-node"),
        ({"nic_gbps": -1.0}, "nic-gbps"),
        ({"target": 1.5}, "target"),
        ({"strategies": ["tp"]}, "ddp and fsdp"),
    ):
        with pytest.raises(ValueError, match=message):
            predict(run_of(num_nodes=1), **bad)  # type: ignore[arg-type]


# --- rows -----------------------------------------------------------------------------------


def test_rows_are_the_scaling_model_on_the_recovered_inputs() -> None:
    r = run_of(num_nodes=2, strategy="fsdp2")
    p = predict(r, gpu_counts=[8, 64, 256], target=0.8)
    assert p.strategies == ("fsdp", "ddp")  # the training's first
    assert [(row.world_size, row.strategy) for row in p.rows] == [
        (n, s) for n in (8, 64, 256) for s in ("fsdp", "ddp")
    ]
    assert p.intra is not None
    links = Links(gpus_per_node=8, intra=p.intra.fit, inter=p.inter.fit)
    w = Workload(compute_s=p.compute.value, grad_bytes=GRAD_BYTES, overlap=p.overlap.value)
    for row in p.rows:
        direct = predict_step(w, links, world_size=row.world_size, strategy=row.strategy)
        assert row.step == direct
        if row.world_size == 8:
            assert (row.needed_gbps, row.needed_note) == (None, "within one node")
        else:
            needed = bandwidth_for_efficiency(
                w, links, world_size=row.world_size, target=0.8, strategy=row.strategy
            )
            assert row.needed_gbps == needed and needed is not None
    # the curve: 1, the powers of 2 up to the largest count, each strategy
    assert sorted({c.world_size for c in p.curve}) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert p.notes == ("fsdp2 is modelled as fsdp",)


def test_the_json_form_is_plain_json() -> None:
    p = predict(run_of(num_nodes=1, world_sizes=[1]))  # one size: no validation
    text = json.dumps(p.to_dict(), allow_nan=False)
    back = json.loads(text)
    assert len(back["predictions"]) == 6 and back["validation"] is None
    assert back["links"]["intra"]["kind"] == "measured"
    assert back["workload"]["grad_bytes"]["value"] == GRAD_BYTES


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "fit", "checked"),
    [([1, 2, 4, 8, 16], (1, 2), [4, 8, 16]), ([1, 2, 4], (1, 2), [4]), ([1, 2], (1,), [2])],
)
def test_validation_fits_on_the_smaller_sizes(sizes: list[int], fit: tuple, checked: list) -> None:
    r = run_of(num_nodes=2, world_sizes=sizes)
    p = predict(r)
    assert p.validation is not None and p.validation.fit_sizes == fit
    assert [pt.world_size for pt in p.validation.points] == checked
    # steps made by the model with the true links: the fitted links predict them within 1%
    assert p.validation.max_abs_rel_error < 0.01


def test_validation_errors_are_predicted_against_measured() -> None:
    steps = model_steps([1, 2, 4, 8], gpus_per_node=8)
    steps[8] *= 1.25  # 8 GPUs ran 25% slower than the model says
    r = run_of(num_nodes=1, world_sizes=[1, 2, 4, 8], steps_s=steps)
    p = predict(r)
    assert p.validation is not None and p.intra is not None
    by_size = {pt.world_size: pt for pt in p.validation.points}
    assert by_size[8].rel_error == pytest.approx(-0.2, abs=0.01)
    assert by_size[4].rel_error == pytest.approx(0.0, abs=0.01)
    for pt in p.validation.points:
        assert pt.measured_s == pytest.approx(steps[pt.world_size])
        assert pt.rel_error == (pt.predicted_s - pt.measured_s) / pt.measured_s
    direct = validate(
        p.series.step_s, fit_sizes=[1, 2], grad_bytes=GRAD_BYTES, overlap=p.overlap.value,
        links=Links(gpus_per_node=8, intra=p.intra.fit, inter=p.inter.fit),
    )  # fmt: skip
    assert direct == p.validation


# --- findings -------------------------------------------------------------------------------


def test_the_scaling_finding_states_the_share_and_the_bandwidth_needed() -> None:
    r = run_of(num_nodes=2)
    p = predict(r, target=0.85)
    [scaling, check] = prediction_findings.findings(
        r, analysed(r, Thresholds(prediction_target_efficiency=0.85))
    )
    row = {(x.world_size, x.strategy): x for x in p.rows}
    at256, at1024 = row[256, "ddp"], row[1024, "ddp"]
    assert at256.needed_gbps is not None and at1024.needed_gbps is not None
    assert not at256.beyond_nics and not at1024.beyond_nics
    assert scaling.id == "prediction.scaling" and scaling.message.startswith(
        f"At 256 GPUs this job (1.3b ddp) would spend ~{at256.step.comm_share:.0%} of its step "
        f"in communication (efficiency {at256.step.efficiency:.0%}); with "
        f"{at256.needed_gbps:,.0f} Gb/s per node it stays above 85%."
    )
    assert f"At 1024: ~{at1024.step.comm_share:.0%}" in scaling.message
    # 81% at 1024 GPUs, below the 85% target, on GPUs: warn, with the bandwidth to provision
    assert at1024.step.efficiency < 0.85 and scaling.severity == "warn"
    assert f"at least {at1024.needed_gbps:,.0f} Gb/s" in scaling.fix
    assert len(scaling.evidence["rows"]) == 6
    assert check.id == "prediction.validation" and check.severity == "info"
    errors = [pt.rel_error for pt in p.validation.points]  # type: ignore[union-attr]
    signed = [f"{100 * e:+.1f}%".replace("-", "−") for e in errors]
    assert check.message.startswith(
        f"Scaling model fitted on 1–2 GPUs, predicted 4, 8 and 16: error {', '.join(signed)}"
    )
    # a lower target is met: info
    [easy, _] = prediction_findings.findings(
        r, analysed(r, Thresholds(prediction_target_efficiency=0.7))
    )
    assert easy.severity == "info"
    # the same on CPU workers is stated, never judged
    [cpu, _] = prediction_findings.findings(
        run_of(num_nodes=2, cpu=True), analysed(run_of(num_nodes=2, cpu=True), Thresholds())
    )
    assert cpu.severity == "info" and "At 256 ranks" in cpu.message


def test_a_warning_that_rests_on_an_assumed_link_is_a_note_saying_what_to_measure() -> None:
    """One node: the inter-node link is assumed from the NIC inventory.  What would be a
    warning (below the target at the largest count) is a note, and its fix says to measure
    the link first."""
    r = run_of(num_nodes=1, gpus_per_node=8, nics=8, nic_gbps=100.0)
    p = predict(r, target=0.85)
    assert p.inter.kind == "assumed" and p.rows[-1].step.efficiency < 0.85
    [scaling, _] = prediction_findings.findings(
        r, analysed(r, Thresholds(prediction_target_efficiency=0.85))
    )
    assert scaling.severity == "info"
    assert scaling.fix.startswith(
        "Measure first: the inter-node link this rests on was assumed; run the collectives "
        "and network benchmarks across 2 or more nodes"
    )
    # measured across 2 nodes, the same shortfall warns
    [measured, _] = prediction_findings.findings(
        run_of(num_nodes=2),
        analysed(run_of(num_nodes=2), Thresholds(prediction_target_efficiency=0.85)),
    )
    assert measured.severity == "warn" and not measured.fix.startswith("Measure first")


def test_a_need_beyond_any_nic_is_said_so_and_not_advised() -> None:
    r = run_of(num_nodes=2)
    p = predict(r)  # the 90% target: 256 and 1024 GPUs need more than eight 800G NICs
    row = {(x.world_size, x.strategy): x for x in p.rows}
    at256, at1024 = row[256, "ddp"], row[1024, "ddp"]
    assert at256.needed_gbps is not None and at256.needed_gbps > NIC_CEILING_GBPS
    assert at256.beyond_nics and at1024.beyond_nics
    [scaling, _] = prediction_findings.findings(r, analysed(r, Thresholds()))
    assert (
        f"it would need {at256.needed_gbps:,.0f} Gb/s per node to stay above 90%, beyond any "
        "NIC today (8 x 800 Gb/s = 6,400)" in scaling.message
    )
    assert "at least" not in scaling.fix and scaling.fix.startswith("No NIC speed reaches it")
    assert "advice" not in scaling.evidence
    # the table marks them
    grid = predictions_grid(p)
    cells = {(c[0], c[1]): c[-1] for c in grid.rows}
    assert cells["256", "ddp"] == f"{at256.needed_gbps:,.0f} (beyond NICs)"
    assert "beyond NICs: more than 6,400 Gb/s per node" in grid.title


def test_findings_only_when_training_and_collectives_ran() -> None:
    r = run_of(num_nodes=1, collectives=False)
    r.run.benchmarks = ["training", "attribution"]
    assert not applies(r) and prediction_findings.findings(r, analysed(r, Thresholds())) == []
    ids = [f.id for f in analyze(run_of(num_nodes=1), Thresholds())]
    assert ids.count("prediction.scaling") == 1 and ids.count("prediction.validation") == 1
    # tp: no prediction, said in one finding
    [why] = prediction_findings.findings(
        run_of(num_nodes=1, strategy="tp"),
        analysed(run_of(num_nodes=1, strategy="tp"), Thresholds()),
    )
    assert why.severity == "info" and "No scaling prediction: strategy tp" in why.message
    # one GPU: the check waits
    one = run_of(num_nodes=1, gpus_per_node=1, collectives=False)
    [_, waits] = prediction_findings.findings(one, analysed(one, Thresholds()))
    assert "the 1→2 check waits for two GPUs" in waits.message


def test_the_target_is_a_threshold_of_at_most_one() -> None:
    assert Thresholds().prediction_target_efficiency == 0.9
    with pytest.raises(ValueError, match="at most 1"):
        Thresholds(prediction_target_efficiency=1.2)


def test_node_bandwidth_needed_is_a_node_figure() -> None:
    """What the rows say in Gb/s per node puts the efficiency at the target when used as
    the inter-node link."""
    r = run_of(num_nodes=2)
    p = predict(r, gpu_counts=[256])
    row = p.rows[0]
    assert row.needed_gbps is not None and p.intra is not None
    beta = beta_for_node_gbps(row.needed_gbps, gpus_per_node=8)
    assert node_gbps(beta, gpus_per_node=8) == pytest.approx(row.needed_gbps)
    again = predict(r, gpu_counts=[256], nic_gbps=row.needed_gbps, strategies=["ddp"])
    assert again.rows[0].step.efficiency == pytest.approx(0.9, abs=1e-6)
    assert math.isfinite(again.rows[0].step.step_s)
