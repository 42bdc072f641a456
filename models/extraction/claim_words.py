"""The words claims are read with: regex fragments for the speaker, owners, being, dates,
money and counts, cues of change and of more, and the lists of pets, diets and occupations."""

from __future__ import annotations

import re

from memstream.models.extraction.words import _words

_RELATIONS = (
    r"(?:best\s+friend|sister|brother|mom|mum|mother|dad|father|wife|husband|partner|"
    r"girlfriend|boyfriend|fianc[eé]e?|son|daughter|kid|child|friend|boss|manager|roommate|"
    r"flatmate|cousin|aunt|uncle|grandma|grandmother|grandpa|grandfather|niece|nephew|"
    r"colleague|coworker|co-worker|neighbou?r|twin|parents|in-laws|sibling|stepmom|stepdad)"
)
#: Relations a person has one of at a time: a new one replaces the old.
_ONE_RELATIONS = frozenset(
    {"wife", "husband", "partner", "girlfriend", "boyfriend", "fiance", "fiancé", "fiancee",
     "fiancée", "boss", "manager", "roommate", "flatmate"}
)
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

_MONTHS = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
_WEEKDAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
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
_PETS = (
    r"(?:dog|puppy|cat|kitten|hamster|rabbit|bunny|parrot|bird|fish|goldfish|turtle|tortoise|"
    r"snake|lizard|gecko|horse|pony|guinea\s+pig|ferret|budgie|chicken|goat|pig|"
    r"dachshund|greyhound|beagle|labrador|poodle|terrier|spaniel|collie|husky|retriever|pug|"
    r"corgi|bulldog|chihuahua|dalmatian|schnauzer|boxer|whippet|sheepdog|cockatiel|canary|"
    r"tabby|siamese)"
)
_DIETS = (
    r"(?:vegetarian|vegan|pescatarian|pescetarian|flexitarian|carnivore|keto|paleo|"
    r"gluten[\s-]free|dairy[\s-]free|lactose[\s-]free|sugar[\s-]free|kosher|halal|"
    r"teetotal|sober|alcohol[\s-]free|on\s+a\s+(?:diet|[\w-]+\s+diet))"
)
_STATUSES = (
    r"(?:single|married|engaged|divorced|separated|widowed|dating\s+someone|in\s+a\s+relationship|"
    r"seeing\s+someone)"
)
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
#: Nouns of occupations that do not end like one (-er, -or, -ist, ...).
_OCCUPATIONS = _words(
    """
    nurse doctor chef pilot lawyer student dentist surgeon vet veterinarian midwife
    paramedic firefighter barista cashier clerk judge attorney coach tutor professor
    intern apprentice analyst architect economist mechanic plumber electrician carpenter
    pharmacist physician therapist psychologist psychiatrist scientist engineer
    consultant accountant journalist editor author artist designer developer programmer
    freelancer entrepreneur founder ceo cto cfo director secretary receptionist
    assistant librarian waiter waitress bartender chemist biologist physicist researcher
    postdoc lecturer principal realtor agent broker banker trader nanny caregiver carer
    cleaner farmer baker butcher florist tailor soldier officer detective sergeant
    captain admin
    """
)
_NOT_OCCUPATIONS = _words(
    """
    mother father brother sister daughter son member owner lover beginner fan user
    customer player reader listener speaker smoker drinker runner swimmer walker sleeper
    person people partner neighbour neighbor fighter thinker dreamer introvert extrovert
    early bird night owl morning evening worker foodie rider driver winner loser
    """
)
_OCCUPATION_ENDINGS = (
    "er", "or", "ist", "ian", "ant", "ent", "eer", "ect", "man", "woman", "person",
)


def _p(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)
