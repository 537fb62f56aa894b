"""The cross-check against HolisticTraceAnalysis on every fetched job of the public trace
corpus, as tests/unit/test_hta_corpus.py checks the small ones, and on the JSON-array jobs
given to HTA wrapped (about three minutes on 2 cores)."""

from __future__ import annotations

import pytest

from tests.unit.test_hta_corpus import WRAPPED, check_job, job_params
from tests.unit.test_public_traces import Job

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


@pytest.mark.parametrize("job", job_params(lambda _: True))
def test_hta_cross_check_on_every_job(job: Job) -> None:
    check_job(job)


@pytest.mark.parametrize("job", job_params(lambda j: j["folder"] in WRAPPED))
def test_hta_cross_check_on_the_arrays_wrapped(job: Job) -> None:
    check_job(job, wrap=True)
