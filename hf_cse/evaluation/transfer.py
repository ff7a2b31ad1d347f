"""SentEval-style transfer tasks: logistic regression on frozen sentence embeddings.

Seven classification tasks, read from SentEval's ``data/downstream`` layout under ``data_dir``::

    MR/rt-polarity.{pos,neg}              one sentence a line (latin-1); pos = 1, neg = 0      10-fold CV
    CR/custrev.{pos,neg}                  as MR                                                 10-fold CV
    SUBJ/subj.{objective,subjective}      as MR; objective = 1, subjective = 0                 10-fold CV
    MPQA/mpqa.{pos,neg}                   as MR                                                 10-fold CV
    SST/binary/sentiment-{train,dev,test} "sentence<TAB>0|1" (utf-8)                            train/dev/test
    TREC/train_5500.label, TREC_10.label  "DESC:manner How did serfdom develop ?" (latin-1)    train/test
    MRPC/msr_paraphrase_{train,test}.txt  TSV with a header row: Quality, #1 ID, #2 ID,          train/test
                                          #1 String, #2 String (utf-8)

Blank lines are skipped. The classifier is a multinomial logistic regression (float32, full-batch L-BFGS) on
features standardized with the training data's mean and std; MRPC's pair features are ``[u, v, |u - v|, u * v]``.
Its L2 penalty is picked from :data:`TRANSFER_L2_GRID` by accuracy on SST-2 dev, or on a seeded 10% held out of the
training data (each CV training fold, TREC train, MRPC train), then refit on all the training data.

Differences from SentEval: its classifier is sklearn's/PyTorch's with its own penalty grid and an inner k-fold
(not a 10% hold-out) for the penalty, and its MRPC features are ``[|u - v|, u * v]``; numbers are close to, not
identical with, published SentEval tables.

Command line (prints a table; ``--output_json`` writes the results plus ``"settings"``)::

    python -m hf_cse.transfer --model_name_or_path out/unsup-simcse-bert \\
        --data_dir SentEval/data/downstream --tasks mr cr sst2 --output_json out/unsup-simcse-bert/transfer.json
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .options import TRANSFER_TASKS
from .sts_data import read_lines
from .sts_evaluator import EncodeFn, encode_unique, normalize_task_list

logger = logging.getLogger(__name__)

#: L2 penalties tried (on the mean cross-entropy, bias not penalized), in this order; ties go to the first.
TRANSFER_L2_GRID: tuple[float, ...] = (1e-5, 1e-4, 1e-3, 1e-2)

# TREC's 6 coarse classes; the fine label after ":" is not used (SentEval's 6-class setting).
_TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
# Single-file-per-class tasks scored by k-fold CV: (folder, label-1 file, label-0 file).
_CV_FILES: dict[str, tuple[str, str, str]] = {
    "mr": ("MR", "rt-polarity.pos", "rt-polarity.neg"),
    "cr": ("CR", "custrev.pos", "custrev.neg"),
    "subj": ("SUBJ", "subj.objective", "subj.subjective"),
    "mpqa": ("MPQA", "mpqa.pos", "mpqa.neg"),
}
_SPLIT_FILES: dict[str, dict[str, str]] = {
    "sst2": {split: f"SST/binary/sentiment-{split}" for split in ("train", "dev", "test")},
    "trec": {"train": "TREC/train_5500.label", "test": "TREC/TREC_10.label"},
    "mrpc": {"train": "MRPC/msr_paraphrase_train.txt", "test": "MRPC/msr_paraphrase_test.txt"},
}
_HOLDOUT_FRACTION = 0.1
# Reads one line of a split: (label, sentence1[, sentence2]), or None for a malformed line.
_Parse = Callable[[str], tuple[Any, ...] | None]
_MAX_ITER = 100  # L-BFGS iterations per fit (sklearn's LogisticRegression default)


@dataclass
class TransferSplit:
    """Labelled examples of one split of a transfer task.

    Attributes:
        sentences1: the sentence of each example (MRPC: the first of the pair), length ``num_examples``.
        labels: class index of each example, length ``num_examples``.
        sentences2: MRPC's second sentence of each pair, length ``num_examples``; ``None`` for single sentences.
    """

    sentences1: list[str]
    labels: list[int]
    sentences2: list[str] | None = None

    def __post_init__(self) -> None:
        second = self.labels if self.sentences2 is None else self.sentences2
        if len({len(self.sentences1), len(self.labels), len(second)}) != 1:
            raise ValueError("TransferSplit: sentences1, labels and sentences2 must have equal lengths.")

    def __len__(self) -> int:
        return len(self.labels)

    def sentences(self) -> Iterator[str]:
        """Every sentence of the split (both sides of a pair), duplicates included."""
        yield from self.sentences1
        yield from self.sentences2 or ()


# ---------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------


def normalize_transfer_task(task: str) -> str:
    """Canonical (lower-case) name of transfer ``task``; a ``ValueError`` lists the valid ones for an unknown task."""
    name = str(task).strip().lower()
    if name not in TRANSFER_TASKS:
        raise ValueError(f"Unknown transfer task {task!r}. Valid tasks: {', '.join(TRANSFER_TASKS)}.")
    return name


def _read_lines(path: Path, task: str, encoding: str) -> list[tuple[int, str]]:
    """``(line number, line without its newline)`` of the non-blank lines of ``path``."""
    if not path.is_file():
        raise FileNotFoundError(
            f"Transfer-task file not found: {str(path)!r} (needed for task {task!r}). data_dir must follow SentEval's "
            "data/downstream layout (MR/, CR/, SUBJ/, MPQA/, SST/binary/, TREC/, MRPC/)."
        )
    return [(lineno, line) for lineno, line in enumerate(read_lines(path, encoding), start=1) if line.strip()]


def _examples(path: Path, rows: Iterable[tuple[int, str]], expected: str, parse: _Parse) -> TransferSplit:
    """The examples ``parse`` reads from the numbered lines ``rows`` of ``path``, as ``(label, sentence1[,
    sentence2])``; a line it refuses (``None``) is a ``ValueError`` saying it ``expected`` another form, as is no
    example at all."""
    examples = []
    for lineno, line in rows:
        if (example := parse(line)) is None:
            raise ValueError(f"{str(path)!r} line {lineno}: expected {expected}, got {line!r}.")
        examples.append(example)
    if not examples:
        raise ValueError(f"{str(path)!r} holds no examples.")
    labels, *sentences = (list(column) for column in zip(*examples, strict=True))
    return TransferSplit(sentences[0], labels, *sentences[1:])


def _sst2(line: str) -> tuple[int, str] | None:
    sentence, tab, label = line.strip().rpartition("\t")
    return (int(label), sentence.strip()) if tab and sentence.strip() and label.strip() in ("0", "1") else None


def _trec(line: str) -> tuple[int, str] | None:
    head, _, sentence = line.strip().partition(" ")
    coarse, colon, _ = head.partition(":")
    valid = colon and coarse in _TREC_CLASSES and sentence.strip()
    return (_TREC_CLASSES.index(coarse), sentence.strip()) if valid else None


def _mrpc(line: str) -> tuple[int, str, str] | None:
    fields = line.split("\t")
    valid = len(fields) >= 5 and fields[0].strip() in ("0", "1")
    return (int(fields[0]), fields[3].strip(), fields[4].strip()) if valid else None


def _read_split(task: str, path: Path) -> TransferSplit:
    """One split of SST-2, TREC or MRPC: each line parsed, its form checked (MRPC after its header row)."""
    if task == "sst2":
        return _examples(path, _read_lines(path, task, "utf-8"), "'sentence<TAB>0|1'", _sst2)
    if task == "trec":
        expected = f"'COARSE:fine question' with COARSE one of {', '.join(_TREC_CLASSES)}"
        return _examples(path, _read_lines(path, task, "latin-1"), expected, _trec)
    rows = _read_lines(path, task, "utf-8-sig")  # utf-8-sig: the Microsoft files start with a byte-order mark.
    if not rows or rows[0][1].split("\t")[0].strip() != "Quality":
        raise ValueError(f"{str(path)!r}: the first row must be the header 'Quality<TAB>#1 ID<TAB>#2 ID<TAB>...'.")
    return _examples(path, rows[1:], "'Quality(0|1)<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String'", _mrpc)


def load_transfer_tasks(
    tasks: Sequence[str] | str, data_dir: str | os.PathLike
) -> dict[str, dict[str, TransferSplit]]:
    """Read the labelled examples of ``tasks`` from a SentEval ``data/downstream`` folder (see the module docstring).

    Args:
        tasks: names from :data:`TRANSFER_TASKS`, case-insensitive.
        data_dir: the ``data/downstream`` folder.

    Returns:
        ``{task: {split: TransferSplit}}`` in the order given. Splits: ``"all"`` for MR/CR/SUBJ/MPQA (scored by
        k-fold CV), ``"train"``/``"dev"``/``"test"`` for SST-2, ``"train"``/``"test"`` for TREC and MRPC.

    Raises:
        ValueError: unknown (the valid tasks are listed) or duplicated task, or a malformed line (the file and the line
            number are named).
        FileNotFoundError: ``data_dir`` or one of its files does not exist (the exact path is named).
    """
    names = normalize_task_list(tasks, normalize_transfer_task, "transfer", TRANSFER_TASKS)
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"Transfer-task data directory {str(root)!r} does not exist or is not a directory.")
    loaded: dict[str, dict[str, TransferSplit]] = {}
    for name in names:
        if name in _CV_FILES:
            folder, *files = _CV_FILES[name]
            positives, negatives = (
                [line.strip() for _, line in _read_lines(root / folder / file, name, "latin-1")] for file in files
            )
            if not positives + negatives:
                raise ValueError(f"{str(root / folder)!r} holds no examples.")
            loaded[name] = {"all": TransferSplit(positives + negatives, [1] * len(positives) + [0] * len(negatives))}
        else:
            loaded[name] = {split: _read_split(name, root / file) for split, file in _SPLIT_FILES[name].items()}
    return loaded


# ---------------------------------------------------------------------------------------------------------------
# Classifier
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _LogisticRegression:
    """A fitted classifier: standardization with the training data's statistics, then a linear layer."""

    mean: torch.Tensor  # [D]
    std: torch.Tensor  # [D]
    weight: torch.Tensor  # [D, C]
    bias: torch.Tensor  # [C]

    def predict(self, features: torch.Tensor) -> torch.Tensor:
        """Class index ``[N]`` of features ``[N, D]``."""
        return (((features - self.mean) / self.std) @ self.weight + self.bias).argmax(-1)


def _fit(features: torch.Tensor, labels: torch.Tensor, num_classes: int, l2: float) -> _LogisticRegression:
    """Minimize mean cross-entropy + ``l2 * ||weight||^2`` on features ``[N, D]``, labels ``[N]`` with L-BFGS."""
    mean = features.mean(0)
    std = features.std(0, unbiased=False)
    # A feature constant on the training data (e.g. an unused dimension) would divide by 0; leave it centred only.
    std = torch.where(std > 1e-6, std, torch.ones_like(std))
    inputs = (features - mean) / std
    # Zero init + full-batch L-BFGS: no randomness, so a fit is deterministic.
    weight = torch.zeros(features.shape[1], num_classes, requires_grad=True)
    bias = torch.zeros(num_classes, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=_MAX_ITER, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(inputs @ weight + bias, labels) + l2 * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():  # the caller may be under torch.no_grad()
        optimizer.step(closure)
    return _LogisticRegression(mean, std, weight.detach(), bias.detach())


def _accuracy(predictions: torch.Tensor, labels: torch.Tensor) -> float:
    return 100.0 * (predictions == labels).sum().item() / len(labels)  # exact, unlike a float32 mean


def _f1(predictions: torch.Tensor, labels: torch.Tensor) -> float:
    """F1 x 100 of the positive class 1."""
    true_positives = ((predictions == 1) & (labels == 1)).sum().item()
    wrong = (predictions != labels).sum().item()  # false positives + false negatives
    return 100.0 * 2 * true_positives / (2 * true_positives + wrong) if true_positives else 0.0


def _train(
    features: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    seed: int,
    dev: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[_LogisticRegression, float]:
    """Pick the L2 penalty from :data:`TRANSFER_L2_GRID` and fit on ``features [N, D]``, ``labels [N]``.

    With ``dev`` (features, labels), each penalty is fitted on all the training data and scored on ``dev``; without,
    on the training data less a seeded 10% hold-out, scored on the hold-out, then the best is refit on everything.

    Returns:
        The classifier, and the accuracy (x 100) of the chosen penalty on ``dev`` or the hold-out.
    """
    refit = dev is None
    if dev is None:
        if len(labels) < 2:
            raise ValueError(f"Need at least 2 training examples to hold some out, got {len(labels)}.")
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
        num_held_out = max(1, round(_HOLDOUT_FRACTION * len(labels)))
        held_out, kept = order[:num_held_out], order[num_held_out:]
        fit_data, dev = (features[kept], labels[kept]), (features[held_out], labels[held_out])
    else:
        fit_data = (features, labels)
    models = [_fit(*fit_data, num_classes, l2) for l2 in TRANSFER_L2_GRID]
    accuracies = [_accuracy(model.predict(dev[0]), dev[1]) for model in models]
    best = int(np.argmax(accuracies))  # the first maximum: ties go to the earlier penalty of the grid
    model = _fit(features, labels, num_classes, TRANSFER_L2_GRID[best]) if refit else models[best]
    return model, accuracies[best]


def _stratified_folds(labels: torch.Tensor, kfold: int, seed: int) -> torch.Tensor:
    """Fold index ``[N]`` in ``[0, kfold)``: a seeded shuffle, then each class dealt round-robin over the folds."""
    if kfold > len(labels):  # kfold >= 2 is checked by score_transfer, before encoding
        raise ValueError(f"kfold must be at most the number of examples ({len(labels)}), got {kfold}.")
    shuffled = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    order = shuffled[torch.argsort(labels[shuffled], stable=True)]
    folds = torch.empty(len(labels), dtype=torch.long)
    folds[order] = torch.arange(len(labels)) % kfold
    return folds


# ---------------------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------------------


def _features(split: TransferSplit, table: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Features ``[N, D]`` (pairs: ``[N, 4D]`` = ``[u, v, |u - v|, u * v]``) and labels ``[N]`` of a split."""
    u = torch.stack([table[s] for s in split.sentences1])
    if split.sentences2 is not None:
        v = torch.stack([table[s] for s in split.sentences2])
        u = torch.cat([u, v, (u - v).abs(), u * v], dim=1)
    return u, torch.tensor(split.labels, dtype=torch.long)


def _score_task(
    task: str, data: dict[str, tuple[torch.Tensor, torch.Tensor]], kfold: int, seed: int
) -> dict[str, float]:
    num_classes = len(_TREC_CLASSES) if task == "trec" else 2
    if "all" in data:  # MR, CR, SUBJ, MPQA: mean accuracy over the CV folds
        features, labels = data["all"]
        folds = _stratified_folds(labels, kfold, seed)
        accuracies = []
        for fold in range(kfold):
            train, test = folds != fold, folds == fold
            model, _ = _train(features[train], labels[train], num_classes, seed)
            accuracies.append(_accuracy(model.predict(features[test]), labels[test]))
        return {"acc": float(np.mean(accuracies)), "num_examples": len(labels)}
    model, dev_accuracy = _train(*data["train"], num_classes, seed, dev=data.get("dev"))
    features, labels = data["test"]
    predictions = model.predict(features)
    result: dict[str, float] = {"acc": _accuracy(predictions, labels), "num_examples": len(labels)}
    if "dev" in data:
        result = {"dev_acc": dev_accuracy, **result}
    if task == "mrpc":
        result["f1"] = _f1(predictions, labels)
    return result


def score_transfer(
    encode: EncodeFn,
    loaded: dict[str, dict[str, TransferSplit]],
    *,
    kfold: int = 10,
    seed: int = 0,
    batch_size: int | None = None,
) -> dict[str, dict[str, float]]:
    """Score ``encode`` on tasks read by :func:`load_transfer_tasks`; see :func:`evaluate_transfer`."""
    if kfold < 2:
        raise ValueError(f"kfold must be >= 2, got {kfold}.")
    sentences = (s for splits in loaded.values() for split in splits.values() for s in split.sentences())
    table = encode_unique(encode, sentences, batch_size=batch_size)
    logger.info("Encoded %d distinct sentences for transfer tasks %s.", len(table), ", ".join(loaded))
    results: dict[str, dict[str, float]] = {}
    for task, splits in loaded.items():
        data = {name: _features(split, table) for name, split in splits.items()}
        results[task] = _score_task(task, data, kfold, seed)
        logger.info("Transfer task %s: %s", task, results[task])
    if results:
        results["avg"] = {"acc": float(np.mean([result["acc"] for result in results.values()]))}
    return results


def evaluate_transfer(
    encode: EncodeFn,
    tasks: Sequence[str],
    data_dir: str | os.PathLike,
    *,
    kfold: int = 10,
    seed: int = 0,
    batch_size: int | None = None,
) -> dict[str, dict[str, float]]:
    """Accuracy (x 100) of logistic regression on frozen embeddings for SentEval transfer tasks.

    All tasks are read first and every distinct sentence among them is embedded exactly once.

    Args:
        encode: ``encode(list_of_N_sentences) -> torch.Tensor [N, D]`` float embeddings in input order, e.g.
            ``functools.partial(encoder.encode, batch_size=128)`` for a ``SentenceEncoder``.
        tasks: names from :data:`TRANSFER_TASKS`.
        data_dir: SentEval's ``data/downstream`` folder (layout in the module docstring).
        kfold: folds of the cross-validation of MR, CR, SUBJ and MPQA (default 10, as SentEval).
        seed: seed of the fold assignment and of the 10% hold-out that picks the L2 penalty (default 0); results
            are deterministic given it.
        batch_size: sentences per ``encode`` call; ``None`` (default) encodes all distinct sentences in one call.

    Returns:
        ``{task: {"acc": ..., "num_examples": ...}, ..., "avg": {"acc": mean over the tasks}}``: ``acc`` is the
        mean accuracy over the CV folds (MR, CR, SUBJ, MPQA; ``num_examples`` counts all examples) or the test
        accuracy (SST-2, TREC, MRPC; ``num_examples`` counts the test examples). SST-2 adds ``"dev_acc"``, MRPC
        adds ``"f1"`` (of the paraphrase class 1).

    Raises:
        ValueError: unknown or duplicated task, a malformed line, ``kfold`` < 2 or above a task's size.
        FileNotFoundError: a data file is missing (the exact path is named).
    """
    return score_transfer(encode, load_transfer_tasks(tasks, data_dir), kfold=kfold, seed=seed, batch_size=batch_size)
