"""A model card (``README.md``) for a trained checkpoint: what it is, how it was trained, how to use it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .configuration_cse import PoolingConfig
from .modeling_cse import CSEModel
from .objectives import AuxiliaryLoss, ContrastiveObjective
from .sentence_transformers_files import SENTENCE_TRANSFORMERS_POOLERS
from .training_args import CSETrainingArguments

_TRANSFORMERS_POOLING_CODE = {
    "cls_before_pooler": "embeddings = outputs.last_hidden_state[:, 0]",
    "cls": "embeddings = outputs.last_hidden_state[:, 0]  # the MLP head was used in training only",
    "avg": (
        "mask = batch['attention_mask'].unsqueeze(-1).float()\n"
        "embeddings = (outputs.last_hidden_state * mask).sum(1) / mask.sum(1)"
    ),
    "avg_first_last": (
        "mask = batch['attention_mask'].unsqueeze(-1).float()\n"
        "hidden = (outputs.hidden_states[1] + outputs.hidden_states[-1]) / 2\n"
        "embeddings = (hidden * mask).sum(1) / mask.sum(1)"
    ),
    "avg_top2": (
        "mask = batch['attention_mask'].unsqueeze(-1).float()\n"
        "hidden = (outputs.hidden_states[-2] + outputs.hidden_states[-1]) / 2\n"
        "embeddings = (hidden * mask).sum(1) / mask.sum(1)"
    ),
    "mask": "embeddings = outputs.last_hidden_state[batch['input_ids'] == tokenizer.mask_token_id]",
}


def _transformers_snippet(repo_id: str, pooling: PoolingConfig) -> str:
    if pooling.uses_mlp_at_inference:
        return "This checkpoint applies its MLP head at inference; use sentence-transformers or hf_cse below."
    if pooling.pooler == "mask":
        template = pooling.prompt_template.replace("{sentence}", "{}").replace("[MASK]", "{mask}")
        text = f"[{template!r}.format(s, mask=tokenizer.mask_token) for s in sentences]"
        note = "\n# Sentences too long for the model must be shortened before templating: the template must survive."
    else:
        text, note = "sentences", ""
    hidden = ", output_hidden_states=True" if pooling.pooler in ("avg_first_last", "avg_top2") else ""
    normalize = "\nembeddings = torch.nn.functional.normalize(embeddings, dim=-1)" if pooling.normalize else ""
    return f"""```python
import torch
from transformers import AutoModel, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{repo_id}")
model = AutoModel.from_pretrained("{repo_id}").eval()
sentences = ["A man is playing a guitar.", "Someone plays an instrument."]{note}
batch = tokenizer({text}, padding=True, truncation=True, return_tensors="pt")
with torch.no_grad():
    outputs = model(**batch{hidden})
{_TRANSFORMERS_POOLING_CODE[pooling.pooler]}{normalize}
```"""


def render_model_card(
    model: CSEModel,
    args: CSETrainingArguments,
    objective: ContrastiveObjective,
    log_history: list[dict[str, Any]],
    auxiliary_losses: dict[str, tuple[AuxiliaryLoss, float]] | None = None,
    model_name: str | None = None,
    finetuned_from: str | None = None,
    dataset: str | None = None,
) -> str:
    """The card's Markdown, YAML front matter included."""
    pooling = model.pooling
    repo_id = model_name or args.hub_model_id or Path(args.output_dir).name
    base_model = finetuned_from or getattr(model.config, "_name_or_path", None) or "unknown"
    evals = [entry for entry in log_history if any(key.endswith("_spearman") for key in entry)]
    front_matter = ["---", "library_name: transformers", "pipeline_tag: sentence-similarity"]
    front_matter += ["tags:", "- hf_cse", "- sentence-similarity", "- feature-extraction", f"- {objective.name}"]
    if pooling.pooler in SENTENCE_TRANSFORMERS_POOLERS:
        front_matter.append("- sentence-transformers")
    if not Path(base_model).exists():  # a local path means nothing to Hub readers
        front_matter.append(f"base_model: {base_model}")
    front_matter.append("---")
    auxiliary_losses = auxiliary_losses or {}
    hparams = {"objective": objective.name, **objective.get_config_dict()}
    if auxiliary_losses:
        hparams["auxiliary_losses"] = {
            name: {"weight": weight, **term.get_config_dict()} for name, (term, weight) in auxiliary_losses.items()
        }
    if args.view_augmentation != "dropout":
        hparams["view_augmentation"] = {"name": args.view_augmentation, **args.view_augmentation_kwargs}
    training = {
        "train data": dataset or "unknown",
        "max_seq_length": args.max_seq_length,
        "per_device_train_batch_size": args.per_device_train_batch_size,
        "learning_rate": args.learning_rate,
        "num_train_epochs": args.num_train_epochs,
        "max_steps": args.max_steps,
        "seed": args.seed,
    }
    if evals:
        rows = ["| step | " + " | ".join(k for k in evals[0] if k.endswith("_spearman")) + " |"]
        rows.append("|" + "---|" * (len(rows[0].split("|")) - 2))
        for entry in evals:
            rows.append(
                f"| {entry.get('step', '')} | "
                + " | ".join(f"{entry[k]:.2f}" for k in entry if k.endswith("_spearman"))
                + " |"
            )
        evaluation = "Spearman ×100 of cosine similarity on the dev sets during training:\n\n" + "\n".join(rows)
    else:
        evaluation = "No evaluation was run during training."
    st_usage = (
        f"""```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{repo_id}")
embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])
```"""
        if pooling.pooler in SENTENCE_TRANSFORMERS_POOLERS
        else f"sentence-transformers cannot express the `{pooling.pooler}` pooler; use hf_cse or transformers."
    )
    citations = [objective.citation, *(term.citation for term, _ in auxiliary_losses.values())]
    citation = "\n\n".join(dict.fromkeys(c for c in citations if c))
    return (
        "\n".join(front_matter)
        + f"""

# {repo_id}

A sentence encoder trained with hf_cse from `{base_model}` with the
unsupervised contrastive objective `{objective.name}`. Sentence embedding: the `{pooling.pooler}` pooler
(settings in `config.json` under `hf_cse`); compare sentences by cosine similarity.

## Training

Objective hyper-parameters:

```json
{json.dumps(hparams, indent=2)}
```

Pooling: `{json.dumps(pooling.to_dict())}`

Training settings: `{json.dumps(training)}`

## Evaluation

{evaluation}

## Usage

With transformers (no custom code needed):

{_transformers_snippet(repo_id, pooling)}

With sentence-transformers:

{st_usage}

With hf_cse:

```python
from hf_cse import SentenceEncoder

encoder = SentenceEncoder.from_pretrained("{repo_id}")
embeddings = encoder.encode(["A man is playing a guitar.", "Someone plays an instrument."])
```

## Citation

```bibtex
{citation}
```
"""
    )


def write_model_card(directory: Path, **kwargs: Any) -> Path:
    """Render the card and write it to ``directory/README.md``; return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "README.md"
    path.write_text(render_model_card(**kwargs), encoding="utf-8")
    return path
