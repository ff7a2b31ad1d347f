"""OssCSE's negation augmentation: exact outputs per verb form, the sentences it must decline, odd input.

The rule-based backend runs everywhere; the spaCy tests run only where spaCy and an English pipeline are installed.
"""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from hf_cse.augment.negation import Negator, base_form, negate, negate_all

# (sentence, expected) pairs for the rule-based backend, one group per case of the module docstring.
COPULA = [
    ("The museum is open on Sundays.", "The museum is not open on Sundays."),
    ("Both towers are older than the church.", "Both towers are not older than the church."),
    ("The harbour was busy that winter.", "The harbour was not busy that winter."),
    ("The twins were born in Ohio.", "The twins were not born in Ohio."),
    ("I am tired of waiting.", "I am not tired of waiting."),
    ("She's moving to Lisbon next year.", "She's not moving to Lisbon next year."),
    ("There are three bridges over the canal.", "There are not three bridges over the canal."),
]
PERFECT = [
    ("The committee has approved the budget.", "The committee has not approved the budget."),
    ("Our neighbours have sold their car.", "Our neighbours have not sold their car."),
    ("They had finished dinner before nine.", "They had not finished dinner before nine."),
    ("The bakery has since become a café.", "The bakery has not since become a café."),
]
HAVE_MAIN = [
    ("Our village has two bakeries.", "Our village does not have two bakeries."),
    ("The old farmer had three dogs.", "The old farmer did not have three dogs."),
]
MODALS = [
    (f"The ferry {modal} carry forty cars.", f"The ferry {modal} not carry forty cars.")
    for modal in ("can", "could", "will", "would", "shall", "should", "may", "might", "must")
]
PRESENT_THIRD = [
    ("My sister likes long walks.", "My sister does not like long walks."),
    ("The river reaches the sea near Porto.", "The river does not reach the sea near Porto."),
    ("Tom studies in the evening.", "Tom does not study in the evening."),
    ("She carries a red umbrella.", "She does not carry a red umbrella."),
    ("The coach watches every match.", "The coach does not watch every match."),
    ("The old mill makes a loud noise.", "The old mill does not make a loud noise."),
    ("She goes to the library on Fridays.", "She does not go to the library on Fridays."),
    ("The shop closes at noon.", "The shop does not close at noon."),
]
PRESENT_OTHER = [
    ("They own a small boat.", "They do not own a small boat."),
    ("We grow tomatoes behind the house.", "We do not grow tomatoes behind the house."),
    ("The twins prefer the blue kite.", "The twins do not prefer the blue kite."),
]
PAST_REGULAR = [
    ("She painted the fence last summer.", "She did not paint the fence last summer."),
    ("The team played in Madrid.", "The team did not play in Madrid."),
    ("He studied medicine in Vienna.", "He did not study medicine in Vienna."),
    ("The firm stopped production in May.", "The firm did not stop production in May."),
    ("She liked the new design.", "She did not like the new design."),
    ("The council approved the plan.", "The council did not approve the plan."),
    ("The orchestra debuted a new symphony.", "The orchestra did not debut a new symphony."),
]
PAST_IRREGULAR = [
    ("We went to the coast in August.", "We did not go to the coast in August."),
    ("The children saw a fox in the garden.", "The children did not see a fox in the garden."),
    ("The band wrote a new album.", "The band did not write a new album."),
    ("He took the early train.", "He did not take the early train."),
    ("The company built a new factory.", "The company did not build a new factory."),
    ("My uncle became a pilot.", "My uncle did not become a pilot."),
]
AUXILIARY_DO = [
    ("They did finish the race.", "They did not finish the race."),
    ("She does her homework after school.", "She does not do her homework after school."),
]
PASSIVE = [("The bridge was completed in 1932.", "The bridge was not completed in 1932.")]
MAIN_CLAUSE_ONLY = [
    ("Although the film was short, it won three awards.", "Although the film was short, it did not win three awards."),
    (
        "The painter who lives next door sells his work online.",
        "The painter who lives next door does not sell his work online.",
    ),
    (
        "The song, which was recorded in one take, became a hit.",
        "The song, which was recorded in one take, did not become a hit.",
    ),
    ("The novel (which I have read twice) is long.", "The novel (which I have read twice) is not long."),
    (
        "Smith, a local lawyer, said that the road was unsafe.",
        "Smith, a local lawyer, did not say that the road was unsafe.",
    ),
    ("Born in Leeds, she moved to Paris in 1990.", "Born in Leeds, she did not move to Paris in 1990."),
]
# A plain subject (determiner or possessive, adjectives, noun) and its verb before a bare object: the verb right after
# the subject is negated, never a noun of the object ("My neighbor repairs old does not bicycle ...").
PLAIN_SUBJECT = [
    ("My neighbor repairs old bicycles in his garage.", "My neighbor does not repair old bicycles in his garage."),
    ("My grandmother grows tomatoes in her garden.", "My grandmother does not grow tomatoes in her garden."),
    ("The bakery sells fresh bread every morning.", "The bakery does not sell fresh bread every morning."),
    ("My brother fixes broken radios in his shed.", "My brother does not fix broken radios in his shed."),
    ("The old ferry carries tourists across the bay.", "The old ferry does not carry tourists across the bay."),
    ("Our teacher collected old coins as a child.", "Our teacher did not collect old coins as a child."),
    ("The young farmer sold fresh eggs at the market.", "The young farmer did not sell fresh eggs at the market."),
    ("My parents grow vegetables in their backyard.", "My parents do not grow vegetables in their backyard."),
]
ALL_CASES = (
    COPULA
    + PERFECT
    + HAVE_MAIN
    + MODALS
    + PRESENT_THIRD
    + PRESENT_OTHER
    + PAST_REGULAR
    + PAST_IRREGULAR
    + AUXILIARY_DO
    + PASSIVE
    + MAIN_CLAUSE_ONLY
    + PLAIN_SUBJECT
)

DECLINED = [
    "YMCA in South Australia",  # a title: no verb
    "A quiet morning in the harbour",
    "Annual report of the Harbour Trust",
    "The shop is not open today.",  # already negated: never double-negate
    "He never answered the letter.",
    "She didn't call back.",
    "The ferry cannot carry trucks.",
    "No visitor was allowed inside.",  # a negative subject already negates the clause
    "Is the museum open today?",  # a question: the auxiliary comes before the subject
    "When the storm hit the coast the lights went out.",  # a subordinate clause whose end cannot be found
    "The school buses carry children to school.",  # "buses" a verb ("the school buses ...") or the subject's noun?
]


@pytest.mark.parametrize(("sentence", "expected"), ALL_CASES)
def test_rules_negate_exact(sentence: str, expected: str) -> None:
    assert negate(sentence, backend="rules") == expected


@pytest.mark.parametrize("sentence", DECLINED)
def test_rules_decline(sentence: str) -> None:
    assert negate(sentence, backend="rules") is None


@pytest.mark.parametrize(("sentence", "expected"), ALL_CASES)
def test_negated_output_is_never_negated_again(sentence: str, expected: str) -> None:
    # A second pass sees the inserted "not" at the root and declines: the augmentation never builds "not not".
    assert negate(expected, backend="rules") is None


@pytest.mark.parametrize("sentence", ["", "   ", "\n"])
def test_empty_returns_none(sentence: str) -> None:
    assert negate(sentence, backend="rules") is None


# No word, no verb, or no subject before the verb: declined, without an error.
UNNEGATABLE = ["...", "1991", "?!", "—", "(is)", "日本語の文です。", "was", "a " * 2000, "Is", "The the the."]


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        *[(sentence, None) for sentence in UNNEGATABLE],
        ("It's", "It's not"),  # subject and verb in one contraction: a whole clause, negated
    ],
)
def test_odd_input_is_declined_or_negated(sentence: str, expected: str | None) -> None:
    assert negate(sentence, backend="rules") == expected


def test_non_string_and_bad_backend_raise_value_error() -> None:
    with pytest.raises(ValueError, match="NoneType"):
        negate(None, backend="rules")  # type: ignore[arg-type]
    valid = re.escape("backend must be one of ('auto', 'spacy', 'rules'), got 'parser'.")
    with pytest.raises(ValueError, match=valid):
        negate("The sky is blue.", backend="parser")
    with pytest.raises(ValueError, match=valid):
        Negator(backend="parser")


def test_unchanged_text_is_copied_verbatim() -> None:
    sentence = "  The  museum is   “open”  on Sundays ."
    assert negate(sentence, backend="rules") == "  The  museum is not   “open”  on Sundays ."


def test_negate_all_matches_negate() -> None:
    sentences = [s for s, _ in ALL_CASES[:10]] + DECLINED[:3] + [""]
    assert negate_all(sentences, backend="rules") == [negate(s, backend="rules") for s in sentences]


@pytest.mark.parametrize(
    ("verb", "base"),
    [
        ("likes", "like"), ("studies", "study"), ("watches", "watch"), ("makes", "make"), ("passes", "pass"),
        ("goes", "go"), ("has", "have"), ("does", "do"), ("is", "be"), ("dies", "die"),
        ("liked", "like"), ("played", "play"), ("stopped", "stop"), ("studied", "study"), ("created", "create"),
        ("founded", "found"), ("agreed", "agree"), ("continued", "continue"), ("travelled", "travel"),
        ("called", "call"), ("titled", "title"), ("visited", "visit"), ("invited", "invite"), ("hoped", "hope"),
        ("developed", "develop"), ("scored", "score"), ("honored", "honor"), ("changed", "change"),
        ("belonged", "belong"), ("graduated", "graduate"), ("defeated", "defeat"), ("acquired", "acquire"),
        ("went", "go"), ("saw", "see"), ("found", "find"), ("became", "become"), ("had", "have"), ("put", "put"),
    ],
)  # fmt: skip
def test_base_form(verb: str, base: str) -> None:
    assert base_form(verb) == base


@pytest.mark.parametrize(
    ("verb", "base"),
    [
        ("signalled", "signal"), ("underscored", "underscore"), ("burnt", "burn"), ("bade", "bid"),
        ("overran", "overrun"), ("eloped", "elope"), ("waltzed", "waltz"), ("dreamt", "dream"), ("dove", "dive"),
        ("geocached", "geocache"),
    ],
)  # fmt: skip
def test_base_form_is_lemminflects_where_hf_cses_suffix_rules_were_wrong(verb: str, base: str) -> None:
    """Verbs of real text (the first five: gensim's Lee news corpus) that hf_cse's own suffix rules got wrong before
    lemminflect replaced them (``signall``, ``underscor``, ``burnt``, ...; morphology.py's docstring)."""
    assert base_form(verb) == base


def test_a_regular_verb_the_suffix_rules_got_wrong_is_negated_right() -> None:
    assert negate("The crew signalled twice.", backend="rules") == "The crew did not signal twice."


@pytest.fixture
def without_spacy(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import spacy`` raises ImportError, as where spaCy is not installed. lemminflect is imported first: its own
    import hooks into spaCy when ``"spacy"`` is in ``sys.modules``, and a ``None`` there made it raise NameError (a
    test run alone failed, one after another test of the file passed)."""
    importlib.import_module("lemminflect")
    monkeypatch.setitem(sys.modules, "spacy", None)


@pytest.mark.usefixtures("without_spacy")
def test_without_spacy_the_rules_tell_the_verb_from_a_noun_of_the_same_form() -> None:
    """lemminflect lemmatizes a word as any part of speech (``buses`` is a noun and a verb to it: no tagger) and spaCy,
    which tags, is an extra (finite_verbs.py's docstring); without it the rules tell the verb from the noun."""
    assert Negator(backend="auto").backend == "rules"
    assert negate("The school buses arrived late.") == "The school buses did not arrive late."
    assert negate("The old ferry carries tourists.") == "The old ferry does not carry tourists."


@pytest.mark.usefixtures("without_spacy")
def test_auto_falls_back_to_rules_without_spacy() -> None:
    assert Negator(backend="auto").backend == "rules"


@pytest.mark.usefixtures("without_spacy")
def test_spacy_backend_without_spacy_names_the_install_command() -> None:
    with pytest.raises(ImportError, match="pip install"):
        Negator(backend="spacy")


# --- spaCy backend: only where it is installed ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def spacy_negator() -> Negator:
    pytest.importorskip("spacy")
    try:
        return Negator(backend="spacy")
    except ImportError as err:
        pytest.skip(str(err))


SPACY_CASES = [
    ("My sister likes long walks.", "My sister does not like long walks."),
    ("The committee has approved the budget.", "The committee has not approved the budget."),
    ("The ferry can carry forty cars.", "The ferry can not carry forty cars."),
    ("We went to the coast in August.", "We did not go to the coast in August."),
    ("She painted the fence last summer.", "She did not paint the fence last summer."),
    ("The museum is open on Sundays.", "The museum is not open on Sundays."),
    ("The old farmer had three dogs.", "The old farmer did not have three dogs."),
    ("They got married in June.", "They did not get married in June."),
    ("Close the door.", "Do not close the door."),
    (
        "The song, which was recorded in one take, became a hit.",
        "The song, which was recorded in one take, did not become a hit.",
    ),
]


@pytest.mark.parametrize(("sentence", "expected"), SPACY_CASES)
def test_spacy_negate_exact(spacy_negator: Negator, sentence: str, expected: str) -> None:
    assert spacy_negator(sentence) == expected


@pytest.mark.parametrize("sentence", ["YMCA in South Australia", "The shop is not open today.", ""])
def test_spacy_decline(spacy_negator: Negator, sentence: str) -> None:
    assert spacy_negator(sentence) is None


def test_spacy_batch_matches_single(spacy_negator: Negator) -> None:
    sentences = [s for s, _ in SPACY_CASES] + ["", "YMCA in South Australia"]
    assert spacy_negator.negate_batch(sentences, batch_size=3) == [spacy_negator(s) for s in sentences]
