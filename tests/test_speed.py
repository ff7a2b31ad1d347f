"""Speed options that need no GPU: no host-device synchronization on training steps that do not log, the fused
AdamW default, and ``--torch_compile`` without a recompilation per batch."""

from __future__ import annotations

import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import SENTENCES, training_args
from datasets import Dataset
from transformers import AutoTokenizer, TrainerCallback

from hf_cse import CSEModel, CSETrainer, PoolingConfig

# Every way a tensor's value reaches Python; on a GPU each one waits for the device to finish its queued work.
HOST_READS = ("__bool__", "__float__", "__int__", "__index__", "item", "tolist", "numpy", "cpu", "nonzero")

# The documented minimum per step that does not log, by objective, as {(call, file of the caller)}:
# - transformers' SDPA mask: `padding_mask.all()` decides whether the mask can be dropped (flash kernels), once per
#   encoder forward; not ours to change.
# - DCLR reads the step's sentence indices on the host to look the complementary embeddings up (the cache lives in
#   host memory; uncached, the sentences are tokenized there).
# - OssCSE selects the rows that have a negation and a paraphrase to encode only those (`nonzero`: its size is a
#   shape on the host).
SDPA_MASK = ("__bool__", "masking_utils.py")
ALLOWED = {
    "simcse": {SDPA_MASK},
    "dcl": {SDPA_MASK},
    "focal_infonce": {SDPA_MASK},
    "dclr": {SDPA_MASK, ("cpu", "complementary.py")},
    "osscse": {SDPA_MASK, ("nonzero", "negation_pairs.py")},
}


class HostReadCounter(TrainerCallback):
    """Counts host reads of tensors per optimizer step, from one step's start to the next's (so the logging that
    follows a step counts towards it), keyed by the call and the file of its caller."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.reads: dict[int, Counter[tuple[str, str]]] = defaultdict(Counter)

    def patch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in HOST_READS:
            monkeypatch.setattr(torch.Tensor, name, self._counting(name, getattr(torch.Tensor, name)))
        original_getitem = torch.Tensor.__getitem__

        def getitem(tensor: torch.Tensor, index: Any) -> Any:
            # Boolean-mask indexing sizes its result on the host, like nonzero.
            parts = index if isinstance(index, tuple) else (index,)
            if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                self._count("bool_index")
            return original_getitem(tensor, index)

        monkeypatch.setattr(torch.Tensor, "__getitem__", getitem)

    def _counting(self, name: str, method: Any) -> Any:
        def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            self._count(name)
            return method(tensor, *args, **kwargs)

        return counted

    def _count(self, name: str) -> None:
        if self.step is not None:
            caller = traceback.extract_stack(limit=3)[0]  # the frame that called the tensor method
            self.reads[self.step][(name, Path(caller.filename).name)] += 1

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.step = state.global_step + 1

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.step = None


def count_host_reads(
    encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objective: str, **overrides: object
) -> dict[int, Counter[tuple[str, str]]]:
    """Train 4 steps logging at step 3 only; the host reads of each step."""
    pooler = "mask" if objective == "osscse" else "cls"
    extra: dict[str, object] = {}
    if objective == "osscse":
        extra = {"input_kwargs": {"negations_and_paraphrases": {"negation_backend": "rules"}}}
    if objective == "dclr":
        extra = {
            "objective_kwargs": {"phi": 0.8, "phi_mode": "quantile"},
            "input_kwargs": {"complementary_similarities": {"cache": True}},
        }
    torch.manual_seed(0)
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler=pooler)),
        args=training_args(tmp_path, objective=objective, max_steps=4, logging_steps=3, **{**extra, **overrides}),
        train_dataset=Dataset.from_dict({"text": SENTENCES * 2}),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
    )
    counter = HostReadCounter()
    trainer.add_callback(counter)
    counter.patch(monkeypatch)
    trainer.train()
    monkeypatch.undo()
    return counter.reads


@pytest.mark.parametrize("objective", sorted(ALLOWED))
def test_steps_that_do_not_log_read_no_tensor_on_the_host(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objective: str
) -> None:
    reads = count_host_reads(tiny_encoder_dir, tmp_path, monkeypatch, objective)
    for step in (1, 2):  # steps 1 and 2 neither log, save nor end training
        assert set(reads[step]) <= ALLOWED[objective], f"step {step}: {dict(reads[step])}"
        assert reads[step][SDPA_MASK] <= 2  # one per encoder forward at most (OssCSE: views, then pairs)
    # The counter sees reads: the logging step (3) turns the accumulated losses into numbers, on the host.
    assert reads[3][("item", "trainer.py")] >= 1
    assert sum(reads[3].values()) > sum(reads[1].values())


def test_the_default_optimizer_is_fused_adamw_and_an_explicit_optim_is_kept(tmp_path: Path) -> None:
    """transformers >= 5 with torch >= 2.8 defaults ``optim`` to ``adamw_torch_fused`` on every device (fused AdamW
    runs on CPU too), so hf_cse sets nothing: this guards that default and the optimizer the trainer builds."""
    assert training_args(tmp_path).optim == "adamw_torch_fused"
    assert training_args(tmp_path, optim="adamw_torch").optim == "adamw_torch"
    from transformers import Trainer

    optimizer_class, kwargs = Trainer.get_optimizer_cls_and_kwargs(training_args(tmp_path))
    assert optimizer_class is torch.optim.AdamW and kwargs.get("fused") is True
