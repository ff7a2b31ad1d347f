"""hf_cse's objectives as sentence-transformers losses: DCLR, Focal-InfoNCE, DCL or SimCSE in a
``SentenceTransformerTrainer``, alone or inside ``MatryoshkaLoss``.

::

    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from hf_cse.integrations import CSELoss

    model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
    loss = CSELoss(model, "focal_infonce", temperature=0.1)
    SentenceTransformerTrainer(model=model, train_dataset=dataset, loss=loss).train()

The objective is built by name from hf_cse's registry (:func:`hf_cse.objectives.build_objective`) and called with
a :class:`~hf_cse.objectives.contract.StepInputs` of the batch's embeddings, exactly as hf_cse's own trainer calls
it; nothing of the objective is reimplemented here. sentence-transformers stays an optional dependency: importing
``hf_cse`` never imports this module.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from ..distributed import gather_no_grad, gather_with_grad, world_size
from ..errors import UsageError, echo
from ..modeling.backbone import check_views_differ
from ..objectives import OBJECTIVES, build_objective
from ..objectives.base import normalized
from ..objectives.contract import StepInputs, check_output

try:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import batch_to_device
except ImportError as err:  # an optional dependency: say how to get it, in one line
    raise ImportError(
        "hf_cse.integrations.sentence_transformers needs sentence-transformers: pip install sentence-transformers"
    ) from err

SINGLE_COLUMN_REMEDY = (
    'Load the model with dropout (SentenceTransformer(..., config_kwargs={"attention_dropout": 0.1}); LLM2Vec uses '
    "0.3 on decoders), or give CSELoss two columns, (anchor, positive)."
)
"""How a one-column dataset gets dropout views that differ, said when they do not."""

COMPLEMENTARY_INPUT = "complementary_similarities"
"""The input provider (:mod:`hf_cse.inputs.complementary`) whose value, a frozen model's ``[B, B]`` similarities,
:class:`CSELoss` computes per batch from ``complementary_model``."""


def supported_objectives() -> list[str]:
    """The registered objectives :class:`CSELoss` can run: those whose instance with default hyper-parameters
    needs only the batch's embeddings (and, for DCLR, a complementary model): no pooler of hf_cse's own, no
    auxiliary terms, one positive view, no other input provider. What an objective needs is declared by its
    instance (``required_inputs`` may depend on its hyper-parameters), so each is built; one that cannot be built
    without arguments is left out."""
    names = []
    for name in OBJECTIVES:
        try:
            objective = build_objective(name)
        except (TypeError, ValueError):  # a user's objective with required arguments
            continue
        if unsupported_reason(objective) is None:
            names.append(name)
    return sorted(names)


class CSELoss(nn.Module):
    """An hf_cse objective as a sentence-transformers loss.

    Datasets (columns in this order; labels, if any, are ignored):

    +-----------------------------------------------+--------------------------------------------------------------+
    | Inputs                                        | Positives                                                    |
    +===============================================+==============================================================+
    | ``(anchor, positive)`` pairs                  | the second column; negatives: the other rows' positives      |
    +-----------------------------------------------+--------------------------------------------------------------+
    | single sentences (one column)                 | the sentence encoded again: a second dropout mask, as in     |
    |                                               | unsupervised SimCSE (the model must be in train mode)        |
    +-----------------------------------------------+--------------------------------------------------------------+

    Each column is one forward pass of ``model`` (``[B, D]`` sentence embeddings ``z1``, ``z2``), the same calls
    ``MultipleNegativesRankingLoss`` makes, so ``MatryoshkaLoss(model, CSELoss(...), dims)`` works: it truncates
    these embeddings per dimension and calls this loss once per dimension. ``CSELoss(model, "simcse",
    temperature=0.05)`` is ``MultipleNegativesRankingLoss(model, scale=20)`` (value and gradients).

    Objectives that need more than the batch's embeddings:

    - DCLR's instance weighting (``weighting="complementary"``, its default) needs a frozen model's ``[B, B]``
      similarities: pass ``complementary_model``; it encodes each batch under ``torch.no_grad`` (one extra forward
      pass of it per column, once per batch even inside ``MatryoshkaLoss``). hf_cse's trainer can instead cache the
      corpus's complementary embeddings once; a sentence-transformers loss sees only token ids, so it cannot.
      ``weighting="self"`` or ``"none"`` need no second model.
    - Objectives needing hf_cse's own pooler (OssCSE: ``mask``), auxiliary terms (OssCSE's margin and recall),
      other input providers (negation pairs, a second prompt template) or several positive views are refused at
      construction with one line naming what works (:func:`supported_objectives`).

    Several processes (``accelerate launch``/``torchrun`` with the trainer's DDP): with ``gather_across_devices=True``
    every process contrasts its anchors with the whole global batch, as hf_cse's trainer does (``gather_negatives``):
    the embeddings are gathered with their gradients, the loss is averaged over this process's rows, and DDP's
    averaging of the gradients gives one process's gradients over the global batch (DCLR's noise is drawn once and
    shared; its complementary similarities cover the global batch). Off by default, as in sentence-transformers'
    ``MultipleNegativesRankingLoss``: each process then contrasts its own batch only.

    Diagnostics (``ObjectiveOutput.logs``, e.g. DCLR's ``masked_negative_share``) cannot reach the trainer's logs:
    sentence-transformers' only hook, a loss returning a dict, adds every value of the dict into the optimized loss,
    and ``MatryoshkaLoss`` needs a tensor. The last call's are kept in :attr:`last_logs`.

    Args:
        model: the ``SentenceTransformer`` being trained.
        objective: a registered objective name (``"simcse"``, ``"dcl"``, ``"dclr"``, ``"focal_infonce"``, or one
            registered by the user), or an objective instance: a ``ContrastiveObjective``, a
            ``MatryoshkaObjective``, or any module of the contract (``forward(StepInputs) -> ObjectiveOutput``;
            its class name stands for a registry name).
        complementary_model: DCLR's frozen complementary model (a different ``SentenceTransformer``, e.g. the
            starting checkpoint loaded again); frozen (``requires_grad_(False)``) and kept in eval mode. Its own
            tokenizer reads the decoded batch when its vocabulary or ``max_seq_length`` differs from ``model``'s.
            Defaults to ``None``.
        gather_across_devices: contrast with every process's batch (see above). Defaults to ``False``.
        **hyperparameters: the objective's hyper-parameters (``temperature=0.05``, DCLR's ``phi``, ``k``, ...);
            only with an objective name.

    Raises:
        UsageError: a model that is no module (a path, say), an unknown objective or hyper-parameter,
            hyper-parameters given with an objective instance, an objective this loss cannot run, a missing,
            unneeded or non-frozen ``complementary_model``.

    Attributes:
        objective: the hf_cse objective (an ``nn.Module``).
        last_logs: the objective's diagnostics of the last call, detached scalars by name.
    """

    def __init__(
        self,
        model: SentenceTransformer,
        objective: str | nn.Module,
        complementary_model: SentenceTransformer | None = None,
        gather_across_devices: bool = False,
        **hyperparameters: Any,
    ) -> None:
        super().__init__()
        for name, value in (("model", model), ("complementary_model", complementary_model)):
            if value is not None and not isinstance(value, nn.Module):
                raise UsageError(
                    f"CSELoss's {name} is a SentenceTransformer, got {type(value).__name__} {echo(value)}: load it "
                    f"first (SentenceTransformer({echo(value) if isinstance(value, str) else 'path'}))."
                )
        if isinstance(objective, str):
            objective = build_objective(objective, **hyperparameters)
        elif hyperparameters:
            raise UsageError(
                f"CSELoss got hyper-parameters {sorted(hyperparameters)} with an objective instance; pass them to "
                "the objective, or give its name: CSELoss(model, 'dclr', phi=0.85)."
            )
        check_supported(objective, complementary_model is not None)
        if complementary_model is model:
            raise UsageError(
                "complementary_model is the model being trained; DCLR's complementary model is frozen: load the "
                "starting checkpoint again (SentenceTransformer(path)), or use weighting='self'."
            )
        self.model = model
        self.objective = objective
        self.complementary_model = complementary_model
        self.gather_across_devices = gather_across_devices
        self.last_logs: dict[str, Tensor] = {}
        self._check_views = True
        """Whether the next training step with one column still has to check that its two dropout views differ."""
        # The last batch's complementary similarities, keyed by its input_ids tensors (held, so no other tensor
        # can take their identity): MatryoshkaLoss calls this loss once per dimension with the same features.
        self._complementary_cache: tuple[tuple[Tensor, ...], Tensor] | None = None
        if complementary_model is not None:
            complementary_model.requires_grad_(False).eval()
            self.retokenize = must_retokenize(model, complementary_model)

    def train(self, mode: bool = True) -> CSELoss:
        """As ``nn.Module.train``, except that the complementary model stays in eval mode: it is frozen, and
        dropout would make its similarities, which decide which negatives are masked, random."""
        super().train(mode)
        if self.complementary_model is not None:
            self.complementary_model.eval()
        return self

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        """The objective's loss, a float32 scalar (float64 for a float64 model).

        Args:
            sentence_features: one or two token batches, each ``{"input_ids": [B, L], "attention_mask": [B, L],
                ...}``, as ``SentenceTransformerTrainer`` collates a dataset's columns.
            labels: ignored (contrastive objectives need none); accepted because the trainer passes them.
        """
        features = list(sentence_features)
        if len(features) not in (1, 2):
            raise UsageError(
                f"CSELoss takes (anchor, positive) pairs or single sentences; the dataset has {len(features)} text "
                "columns. Select two (dataset.select_columns(['anchor', 'positive'])) or one."
            )
        # One column: the sentence is its own positive, encoded again with fresh dropout masks. The copy is taken
        # before either call, since a SentenceTransformer writes its outputs into the features dict it is given.
        views = features if len(features) == 2 else [features[0], dict(features[0])]
        anchors, positives = (self.model(view)["sentence_embedding"] for view in views)
        if self._check_views and len(features) == 1 and self.training:
            self._check_views = False  # once, at the first step: one read of the device
            transformer = next((m.auto_model for m in self.model.children() if hasattr(m, "auto_model")), self.model)
            check_views_differ([anchors, positives], transformer, objective_name(self.objective), SINGLE_COLUMN_REMEDY)
        values: dict[str, Any] = {}
        if self.gather_across_devices and world_size() > 1:
            (anchors, positives), values["anchor_rows"] = gather_with_grad([anchors, positives])
        if self.complementary_model is not None:
            values["complementary_sim"] = self.complementary_similarities(features).to(anchors.device)
        output = self.objective(StepInputs(anchors, positives, **values))
        output = check_output(output, f"objective {objective_name(self.objective)!r}")
        self.last_logs = {name: value.detach() for name, value in output.logs.items()}
        return output.loss

    @torch.no_grad()
    def complementary_similarities(self, features: list[dict[str, Tensor]]) -> Tensor:
        """``[B, B]`` cosine similarities under the complementary model (float32, on its device) of row ``i`` of
        the first column and row ``j`` of the last: the anchors and the sentences their negatives are (one column:
        the sentences with themselves, as hf_cse's trainer gives them); over the global batch with
        ``gather_across_devices``."""
        key = tuple(column.get("input_ids") for column in features)
        cached = self._complementary_cache
        if cached is not None and len(cached[0]) == len(key) and all(map(operator.is_, cached[0], key)):
            return cached[1]
        embeddings = [self._complementary_embeddings(column) for column in features]
        if self.gather_across_devices:
            embeddings = [gather_no_grad(rows) for rows in embeddings]
        with torch.autocast(embeddings[0].device.type, enabled=False):
            similarities = normalized(embeddings[0]) @ normalized(embeddings[-1]).T
        if all(ids is not None for ids in key):
            self._complementary_cache = (key, similarities)
        return similarities

    def _complementary_embeddings(self, column: dict[str, Tensor]) -> Tensor:
        """The complementary model's ``[B, D_c]`` embeddings of one column's sentences."""
        complementary = self.complementary_model
        if self.retokenize:
            texts = self.model.tokenizer.batch_decode(column["input_ids"], skip_special_tokens=True)
            preprocess = getattr(complementary, "preprocess", None) or complementary.tokenize  # ST < 6: tokenize
            column = preprocess(texts)
        else:  # only the token inputs: the dict may hold the trained model's outputs already
            column = {k: v for k, v in column.items() if k not in ("token_embeddings", "sentence_embedding")}
        return complementary(batch_to_device(column, complementary.device))["sentence_embedding"]

    @property
    def citation(self) -> str:
        """The BibTeX of the objective's paper and of its loss form's (``objective.citations``), which
        sentence-transformers' model card lists under ``CSELoss``."""
        return "\n\n".join(getattr(self.objective, "citations", ()))

    def get_config_dict(self) -> dict[str, Any]:
        """The objective's name and hyper-parameters (and the complementary model), for the model card."""
        settings = getattr(self.objective, "get_config_dict", dict)()
        config = {"objective": objective_name(self.objective), **settings}
        if self.gather_across_devices:
            config["gather_across_devices"] = True
        if self.complementary_model is not None:
            config["complementary_model"] = self.complementary_model
        return config


def unsupported_reason(objective: nn.Module) -> str | None:
    """Why ``objective`` needs what a sentence-transformers batch cannot give (see :class:`CSELoss`), in words
    that end a sentence; ``None`` when it runs from the batch's embeddings (and a complementary model)."""
    name = objective_name(objective)
    others = [p for p in getattr(objective, "required_inputs", ()) if p != COMPLEMENTARY_INPUT]
    if getattr(objective, "required_pooler", None) is not None:
        return (
            f"Objective {name!r} needs hf_cse's {objective.required_pooler!r} pooler, which a SentenceTransformer "
            f"does not have (train it with run_unsup.py --objective {name})"
        )
    if getattr(objective, "default_auxiliary_losses", None):
        terms = ", ".join(objective.default_auxiliary_losses)
        return f"Objective {name!r} adds auxiliary terms ({terms}) that need hf_cse's trainer"
    if getattr(objective, "num_positive_views", 1) != 1:
        return f"Objective {name!r} takes {objective.num_positive_views} positive views per anchor"
    if others:
        return (
            f"Objective {name!r} needs the step inputs of {others}, which a sentence-transformers batch (token ids "
            "only) cannot give"
        )
    if getattr(objective, "momentum_queue", None) is not None:  # the run builds its provider: not in required_inputs
        return (
            f"Objective {name!r} with momentum_queue_size needs hf_cse's momentum queue of past embeddings, which "
            "only hf_cse's trainer keeps (drop momentum_queue_size, or train with run_unsup.py)"
        )
    return None


def check_supported(objective: nn.Module, has_complementary_model: bool) -> None:
    """Raise one line when ``objective`` needs what a sentence-transformers batch cannot give (naming the
    objectives that run), or when ``complementary_model`` is missing or unneeded."""
    name = objective_name(objective)
    reason = unsupported_reason(objective)
    if reason is not None:
        raise UsageError(
            f"{reason}; CSELoss runs objectives computed from the batch's embeddings: "
            f"{', '.join(supported_objectives())} (DCLR's complementary weighting with complementary_model=)."
        )
    needs_complementary = COMPLEMENTARY_INPUT in getattr(objective, "required_inputs", ())
    if needs_complementary and not has_complementary_model:
        raise UsageError(
            f"Objective {name!r} weights negatives with a frozen model's similarities: pass "
            "complementary_model=SentenceTransformer(<starting checkpoint>), or weighting='self' or 'none'."
        )
    if has_complementary_model and not needs_complementary:
        raise UsageError(
            f"Objective {name!r} does not read a complementary model's similarities; leave complementary_model out "
            "(DCLR reads it with weighting='complementary')."
        )


def objective_name(objective: nn.Module) -> str:
    """The registry name of ``objective``; its class name for one never registered (a user's instance)."""
    return getattr(objective, "name", type(objective).__name__)


def must_retokenize(model: SentenceTransformer, complementary_model: SentenceTransformer) -> bool:
    """Whether the complementary model must read the decoded sentences with its own tokenizer: its vocabulary
    differs from the trained model's, or it reads fewer tokens (the trained model's ids would overflow its
    positions). As sentence-transformers' ``GISTEmbedLoss`` decides for its guide model."""
    vocabularies = (model.tokenizer.get_vocab(), complementary_model.tokenizer.get_vocab())
    return vocabularies[0] != vocabularies[1] or complementary_model.max_seq_length < model.max_seq_length
