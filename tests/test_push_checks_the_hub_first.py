"""``python -m hf_cse.push RUN --sts_dir DIR``: the Hub (reachable, the token, the right to write there) is asked
before the STS evaluation, which takes minutes on a CPU, so that an offline machine or a refused token fails in
seconds."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from common.commands import run_unsup_argv
from conftest import run_unsup, shows_finished_encoding_bar, write_senteval_dir

from hf_cse.commands import push
from hf_cse.errors import HubRequestError, HubUnreachableError
from hf_cse.evaluation import checkpoint_scores
from hf_cse.export.model_card import STS_RESULTS_FILE


@pytest.fixture
def finished_run(tiny_encoder_dir: Path, tmp_path: Path) -> SimpleNamespace:
    run_unsup.main(run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, save_strategy="no"))
    return SimpleNamespace(out=tmp_path / "out", sts_dir=write_senteval_dir(tmp_path / "sts"))


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What happened, in order: ``"evaluate"`` for each STS evaluation (which runs as it would). The push imports
    ``evaluate_run`` from its module as it runs (its --help imports no torch), so the module's is replaced."""
    events: list[str] = []
    evaluate_run = checkpoint_scores.evaluate_run

    def recorded(*args: Any, **kwargs: Any) -> dict[str, Any]:
        events.append("evaluate")
        return evaluate_run(*args, **kwargs)

    monkeypatch.setattr(checkpoint_scores, "evaluate_run", recorded)
    return events


class RecordingHub:
    """``HfApi``'s ``create_repo`` / ``upload_folder``, recorded into the shared event list; ``create_repo`` raises
    ``refusal`` when one is given."""

    def __init__(self, events: list[str], refusal: Exception | None = None) -> None:
        self.events, self.refusal = events, refusal

    def create_repo(self, repo_id: str, **kwargs: Any) -> SimpleNamespace:
        self.events.append("create_repo")
        if self.refusal is not None:
            raise self.refusal
        return SimpleNamespace(repo_id=repo_id)

    def upload_folder(self, **kwargs: Any) -> SimpleNamespace:
        self.events.append("upload_folder")
        return SimpleNamespace(commit_url="https://huggingface.co/someone/x/commit/0")


def refused(status: int) -> Exception:
    """huggingface_hub's own error for a response with ``status``."""
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    request = httpx2.Request("POST", "https://huggingface.co/api/repos/create")
    try:
        hf_raise_for_status(httpx2.Response(status, request=request, json={"error": "Invalid credentials"}))
    except Exception as err:  # whatever it raises is the error under test
        return err
    raise AssertionError(f"status {status} raised nothing")


def test_an_unreachable_hub_is_said_before_the_evaluation(
    finished_run: SimpleNamespace, evaluations: list[str]
) -> None:
    argv = [str(finished_run.out), "--repo_id", "someone/x", "--sts_dir", str(finished_run.sts_dir)]
    # HF_HUB_OFFLINE=1 (set for every test): huggingface_hub's HfApi refuses to connect, as without a network.
    with pytest.raises(HubUnreachableError, match="Cannot reach the Hugging Face Hub to push 'someone/x'"):
        push.main(argv)
    assert evaluations == [] and not (finished_run.out / STS_RESULTS_FILE).exists()


def test_a_refused_token_is_said_before_the_evaluation(finished_run: SimpleNamespace, evaluations: list[str]) -> None:
    argv = [str(finished_run.out), "--repo_id", "someone/x", "--sts_dir", str(finished_run.sts_dir)]
    with pytest.raises(HubRequestError, match="Check the token"):
        push.main(argv, api=RecordingHub(evaluations, refused(401)))
    assert evaluations == ["create_repo"]


def test_the_repository_is_created_first_then_the_run_is_scored_and_uploaded(
    finished_run: SimpleNamespace, evaluations: list[str]
) -> None:
    argv = [str(finished_run.out), "--repo_id", "someone/x", "--sts_dir", str(finished_run.sts_dir)]
    outcome = push.main(argv, api=RecordingHub(evaluations))
    assert evaluations == ["create_repo", "evaluate", "upload_folder"]
    assert (finished_run.out / STS_RESULTS_FILE).is_file() and outcome["sts_results"] is not None
    assert STS_RESULTS_FILE in outcome["files"]


def test_a_dry_run_asks_nothing_of_the_hub(finished_run: SimpleNamespace, evaluations: list[str]) -> None:
    argv = [str(finished_run.out), "--repo_id", "someone/x", "--sts_dir", str(finished_run.sts_dir), "--dry_run"]
    push.main(argv, api=RecordingHub(evaluations, refused(401)))
    assert evaluations == ["evaluate"]


def test_the_scoring_shows_its_progress(
    finished_run: SimpleNamespace, evaluations: list[str], capsys: pytest.CaptureFixture
) -> None:
    """Issue 56 item 2: the STS scoring before the upload took minutes with nothing on the screen; it shows the
    encoding bar that ``python -m hf_cse.eval`` shows, one bar over the distinct sentences of every task."""
    capsys.readouterr()  # the training's own output
    argv = [str(finished_run.out), "--repo_id", "someone/x", "--sts_dir", str(finished_run.sts_dir), "--dry_run"]
    num_sentences = push.main(argv)["sts_results"]["details"]["settings"]["num_unique_sentences"]
    err = capsys.readouterr().err
    assert evaluations == ["evaluate"]
    assert shows_finished_encoding_bar(err, num_sentences), err
    # the Python API's way out
    checkpoint_scores.evaluate_run(finished_run.out, finished_run.sts_dir, show_progress_bar=False)
    assert "Encoding" not in capsys.readouterr().err


class BarRecordingHub(RecordingHub):
    """Records whether huggingface_hub's progress bars (the upload's) are hidden while ``upload_folder`` runs."""

    def upload_folder(self, **kwargs: Any) -> SimpleNamespace:
        from huggingface_hub.utils import are_progress_bars_disabled

        self.events.append(f"upload_folder, bars {'hidden' if are_progress_bars_disabled() else 'shown'}")
        return SimpleNamespace(commit_url="https://huggingface.co/someone/x/commit/0")


@pytest.mark.parametrize(("flag", "bars"), [([], "shown"), (["--disable_tqdm"], "hidden")])
def test_disable_tqdm_hides_the_scoring_and_upload_bars_for_the_push_only(
    finished_run: SimpleNamespace,
    evaluations: list[str],
    capsys: pytest.CaptureFixture,
    flag: list[str],
    bars: str,
) -> None:
    """As the Trainer's ``--disable_tqdm`` hides the training's bars; huggingface_hub's bars are on again after."""
    from huggingface_hub.utils import are_progress_bars_disabled

    capsys.readouterr()
    argv = [str(finished_run.out), "--repo_id", "someone/x", "--sts_dir", str(finished_run.sts_dir), *flag]
    push.main(argv, api=BarRecordingHub(evaluations))
    assert evaluations == ["create_repo", "evaluate", f"upload_folder, bars {bars}"]
    assert ("Encoding: 100%" in capsys.readouterr().err) == (bars == "shown")
    assert not are_progress_bars_disabled()
