"""A run's id: unique even where runs are written to folders of one name."""

from __future__ import annotations

from pathlib import Path

from clusterbench.pipeline.spec import default_run_dir, run_id_for


def test_a_folder_of_clusterbench_s_own_keeps_its_name() -> None:
    folder = default_run_dir()
    assert run_id_for(folder, "2026-12-06T07:15:00+00:00") == folder.name
    assert run_id_for("runs/20261206T071500Z", "2026-12-07T00:00:00+00:00") == "20261206T071500Z"


def test_runs_written_to_one_folder_name_get_ids_of_their_own() -> None:
    weekly = Path("/scratch/cb/run")
    first = run_id_for(weekly, "2026-11-29T07:15:00+00:00")
    second = run_id_for(weekly, "2026-12-06T08:15:00+01:00")  # the same folder a week later
    assert first == "run-20261129T071500Z"
    assert second == "run-20261206T071500Z"  # the start in UTC
    assert first != second


def test_a_foreign_results_json_is_refused_in_words() -> None:
    from pydantic import ValidationError

    from clusterbench.schema import Results, invalid_results_reason

    def reason(data: object) -> str:
        try:
            Results.model_validate(data)
        except ValidationError as exc:
            return invalid_results_reason(data, exc)
        raise AssertionError("accepted")

    assert reason([1, 2]) == "a JSON list, not an object"
    assert reason({"hello": 1}) == "written by another program: no clusterbench 'tool' entry"
    assert reason({"tool": {"name": "nccl-tests"}}).startswith("written by another program")
    ours = {"schema_version": 1, "tool": {"name": "clusterbench", "version": "0"}, "run": {}}
    said = reason(ours)
    assert said.startswith("run.id: field required; ") and "more problem(s)" in said
