"""Closed-class word lists, common adjectives and the irregular verb table that the negation backends read.

The rules backend recognises finite verbs, subjects and clause boundaries with these lists (the irregular verb table
tells it a past tense from a participle); both backends recognise an existing negation by :data:`NEGATORS`. The base
form after "did not" is lemminflect's (:mod:`.morphology`). All words are lower case.
"""

from __future__ import annotations

# base, simple past, past participle ("/" separates variants). The rules backend uses it to recognise finite verbs and
# participles ("went" is never a participle, "gone" never finite).
_IRREGULAR_VERBS = """
arise arose arisen; awake awoke awoken; bear bore born/borne; beat beat beaten; become became become;
begin began begun; bend bent bent; bet bet bet; bid bid bid; bind bound bound; bite bit bitten; bleed bled bled;
blow blew blown; break broke broken; breed bred bred; bring brought brought; broadcast broadcast broadcast;
build built built; burst burst burst; buy bought bought; cast cast cast; catch caught caught; choose chose chosen;
cling clung clung; come came come; cost cost cost; creep crept crept; cut cut cut; deal dealt dealt; dig dug dug;
do did done; draw drew drawn; drink drank drunk; drive drove driven; eat ate eaten; fall fell fallen; feed fed fed;
feel felt felt; fight fought fought; find found found; flee fled fled; fling flung flung; fly flew flown;
forbid forbade forbidden; forecast forecast forecast; foresee foresaw foreseen; forget forgot forgotten;
forgive forgave forgiven; freeze froze frozen; get got got/gotten; give gave given; go went gone;
grind ground ground; grow grew grown; hang hung hung; have had had; hear heard heard; hide hid hidden; hit hit hit;
hold held held; hurt hurt hurt; keep kept kept; kneel knelt knelt; know knew known; lay laid laid; lead led led;
leap leapt leapt; leave left left; lend lent lent; let let let; lie lay lain; light lit lit; lose lost lost;
make made made; mean meant meant; meet met met; mislead misled misled; mistake mistook mistaken;
outgrow outgrew outgrown; overcome overcame overcome; overhear overheard overheard; oversee oversaw overseen;
overtake overtook overtaken; overthrow overthrew overthrown; pay paid paid; put put put; quit quit quit;
read read read; rebuild rebuilt rebuilt; redo redid redone; remake remade remade; rewrite rewrote rewritten;
rid rid rid; ride rode ridden; ring rang rung; rise rose risen; run ran run; say said said; see saw seen;
seek sought sought; sell sold sold; send sent sent; set set set; shake shook shaken; shed shed shed;
shine shone shone; shoot shot shot; show showed shown; shrink shrank shrunk; shut shut shut; sing sang sung;
sink sank sunk; sit sat sat; slay slew slain; sleep slept slept; slide slid slid; speak spoke spoken;
speed sped sped; spend spent spent; spin spun spun; spit spat spat; split split split; spread spread spread;
spring sprang sprung; stand stood stood; steal stole stolen; stick stuck stuck; sting stung stung;
strike struck struck; strive strove striven; swear swore sworn; sweep swept swept; swim swam swum;
swing swung swung; take took taken; teach taught taught; tear tore torn; tell told told; think thought thought;
throw threw thrown; thrust thrust thrust; undergo underwent undergone; understand understood understood;
undertake undertook undertaken; uphold upheld upheld; upset upset upset; wake woke woken; wear wore worn;
weave wove woven; weep wept wept; win won won; wind wound wound; withdraw withdrew withdrawn;
withhold withheld withheld; withstand withstood withstood; write wrote written
"""


def _parse_irregulars() -> tuple[dict[str, str], dict[str, str], set[str]]:
    """``(past -> base, participle -> base, past forms equal to their base)`` from :data:`_IRREGULAR_VERBS`."""
    entries = [entry.split() for entry in _IRREGULAR_VERBS.split(";")]  # base, past, participle
    past_to_base = {form: base for base, past, _ in entries for form in past.split("/")}
    participles = {form: base for base, _, participle in entries for form in participle.split("/")}
    # A past form that is also the base form ("put", "cut", "read") says nothing about tense on its own.
    same_as_base = {form for form, base in past_to_base.items() if form == base}
    return past_to_base, participles, same_as_base


PAST_TO_BASE, PARTICIPLE_TO_BASE, PAST_EQUALS_BASE = _parse_irregulars()
PAST_TO_BASE.update({"was": "be", "were": "be"})
PARTICIPLE_TO_BASE["been"] = "be"

BE_FINITE = frozenset({"am", "is", "are", "was", "were", "'s", "’s", "'re", "’re", "'m", "’m"})
HAVE_FINITE = frozenset({"has", "have", "had", "'ve", "’ve", "'d", "’d"})
DO_FINITE = frozenset({"do", "does", "did"})
MODALS = frozenset({"can", "could", "will", "would", "shall", "should", "may", "might", "must", "'ll", "’ll"})
NEGATORS = frozenset({"not", "n't", "n’t", "never", "cannot"})

DETERMINERS = frozenset(
    "the a an this that these those his her its their our my your some any no every each all both many several few "
    "most other another such what which whose much more less either neither".split()
)
PREPOSITIONS = frozenset(
    "in on at by for with from to of into onto over under about after before during since until through throughout "
    "across against among amongst between within without along around behind beyond near upon via per than as like "
    "toward towards despite including following except outside inside below above beneath underneath off out up down "
    "amid".split()
)
SUBORDINATORS = frozenset(
    "although though because when whenever while whilst whereas if unless since after before until till once as "
    "whether".split()
)
ARTICLES = frozenset("the a an his her its their our my your each every no".split())
RELATIVES = frozenset({"which", "who", "whom", "whose", "that", "where", "when"})
# Determiners that can open a verb's object; "that", "which", "whose" after a noun open a relative clause instead.
OBJECT_DETERMINERS = DETERMINERS - RELATIVES - {"what"}
COORDINATORS = frozenset({"and", "or", "but", "nor", "yet", "so", "&"})
SUBJECT_PRONOUNS = frozenset({"i", "you", "he", "she", "it", "we", "they", "one", "this", "that", "there"})
SINGULAR_PRONOUNS = frozenset({"he", "she", "it", "one", "this", "that", "there"})
PLURAL_PRONOUNS = frozenset({"i", "you", "we", "they"})
OBJECT_PRONOUNS = frozenset(
    {"me", "you", "him", "her", "it", "us", "them", "himself", "herself", "itself", "themselves"}
)
# Adverbs that sit between a subject and its verb ("he also founded", "it has since become"); -ly words are added
# by suffix.
ADVERBS = frozenset(
    "also then later first still often soon already subsequently eventually once again just now ever yet only even "
    "always sometimes usually initially originally previously recently currently briefly further thus therefore "
    "however instead primarily mainly mostly largely partly since long nevertheless actually".split()
)
CLOSED_CLASS = (
    DETERMINERS
    | PREPOSITIONS
    | SUBORDINATORS
    | RELATIVES
    | COORDINATORS
    | OBJECT_PRONOUNS
    | ADVERBS
    | BE_FINITE
    | HAVE_FINITE
    | DO_FINITE
    | MODALS
    | NEGATORS
    | {"been", "being", "be", "having", "to", "not", "there", "here", "who", "whom", "very", "well", "too"}
)
# Words ending in -s / -ed that are (almost) never finite verbs in running text.
NOT_VERBS_S = frozenset(
    "is was has does its his hers ours yours theirs this thus plus bus gas yes always perhaps towards afterwards "
    "sometimes besides whereas unless less news series species means physics mathematics politics economics "
    "athletics ethics basis crisis analysis thesis chaos status campus census bonus virus focus versus "
    "various famous previous serious numerous religious nervous".split()
)
NOT_VERBS_ED = frozenset(
    "red bed need speed seed feed breed indeed hundred naked wicked sacred kindred shed bred fled led wed sped "
    "united based related".split()
)
NUMBERS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred thousand "
    "million dozens hundreds thousands millions".split()
)
THAT_VERBS = frozenset(
    "says claims states argues believes shows suggests notes thinks knows means reports explains adds writes feels "
    "hopes insists admits realizes realises finds concludes holds maintains reveals indicates confirms fears assumes "
    "asserts recalls remembers predicts proposes requires ensures".split()
)
PLURAL_DETERMINERS = frozenset("these those many several few both all".split())
SINGULAR_DETERMINERS = frozenset("a an this each every another either neither".split())
IRREGULAR_PLURALS = frozenset("people children men women".split())
# Common adjectives that are never verbs: after a verb-shaped word they start its object ("sells fresh bread").
ADJECTIVES = frozenset(
    "old new young fresh small large big little great good bad long high low tall short local famous popular modern "
    "ancient traditional main major minor various different special original rich poor strong heavy hot cold red "
    "blue green black white yellow brown golden whole entire huge tiny beautiful important early late public "
    "private national international social political economic natural historical annual additional general "
    "common similar".split()
)
QUOTES = frozenset({'"', "“", "”", "„", "«", "»"})
OPENERS = frozenset({"(", "[", "{"})
CLOSERS = frozenset({")", "]", "}"})


def is_adverb(word: str) -> bool:
    """A lower-case adverb: a listed one or an -ly word ("only", "early", "family" are not adverbs here)."""
    return word in ADVERBS or (word.endswith("ly") and len(word) > 4 and word not in {"only", "early", "family"})


def plural_shaped(word: str) -> bool:
    """A lower-case word that ends like a plural noun or a third-person verb: "tomatoes", "grows"."""
    return (
        word.endswith("s")
        and len(word) > 2
        and not word.endswith(("ss", "us", "is", "ous", "'s", "’s"))
        and word not in NOT_VERBS_S
    )


def is_negated(word: str) -> bool:
    """A lower-case negation word or a contracted negation ("never", "didn't")."""
    return word in NEGATORS or word.endswith(("n't", "n’t"))
