# Copyright 2025 The hf_cse Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""STS correlation: Spearman and Pearson correlation (x100) between predicted similarities and gold scores.

This file is an `evaluate` module script. `evaluate.load` copies it into its dynamic-modules cache and imports
it from there, so it must stay self-contained (no relative imports). Load it offline with
`hf_cse.evaluation.load_sts_metric()`, which passes the local path of this folder to `evaluate.load`.
"""

import datasets
import evaluate
import numpy as np
from scipy import stats

_CITATION = """\
@inproceedings{cer-etal-2017-semeval,
    title = "{S}em{E}val-2017 Task 1: Semantic Textual Similarity Multilingual and Crosslingual Focused Evaluation",
    author = "Cer, Daniel and Diab, Mona and Agirre, Eneko and Lopez-Gazpio, I{\\~n}igo and Specia, Lucia",
    booktitle = "Proceedings of the 11th International Workshop on Semantic Evaluation (SemEval-2017)",
    year = "2017",
    pages = "1--14",
}
@inproceedings{gao-etal-2021-simcse,
    title = "{S}im{CSE}: Simple Contrastive Learning of Sentence Embeddings",
    author = "Gao, Tianyu and Yao, Xingcheng and Chen, Danqi",
    booktitle = "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing",
    year = "2021",
    pages = "6894--6910",
}
"""

_DESCRIPTION = """\
Semantic Textual Similarity (STS) correlation. Given one predicted similarity per sentence pair (typically the
cosine similarity of the two sentence embeddings) and the human gold score of that pair, returns the Spearman
rank correlation and the Pearson linear correlation between the two, both multiplied by 100. Spearman is the
main STS metric of SentEval, SimCSE and MTEB (MTEB's `cosine_spearman` x 100).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float`): predicted similarity of each pair, shape [num_pairs].
    references (`list` of `float`): gold similarity score of each pair, shape [num_pairs] (any scale: STS uses
        0-5, SICK-R 1-5; correlations do not depend on it).
    return_pvalue (`bool`, defaults to `False`): also return the two-sided p-values of both correlations.

Returns:
    spearman (`float`): Spearman rank correlation x 100, in [-100, 100]. `nan` when either input is constant.
    pearson (`float`): Pearson correlation x 100, in [-100, 100]. `nan` when either input is constant.
    spearman_pvalue (`float`), pearson_pvalue (`float`): only with `return_pvalue=True`.

Examples:
    >>> sts = evaluate.load("hf_cse/evaluation/metrics/sts_correlation")
    >>> sts.compute(predictions=[0.1, 0.4, 0.35, 0.8], references=[0.0, 2.0, 1.0, 5.0])
    {'spearman': 100.0, 'pearson': 98.51...}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class STSCorrelation(evaluate.Metric):
    """Spearman and Pearson correlation (x100) between predicted pair similarities and gold STS scores."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("float32"),
                    "references": datasets.Value("float32"),
                }
            ),
            reference_urls=[
                "https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.spearmanr.html",
                "https://docs.scipy.org/doc/scipy/reference/generated/scipy.stats.pearsonr.html",
                "https://github.com/facebookresearch/SentEval",
            ],
        )

    def _compute(self, predictions, references, return_pvalue: bool = False) -> dict[str, float]:
        predictions = np.asarray(predictions, dtype=np.float64)
        references = np.asarray(references, dtype=np.float64)
        if predictions.shape != references.shape or predictions.ndim != 1:
            raise ValueError(
                f"predictions and references must be 1-D and of equal length, got shapes {predictions.shape} "
                f"and {references.shape}."
            )
        if predictions.shape[0] < 2:
            raise ValueError(f"A correlation needs at least 2 pairs, got {predictions.shape[0]}.")
        if not (np.isfinite(predictions).all() and np.isfinite(references).all()):
            raise ValueError("predictions and references must be finite (found NaN or inf).")
        # A constant input has no defined correlation; scipy warns and returns nan. Return nan quietly, the
        # way a diverged model's score should show up in logs, instead of a warning per evaluation step.
        constant = np.ptp(predictions) == 0 or np.ptp(references) == 0
        undefined = (float("nan"), float("nan"))  # (statistic, p-value), as scipy's results unpack
        spearman, spearman_pvalue = undefined if constant else stats.spearmanr(predictions, references)
        pearson, pearson_pvalue = undefined if constant else stats.pearsonr(predictions, references)
        result = {"spearman": float(spearman) * 100.0, "pearson": float(pearson) * 100.0}
        if return_pvalue:
            result.update(spearman_pvalue=float(spearman_pvalue), pearson_pvalue=float(pearson_pvalue))
        return result
