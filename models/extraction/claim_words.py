"""The words claims are read with: regex fragments for the speaker, owners, being, dates,
money and counts, cues of change and of more; the words themselves (relations, months, pets,
diets) come from :mod:`memstream.models.vocabulary`."""

from __future__ import annotations

import re

from memstream.models.vocabulary import (
    DIETS,
    MONTH_ABBREVIATIONS,
    MONTHS,
    PETS,
    RELATIONS,
    STATUSES,
    WEEKDAYS,
)

_RELATIONS = RELATIONS.alternation()
_ADVERBS = (
    r"(?:(?:just|recently|finally|now|actually|officially|already|also|still|currently|"
    r"really|totally|basically|mostly|definitely|kind\s+of|sort\s+of|since|then|eventually|"
    r"even|only|both|all)\s+)*"
)
_I = r"(?:i|we)"
_IM = r"(?:i'm|im|i\s+am|we're|we\s+are)"
_IVE = r"(?:i've|i\s+have|we've|we\s+have|i|we)"
_MY = r"(?:my|our)"
#: A subject: the speaker, someone the speaker names by relation, or he / she.
_SUBJECT = (
    rf"(?P<subj>(?:i|we)(?=\s|'|$)|{_MY}\s+(?P<rel>{_RELATIONS})"
    r"(?:\s*,?\s+(?P<relname>(?-i:[A-Z])[\w'-]+))?|he|she)"
)
#: Whose attribute a "my X is Y" statement gives: the speaker's ("my"), or someone's the
#: speaker names ("my sister's", "her").
_OWNER = rf"(?P<owner>{_MY}\s+(?:(?P<orel>{_RELATIONS})(?:'s|s')\s+)?|(?P<opron>his|her)\s+)"
_BE = r"(?:'m|'s|'re|\s+am|\s+is|\s+are)"
_HAVE3 = r"(?:'ve|'s|\s+have|\s+has)?"

_MONTHS = (MONTHS + MONTH_ABBREVIATIONS).alternation()
_WEEKDAYS = WEEKDAYS.alternation()
_DATE = (
    rf"(?:(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?(?:\s+of)?\s+{_MONTHS}(?:\s+\d{{4}})?|"
    rf"{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|{_MONTHS}(?:\s+\d{{4}})?|"
    rf"(?:next\s+|this\s+)?{_WEEKDAYS}|the\s+\d{{1,2}}(?:st|nd|rd|th)|"
    r"\d{1,2}/\d{1,2}(?:/\d{2,4})?|\d{4}-\d{2}-\d{2}|(?:the\s+)?(?:end|middle|start|beginning)"
    rf"\s+of\s+(?:{_MONTHS}|next\s+month|the\s+month|the\s+year)|(?:early|mid|late)[\s-]{_MONTHS}|"
    r"q[1-4]|next\s+(?:week|month|year|spring|summer|autumn|fall|winter))"
)
_MONEY = (
    r"(?:(?:[$€£¥]|usd|eur|gbp)\s*)?\d[\d,.]*(?:\s*(?:k|m|bn|thousand|million)\b)?"
    r"(?:\s*(?:euros?|dollars?|pounds?|bucks|usd|eur|gbp|chf|yen|per\s+month|a\s+month|"
    r"a\s+year|per\s+year|per\s+night|a\s+night|kg|kilos?|lbs?|pounds|km|miles|cm|m2|"
    r"square\s+meters|sq\s*ft|hours?|days?|weeks?|people|guests|seats?|rooms?)\b)*"
)
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a dozen": 12,
}
_COUNT = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_PETS = PETS.alternation()
_DIETS = rf"(?:{DIETS.alternation(loose_hyphens=True)}|on\s+a\s+(?:diet|[\w-]+\s+diet))"
_STATUSES = STATUSES.alternation()
_CHANGE_CUES = re.compile(
    r"\b(?:now|these\s+days|nowadays|anymore|any\s+more|no\s+longer|moved|moving|relocated|"
    r"switched|switching|changed|changing|new|went\s+up|went\s+down|increased|decreased|rose|"
    r"dropped|actually|since|now\s+that|finally|recently|just|update|correction|instead|"
    r"pushed|postponed|rescheduled|promoted|joined|started|became|got)\b",
    re.IGNORECASE,
)
_ALSO_CUES = re.compile(
    r"\b(?:also|too|as\s+well|another|a\s+second|second|in\s+addition|additionally|besides|"
    r"one\s+more|both|a\s+new\s+one\s+as\s+well)\b",
    re.IGNORECASE,
)
#: What makes a sentence say nothing about how things are: wishes, hypotheses, questions.
_IRREAL = re.compile(
    r"\b(?:if|would|wouldn't|could|might|maybe|perhaps|wish|hope|hoping|want\s+to|wanna|"
    r"wants\s+to|thinking\s+(?:about|of)|considering|dream(?:s|ing)?\s+(?:of|about)|"
    r"someday|one\s+day|should\s+i|do\s+you|can\s+you|whether|unless|imagine|pretend|"
    r"plan(?:s|ning)?\s+to|going\s+to|gonna|about\s+to|will|i'll|we'll)\b",
    re.IGNORECASE,
)
#: Where a value ends: punctuation, a conjunction, a clause of its own.
_VALUE_END = re.compile(
    r"\s*(?:[,;:!?()\[\]\"]|\.(?:\s|$)|\s[-–—]\s|\b(?:and|but|so|because|since|as|with|which|"
    r"who|where|when|while|though|although|now|these\s+days|nowadays|again|anymore|any\s+more|"
    r"too|as\s+well|last|this|that|after|before|until|till|in\s+order|at\s+the\s+moment|"
    r"right\s+now|recently|already|btw|lol|haha|instead|rather|not|over|than|for\s+(?:a|the|about|"
    r"over|almost|nearly|\d)|from|if|or|starting|effective|by|thanks|please|which|lately)\b)",
    re.IGNORECASE,
)
#: A number that is a time of day ("6pm", "6:30").
_CLOCK = re.compile(r"\s*(?::\d{2}|[ap]\.?m\b)", re.IGNORECASE)
#: Where a job title ends ("a nurse at St Mary's", "an engineer in Munich").
_JOB_END = re.compile(r"\s+(?:at|in|for|with|from|on|near)\s+", re.IGNORECASE)
#: What a preference is chosen over ("trains to planes", "tea over coffee").
_OVER = re.compile(r"\s+(?:over|rather\s+than|instead\s+of|more\s+than|to|than)\s+", re.IGNORECASE)
#: Where a preferred option ends ("a window seat on long flights").
_OPTION_END = re.compile(r"\s+(?:on|when|for|in|at|during|whenever|if)\s+", re.IGNORECASE)
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an|my|our)\s+", re.IGNORECASE)

def _p(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)
