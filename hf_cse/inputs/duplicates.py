"""``--mask_duplicates``: the ``duplicate_texts`` provider gives each sentence a hash of its token ids, so that the
objective's pipeline (:func:`~hf_cse.objectives.base.duplicate_negatives`) drops a negative whose text is its anchor's.

Two identical sentences in a batch (titles, log lines, FAQ questions; wiki1m has some) are each other's negative, with
the similarity of a positive. Texts are compared as the model reads them: the token ids after truncation (prompt
template included), so two sentences that differ only past ``max_seq_length`` are duplicates too. The hash is
computed on the device and gathered from every process with the views (no host synchronization); the step then
compares the ``B`` hashes once (``[B, B]``).
"""

from __future__ import annotations

import torch

from ..errors import UsageError
from ..objectives.base import HARD_NEGATIVE_TEXT_HASH, TEXT_HASH
from ..objectives.contract import Logs
from ..registry import register_input_provider
from .base import SENTENCES, InputProvider, ProvidedInputs, StepContext
from .labelled_pairs import POSITIVES, hard_negative_columns

# Two polynomial hashes modulo primes below 2^31: every product of a token id (< 2^31) and a power (< 2^31) fits in
# int64, so no step overflows, and the pair (about 62 bits) collides for two different texts with a probability of
# about L / 2^62 (L tokens). A collision only drops one true negative.
_PRIMES = (2_147_483_647, 2_147_483_629)
_BASES = (1_000_003, 911_382_323)


def _powers(base: int, prime: int, length: int, device: torch.device) -> torch.Tensor:
    """``base^j mod prime`` for ``j < length``, ``[length]`` int64, by square-and-multiply over the bits of ``j``."""
    exponents = torch.arange(length, device=device)
    result = torch.ones(length, dtype=torch.long, device=device)
    square = torch.full((length,), base % prime, dtype=torch.long, device=device)
    for bit in range(max(length - 1, 1).bit_length()):
        result = torch.where((exponents >> bit) & 1 == 1, result * square % prime, result)
        square = square * square % prime
    return result


def text_hashes(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """A hash of each row's tokens: ``[B, L], [B, L] -> [B]`` int64, equal for rows with the same token ids and
    independent of padding (rows padded to different lengths, on different processes, hash alike)."""
    tokens = (input_ids.long() + 1) * attention_mask.long()  # +1: a real token never counts as padding's 0
    hashes = []
    for base, prime in zip(_BASES, _PRIMES, strict=True):
        terms = tokens % prime * _powers(base, prime, tokens.shape[1], tokens.device) % prime
        hashes.append(terms.sum(dim=1) % prime)  # L terms < 2^31 each: the sum stays below 2^63
    return hashes[0] * _PRIMES[1] + hashes[1]


@register_input_provider("duplicate_texts")
class DuplicateTexts(InputProvider):
    """Gives ``text_hash`` (:data:`~hf_cse.objectives.base.TEXT_HASH`), ``[B]`` int64: a hash of each sentence's token
    ids (:func:`text_hashes`), over the global batch for the objective and over this process's rows for the
    auxiliary terms. The trainer adds this provider under ``--mask_duplicates``.

    On labelled pairs the in-batch candidates are the positives, so ``text_hash`` hashes each row's positive (a
    candidate with the text of the anchor's own positive is no negative), and
    :data:`~hf_cse.objectives.base.HARD_NEGATIVE_TEXT_HASH` ``[B, K]`` each row's hard negatives."""

    takes_labelled_pairs = True

    def provide(self, step: StepContext) -> ProvidedInputs:
        batch, pairs = step.batch, POSITIVES in step.batch
        hashes = {TEXT_HASH: _hashes(batch[POSITIVES if pairs else SENTENCES])}
        negatives = [_hashes(batch[group]) for group in hard_negative_columns(batch)] if pairs else []
        if negatives:
            hashes[HARD_NEGATIVE_TEXT_HASH] = torch.stack(negatives, dim=1)
        return ProvidedInputs.per_sentence(step, **hashes)


def _hashes(tokens: dict[str, torch.Tensor]) -> torch.Tensor:
    return text_hashes(tokens["input_ids"], tokens["attention_mask"])


def check_duplicates_masked(logs: Logs, objective_name: str) -> None:
    """Under ``--mask_duplicates``, refuse an objective whose output did not log ``duplicate_negative_share``: it
    ignored ``text_hash`` (its own ``forward`` builds no keep-mask from it), so duplicates would stay negatives."""
    if "duplicate_negative_share" not in logs:
        raise UsageError(
            f"mask_duplicates=True, but objective {objective_name!r} does not mask duplicate texts (its output logs "
            "no duplicate_negative_share); drop --mask_duplicates or apply hf_cse.objectives.base.duplicate_negatives "
            "to its negatives."
        )
