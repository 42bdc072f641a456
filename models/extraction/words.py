"""The offline extractor's word lists: stopwords, fillers, demonyms, and the words that
mark a statement as about the moment rather than the person."""

from __future__ import annotations

from memstream.models.vocabulary import MONTHS, WEEKDAYS


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text``."""
    return frozenset(text.split())


#: Stopwords, pronouns and sentence starters: never scored, never a sentence-initial entity.
_COMMON_WORDS = _words(
    """
    a about above actually after again against all almost also although always am an and any
    anyway are aren't as at be because been before being below between both but by can can't
    cannot could couldn't did didn't do does doesn't doing don't done down during each either
    else even ever every few first for from further get gets getting give go going gone got
    great had hadn't has hasn't have haven't having he he'd he'll he's hello help her here
    hers herself hey hi him himself his how however i i'd i'll i'm i've if in into is isn't
    it it's its itself just know last let let's like made make many may maybe me might mine
    more most much must my myself need never new next no nope nor not now of off often oh ok
    okay on once one only or other our ours ourselves out over own perhaps please plus quite
    rather really right said same say see she she'd she'll she's should shouldn't since so
    some something sometimes sorry still such sure take tell than thank thanks that that's
    the their theirs them themselves then there there's these they they'd they'll they're
    they've thing things think this those though through thus to too under until up upon us
    use used very want was wasn't we we'd we'll we're we've well were weren't what what's
    when where where's whether which while who who's whom why will with within without
    won't would wouldn't yes yet you you'd you'll you're you've your yours yourself
    yourselves yeah yep wow great good nice cool awesome perfect fine sounds looks here's
    first second third also another next finally today tomorrow yesterday tonight
    """
)
#: Capitalised words that are never entities wherever they stand.
_NEVER_ENTITIES = WEEKDAYS.as_set() | MONTHS.as_set() | _words(
    """
    i i'm i've i'd i'll ok okay hi hello hey thanks user assistant am pm fyi asap btw lol
    imo imho tldr ps eta faq diy yes no
    """
)
#: Words that carry no content in a chat turn ("ok thanks!", "great, got it").
_FILLER_WORDS = _words(
    """
    ok okay k kk thanks thank you thx ty tysm cheers hi hello hey yo yes yeah yep yup no nope
    nah sure cool great nice good fine perfect awesome excellent wonderful lovely amazing bye
    goodbye see later lol haha hmm hm um uh ah oh wow got it alright right so much a lot very
    really that's thats sounds np please all for the help appreciated works worked done
    morning evening night day and too also that this is was will do i we me there makes sense
    indeed exactly agreed of course welcome again
    """
)
#: Whole turns that are trivial in languages the word list above does not cover.
_TRIVIAL_TURNS = _words(
    """
    merci danke gracias obrigado obrigada grazie ciao hola bonjour salut ja nein oui non si sí
    da спасибо привет пока 谢谢 好的 好 嗯 ありがとう ありがとうございます はい うん 감사합니다 네
    """
)
_DEMONYMS = _words(
    """
    american british english french german italian spanish portuguese chinese japanese korean
    indian canadian mexican brazilian dutch swiss swedish norwegian danish finnish polish
    russian ukrainian irish scottish welsh australian greek turkish israeli egyptian nigerian
    kenyan argentinian chilean colombian peruvian vietnamese thai filipino indonesian
    pakistani austrian belgian czech hungarian romanian
    """
)
#: "my X is ..." about these is about the moment, not the person.
_EPHEMERAL_KEYS = _words(
    """
    question problem issue point guess bad answer code error output request idea concern
    understanding thought thoughts bet reasoning plan mistake fault pleasure apologies turn
    query prompt message reply response bug test tests build internet connection screen
    battery head flight train meeting appointment order package delivery current last first
    next previous main only biggest take hope worry suggestion solution script function file
    result results version favourite favorite fav fave and or i me you we
    """
)
_HIGH_KEYS = _words(
    """
    birthday email phone address age job role title occupation profession employer company
    wife husband partner son daughter kids children child boss manager pronouns timezone
    nationality hometown dog cat pet team username handle website language tongue name
    """
)
#: "I have a ..." about these is about the moment.
_EPHEMERAL_HAVE = _words(
    """
    question questions problem problems issue issues doubt idea bug error feeling suggestion
    request favor favour follow-up concern query task look sec second minute moment meeting
    deadline call appointment lot few bit couple headache cold fever hunch clue
    """
)
#: "I like it/that/this" refers to the reply in front of the user, not a lasting taste.
_DEICTIC = _words("it this that these those them one you")
_RESPONSE_NOUNS = _words(
    """
    answer response reply suggestion idea plan explanation version code solution example list
    draft option approach proposal edit summary recommendation first second last
    """
)
_AUXILIARIES = _words(
    "do does did could would should can will may might must have has had shall don't"
)
_NOT_BUT_X_STOP = _words("only just merely even sure bad too so really quite that very")
_NOT_BUT_Y_STOP = _words("i i'm i've i'd i'll we you he she they it it's that this also still then")
