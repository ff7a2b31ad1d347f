"""PromptEOL's prompt, tokenized as PromptEOL tokenizes it (issue 54, items 1 and 2), on decoder tokenizers built
in-process (tests/common/decoder_tokenizers.py: a Qwen-like byte-level BPE, a Llama-like SentencePiece with BOS, a
Gemma-like one with BOS and ``<mask>``), against references written from PromptEOL's released code
(kongds/scaling_sentemb): ``evaluation.py``'s ``batcher`` (the rewrite, the template filled and stripped, one
``tokenizer.batch_encode_plus`` call) and ``ft_llm.py``'s ``generate_sentemb_prompt`` (the sentence's ids cut,
decoded, put in the template) with its ``tokenize`` (one call, special tokens as the tokenizer adds them).

hf_cse tokenized the template's prefix, the sentence and the suffix apart and joined the ids: 0 of 6 sentences got
PromptEOL's ids on two of the three families. The ``mask`` pooler keeps that joining, which is PromptBERT's training
code's (``bs + s + es``); on BERT's WordPiece it gives the ids of the whole prompt, shown here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from common.decoder_tokenizers import FAMILIES, QUOTED_SENTENCES, decoder_tokenizer, save_decoder
from conftest import SENTENCES
from transformers import AutoModel, AutoTokenizer

from hf_cse import CSEModel, PoolingConfig, SentenceEncoder
from hf_cse.errors import UsageError
from hf_cse.export.model_card.snippets import transformers_snippet
from hf_cse.modeling.configuration_cse import DEFAULT_PROMPT_TEMPLATE
from hf_cse.modeling.poolers import PROMPTEOL_TEMPLATE, prompteol_rewrite
from hf_cse.modeling.tokenization import SentenceTokenizer, use_eos_for_padding

PROMPTBERT_TEMPLATES = (DEFAULT_PROMPT_TEMPLATE, 'This sentence of "{sentence}" means [MASK] .')
# PromptEOL's own spelling of its template (train_llm.sh, eval_checkpoints.sh): '_' for ' ', *sent_0* for the sentence.
PROMPTEOL_CLI_TEMPLATE = 'This_sentence_:_"*sent_0*"_means_in_one_word:"'
EDGE_SENTENCES = [*QUOTED_SENTENCES, "", "Why?", 'He asked "why?"', "it's", "trailing space ", "ends with a quote'"]


# --- Naive references, written from PromptEOL's released code ------------------------------------------------------


def prompteol_template(cli_template: str = PROMPTEOL_CLI_TEMPLATE) -> str:
    """``template.replace('_', ' ').replace('*sep+*', '').replace('*cls*', '')`` (both scripts), ``*sent 0*`` left."""
    return cli_template.replace("_", " ").replace("*sep+*", "").replace("*cls*", "")


def prompteol_evaluation_ids(tokenizer: Any, sentences: list[str]) -> list[list[int]]:
    """``evaluation.py``'s ``batcher`` with ``--mask_embedding_sentence_template``: each sentence rewritten, put in
    the template and stripped, the batch tokenized in one call (``max_length`` None at STS: no truncation)."""
    template = prompteol_template()
    sentences = list(sentences)
    for i, s in enumerate(sentences):
        if len(s) > 0 and s[-1] not in ".?\"'":
            s += "."
        s = s.replace('"', "'")
        if len(s) > 0 and s[-1] == "?":
            s = s[:-1] + "."
        sentences[i] = template.replace("*sent 0*", s).strip()
    return tokenizer(sentences)["input_ids"]  # batch_encode_plus, which transformers 5 calls __call__


def prompteol_training_ids(tokenizer: Any, sentence: str, cutoff_len: int | None = None) -> list[int]:
    """``ft_llm.py``: ``generate_sentemb_prompt`` (the sentence's ids cut at ``cutoff_len``, decoded, in the
    template, stripped) then ``tokenize(prompt, add_eos_token=False)`` (one call, the tokenizer's special tokens).
    hf_cse decodes only a sentence it cuts (``cutoff_len`` given); PromptEOL decodes every one (the same text back on
    these tokenizers, checked in the test)."""
    if cutoff_len is not None:
        ids = tokenizer(sentence, truncation=True, max_length=cutoff_len, add_special_tokens=False)["input_ids"]
        sentence = tokenizer.decode(ids)
    prompt = prompteol_template().replace("*sent 0*", sentence).strip()
    return tokenizer(prompt, padding=False, return_tensors=None)["input_ids"]


# --- Tests ---------------------------------------------------------------------------------------------------------


def test_promptEOLs_cli_template_is_hf_cses_default() -> None:
    assert prompteol_template().replace("*sent 0*", "{sentence}") == PROMPTEOL_TEMPLATE


@pytest.mark.parametrize("family", FAMILIES)
def test_training_prompts_get_promptEOLs_ids_on_every_decoder_tokenizer_family(family: str) -> None:
    """In training (no rewrite), every row is ``ft_llm.py``'s; tokenized in pieces, most rows were not (the issue's
    0 of 6 on two families): the joints the sentences put quotes and periods at merge."""
    tokenizer = decoder_tokenizer(family)
    rows = SentenceTokenizer(tokenizer, PoolingConfig(pooler="prompt_last_token"))(QUOTED_SENTENCES)["input_ids"]
    expected = [prompteol_training_ids(tokenizer, sentence) for sentence in QUOTED_SENTENCES]
    assert rows == expected
    # PromptEOL decodes every training sentence; on these tokenizers that gives each sentence back.
    decoded = [tokenizer.decode(tokenizer(s, add_special_tokens=False)["input_ids"]) for s in QUOTED_SENTENCES]
    assert decoded == QUOTED_SENTENCES
    # The pieces, joined as hf_cse joined them, miss most of PromptEOL's rows.
    prefix, suffix = PROMPTEOL_TEMPLATE.split("{sentence}")
    lead = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    pieces = [
        lead
        + tokenizer(prefix, add_special_tokens=False)["input_ids"]
        + tokenizer(sentence, add_special_tokens=False)["input_ids"]
        + tokenizer(suffix, add_special_tokens=False)["input_ids"]
        for sentence in QUOTED_SENTENCES
    ]
    assert sum(p == e for p, e in zip(pieces, expected, strict=True)) <= 1


@pytest.mark.parametrize("family", FAMILIES)
def test_inference_prompts_are_promptEOLs_evaluation_ids_with_the_rewrite_and_without(family: str) -> None:
    """``rewrite_at_inference``: at inference, ``evaluation.py``'s rows exactly; without it, the prompts of the
    sentences as given. Training data never gets the rewrite (PromptEOL's ``ft_llm.py`` has none)."""
    tokenizer = decoder_tokenizer(family)
    rewriting = PoolingConfig(pooler="prompt_last_token", pooler_kwargs={"rewrite_at_inference": True})
    inference = SentenceTokenizer(tokenizer, rewriting, inference=True)(EDGE_SENTENCES)["input_ids"]
    assert inference == prompteol_evaluation_ids(tokenizer, EDGE_SENTENCES)
    training = SentenceTokenizer(tokenizer, rewriting)(EDGE_SENTENCES)["input_ids"]
    assert training == [prompteol_training_ids(tokenizer, s) for s in EDGE_SENTENCES]
    plain = PoolingConfig(pooler="prompt_last_token")
    as_given = SentenceTokenizer(tokenizer, plain, inference=True)(EDGE_SENTENCES)["input_ids"]
    assert as_given == training != inference


def test_the_rewrite_is_promptEOLs_evaluation_rewrite() -> None:
    """Each step in ``evaluation.py``'s order: ``say "hi"`` ends in a quote, so gets no period before its quotes turn
    single; ``Why?`` keeps no question mark."""
    cases = {
        "": "",
        "a dog": "a dog.",
        "a dog.": "a dog.",
        "Why?": "Why.",
        'say "hi"': "say 'hi'",
        'He asked "why?"': "He asked 'why?'",
        "it's": "it's.",
        "it'": "it'",
        "trailing space ": "trailing space .",
    }
    assert {sentence: prompteol_rewrite(sentence) for sentence in cases} == cases
    for sentence in EDGE_SENTENCES:  # the reference's prompt holds the same rewrite
        (row,) = prompteol_evaluation_ids(decoder_tokenizer("qwen"), [sentence])
        expected = decoder_tokenizer("qwen")(PROMPTEOL_TEMPLATE.replace("{sentence}", prompteol_rewrite(sentence)))
        assert row == expected["input_ids"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("max_seq_length", [14, 17, 20])
def test_truncation_shortens_only_the_sentence_as_promptEOLs_training_cuts_it(
    family: str, max_seq_length: int
) -> None:
    """A prompt over the limit is ``ft_llm.py``'s prompt of the sentence cut at some ``k`` tokens (decoded, in the
    template): it fits, ends in the template's own last tokens, and ``k`` is the most that fits here."""
    tokenizer = decoder_tokenizer(family)
    long_sentences = ["A man is playing a guitar. " * 3, '"The woman said "no". Two dogs play in the snow." ' * 2]
    rows = SentenceTokenizer(tokenizer, PoolingConfig(pooler="prompt_last_token"), max_seq_length)(long_sentences)
    empty = prompteol_training_ids(tokenizer, "")
    for sentence, row in zip(long_sentences, rows["input_ids"], strict=True):
        assert len(prompteol_training_ids(tokenizer, sentence)) > max_seq_length >= len(row)
        candidates = [k for k in range(40) if prompteol_training_ids(tokenizer, sentence, k) == row]
        assert candidates, (family, sentence, row)
        k = min(candidates)
        assert len(prompteol_training_ids(tokenizer, sentence, k + 1)) > max_seq_length
        assert row[-2:] == empty[-2:]  # the template's end (`word:"`) is whole


def test_a_limit_that_leaves_no_room_for_the_sentence_in_one_piece_is_one_line() -> None:
    tokenizer = decoder_tokenizer("llama")
    whole = len(prompteol_training_ids(tokenizer, ""))
    SentenceTokenizer(tokenizer, PoolingConfig(pooler="prompt_last_token"), whole + 1)
    with pytest.raises(ValueError, match=rf"max_seq_length={whole} leaves no room for a sentence") as error:
        SentenceTokenizer(tokenizer, PoolingConfig(pooler="prompt_last_token"), whole)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("template", PROMPTBERT_TEMPLATES)
def test_the_mask_poolers_joined_pieces_are_the_whole_prompts_ids_on_berts_wordpiece(
    template: str, tiny_tokenizer_dir: Path
) -> None:
    """The ``mask`` pooler keeps PromptBERT's training tokenization (the template's pieces and the sentence apart,
    joined inside ``[CLS]``/``[SEP]``, so the template's lengths, which template denoising reads, are fixed). On
    BERT's WordPiece it is the whole prompt's: its basic tokenizer splits at whitespace and at every punctuation
    mark before WordPiece runs, and the templates' joints around the sentence are quotes. On a byte-level BPE the
    two differ (below), which is why PromptEOL's pooler tokenizes in one piece."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    pooling = PoolingConfig(pooler="mask", prompt_template=template)
    sentences = [*QUOTED_SENTENCES, *SENTENCES]
    rows = SentenceTokenizer(tokenizer, pooling)(sentences)["input_ids"]
    whole = tokenizer([template.replace("[MASK]", tokenizer.mask_token).format(sentence=s) for s in sentences])
    assert rows == whole["input_ids"]
    assert pooling.template_prefix_length == 1 + len(tokenizer(template.split("{sentence}")[0])["input_ids"]) - 2
    qwen = decoder_tokenizer("qwen")
    whole_qwen = [qwen(PROMPTEOL_TEMPLATE.replace("{sentence}", s))["input_ids"] for s in QUOTED_SENTENCES]
    prefix, suffix = PROMPTEOL_TEMPLATE.split("{sentence}")
    joined = [
        qwen(prefix, add_special_tokens=False)["input_ids"]
        + qwen(s, add_special_tokens=False)["input_ids"]
        + qwen(suffix, add_special_tokens=False)["input_ids"]
        for s in QUOTED_SENTENCES
    ]
    assert joined != whole_qwen


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny random decoder of each family's architecture, saved with that family's tokenizer."""
    return {family: save_decoder(tmp_path_factory.mktemp(f"prompt_{family}"), family) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_embedding_is_the_last_state_of_promptEOLs_prompt(family: str, family_dirs: dict[str, Path]) -> None:
    """SentenceEncoder (inference: rewrite on) against the plain model on ``evaluation.py``'s ids, one sentence at a
    time: its last token's state; in float64, the same operations on the same ids, equal to the bit."""
    pooling = PoolingConfig(pooler="prompt_last_token", pooler_kwargs={"rewrite_at_inference": True})
    model = CSEModel.from_pretrained(family_dirs[family], pooling=pooling).double().eval()
    tokenizer = AutoTokenizer.from_pretrained(family_dirs[family])
    encoder = SentenceEncoder(model, tokenizer)
    plain = AutoModel.from_pretrained(family_dirs[family]).double().eval()
    for sentence, ids in zip(QUOTED_SENTENCES, prompteol_evaluation_ids(tokenizer, QUOTED_SENTENCES), strict=True):
        with torch.no_grad():
            expected = plain(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        assert torch.equal(encoder.encode([sentence])[0], expected.float())


def test_rewrite_at_inference_is_saved_and_a_wrong_value_is_one_line(
    family_dirs: dict[str, Path], tmp_path: Path
) -> None:
    pooling = PoolingConfig(pooler="prompt_last_token", pooler_kwargs={"rewrite_at_inference": True})
    CSEModel.from_pretrained(family_dirs["qwen"], pooling=pooling).save_pretrained(tmp_path / "out")
    AutoTokenizer.from_pretrained(family_dirs["qwen"]).save_pretrained(tmp_path / "out")
    encoder = SentenceEncoder.from_pretrained(tmp_path / "out", device="cpu")
    assert encoder.model.pooling.pooler_kwargs == {"rewrite_at_inference": True}
    (row,) = encoder.sentence_tokenizer(['say "hi"'])["input_ids"]
    assert row == prompteol_evaluation_ids(encoder.sentence_tokenizer.tokenizer, ['say "hi"'])[0]
    with pytest.raises(ValueError, match="rewrite_at_inference must be true or false, got 'yes'") as error:
        PoolingConfig(pooler="prompt_last_token", pooler_kwargs={"rewrite_at_inference": "yes"})
    assert "\n" not in str(error.value)
    described = pooling.get_pooler().describe(pooling)
    assert described.endswith("at inference each sentence ends in `.` and its `\"` become `'` first (PromptEOL's "
                              "evaluation)")  # fmt: skip


@pytest.mark.parametrize("rewrite", [False, True])
@pytest.mark.parametrize("family", FAMILIES)
def test_the_cards_transformers_code_tokenizes_as_hf_cse_truncation_and_rewrite_included(
    family: str, rewrite: bool, family_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """The card's snippet, run on the folder with a limit that cuts the long sentence: hf_cse's embeddings, in
    float64 to the bit (the same ids through the same model)."""
    pooling = PoolingConfig(
        pooler="prompt_last_token", pooler_kwargs={"rewrite_at_inference": True} if rewrite else {}
    )
    folder = tmp_path / "out"  # as a run saves it: the tokenizer pads with eos where it has no pad token
    shutil.copytree(family_dirs[family], folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    use_eos_for_padding(tokenizer)
    tokenizer.save_pretrained(folder)
    code = transformers_snippet(str(folder), pooling, max_seq_length=18).split("```python\n")[1].split("```")[0]
    sentences = [*QUOTED_SENTENCES, "A man is playing a guitar. " * 3]
    code = re.sub(r"^sentences = .*$", f"sentences = {sentences!r}", code, count=1, flags=re.M)
    namespace: dict[str, Any] = {}
    exec(code.replace(".eval()", ".double().eval()"), namespace)  # noqa: S102 - the card's own snippet
    model = CSEModel.from_pretrained(folder, pooling=pooling).double()
    expected = SentenceEncoder(model, AutoTokenizer.from_pretrained(folder), max_seq_length=18).encode(sentences)
    assert torch.equal(namespace["embeddings"].float(), expected)


def test_a_mask_token_in_a_sentence_under_the_mask_pooler_is_still_one_line(tiny_tokenizer_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    with pytest.raises(UsageError, match=r"contains the mask token '\[MASK\]'"):
        SentenceTokenizer(tokenizer, PoolingConfig(pooler="mask"))(["a [MASK] here"])
