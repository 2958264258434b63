"""The router's screen: is this message a research question, a request for personal advice, or a crisis?

Two layers, both deterministic, local and free (no search, no model call):

1. **Patterns.** The policy's ``crisis_lexicon`` (→ ``crisis``) then its ``escalation_phrases`` (→ ``escalate``):
   case-insensitive regular expressions matched at word boundaries, compiled once per policy. They catch the
   obvious phrasings ("kill myself", "my client", "should I invest") instantly.

2. **Classifier.** A small linear model (a logistic score over hand-set, documented weights) for the requests
   worded in ways the patterns do not know. It runs once per ``policy.classifier_domains`` entry: the domain's
   terms come from the policy packs (YAML); the structural cues are general and live here in code.

   *Advice domains* (route ``escalate``). A personal-advice request is a message that touches the domain *and*
   is about the asker's own situation *and/or* asks what to do. The personal cues only count when at least one
   domain term is present (a gated linear model: personal cue × domain presence), so "Should I bring an
   umbrella?" never escalates, and a general question about the domain ("What are the symptoms of diabetes?")
   stays below the threshold because it carries no personal cue and reads as a general question.

   ============================  ======  ==========================================================
   feature                       weight  fires on
   ============================  ======  ==========================================================
   bias                          -4.00
   domain_any                    +1.50   at least one domain term ("landlord", "dose", "mortgage")
   domain_more                   +0.75   a second, different domain term
   owned_domain                  +1.20   my/our + (≤ 2 words) + a domain term ("my landlord", "my tax return")
   -- personal cues, counted only when domain_any fires --
   self_subject                  +1.00   I, I'm, I've, we, we're ... (and Malay saya/aku/kami)
   self_object                   +0.70   my, our, me, mine, myself
   own_relation                  +0.80   my/our + a person in the asker's life (son, wife, boss, landlord ...)
   narrative                     +0.70   a first-person situation ("I was charged", "I've had", "for two weeks")
   advice_strong                 +1.50   "should I", "what should I do", "what are my options", "am I", "is it
                                         legal for me", "do I need to", "advise me" ...
   advice_weak                   +1.00   "can I", "how do I get/avoid/claim ...", "is it normal to", "any tips"
   urgency                       +0.50   urgent, asap, tonight, worried, scared, help, please ...
   -- negative cues, always counted --
   general_form                  -1.20   "What is a ...", "How does ...", "Why did ...", explain, define,
                                         history of, in general, "section 90A" ...
   third_party                   -0.60   people, someone, patients, investors, companies ...
   named_possessive              -1.00   a capitalised name with 's ("Joe Biden's", "Harry Potter's")
   fiction                       -2.00   in a movie/book/game, fictional, character ...
   technical                     -1.00   python, process, server, command, code ...
   ============================  ======  ==========================================================

   *Crisis domains* (route ``crisis``). Self-harm language is judged by intent, not topic: the domain terms
   ("suicide", "pills", "hopeless") only nudge the score; what carries it is first-person intent, hopelessness,
   and method-seeking. Definitions, history, other people, fiction and technical homonyms pull it down.

   ============================  ======  ==========================================================
   bias                          -3.50
   domain_any / domain_more      +1.00 / +1.00   crisis terms from the pack
   self_ref                      +0.80   any first-person reference
   intent                        +3.50   I + (want/plan/ready/thinking about ...) + (die/end it/hurt myself ...)
   reflexive_harm                +3.00   hurt/cut/burn/starve/poison ... myself
   hopelessness                  +2.00   hopeless, worthless, no point, a burden, can't go on, tired of living ...
   ending                        +2.00   not wake up, sleep forever, end it all, disappear forever, goodbye note ...
   method_strong                 +3.00   painless/quickest way to die, how many X to overdose/not wake up ...
   method                        +1.50   lethal, painless, without anyone noticing, hide the cuts ...
   general_form                  -1.50   definitions, history, statistics ("What is suicide?", "Why did ...")
   third_party                   -1.00   he/she/they/himself/people/someone ...
   helping_other                 -1.00   help/support a friend, prevention, warning signs ...
   accidental                    -2.00   accidentally, while cooking, at the gym, sports injury ...
   fiction / technical           -2.00 / -2.00
   ============================  ======  ==========================================================

   The score is ``1 / (1 + e^-z)``; a domain fires at ``score >= THRESHOLD`` (0.5, i.e. z >= 0). Crisis domains
   are checked before advice domains. Microseconds per message, pure Python, no training data: the weights were
   set by hand from how people phrase such requests, so every decision can be explained feature by feature.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

from veracity.specs.models import Policy

THRESHOLD = 0.5

Route = Literal["proceed", "escalate", "crisis"]
Layer = Literal["pattern", "classifier", "none"]


@dataclass(frozen=True)
class RouteDecision:
    route: Route
    reason: str
    """One human sentence, e.g. "crisis phrase matched: 'kill myself'"."""
    matched: list[str]
    """The phrases or terms that fired."""
    layer: Layer
    score: float
    """The classifier score, 1.0 for a pattern hit, 0.0 when nothing fired."""


@dataclass(frozen=True)
class DomainScore:
    domain: str
    route: Literal["escalate", "crisis"]
    score: float
    features: dict[str, float]
    """Feature name → its contribution to z (weight × value), for the explanation."""
    matched: list[str]


# ---------------------------------------------------------------------------------------------------- cues


def _rx(*alternatives: str, flags: int = re.I) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives), flags)


_I = r"(?:i|i'm|im|i am|i've|ive|i have|i'll|i'd)"
_SENT = r"(?:^|[.!?;:]\s+|\n)\s*(?:(?:so|ok|okay|hi|hello|hey|please|but|and|also|quick question)[,:]?\s+)*"

SELF_SUBJECT = _rx(r"\b(?:i|i'm|i've|i'd|i'll|im|ive|we|we're|we've|we'd)\b", r"\b(?:saya|aku|kami)\b")
SELF_OBJECT = _rx(r"\b(?:my|our|mine|me|myself|ourselves)\b")
OWN_RELATION = _rx(
    r"\b(?:my|our)\s+(?:[\w'-]+\s+)?(?:son|daughter|kids?|child|children|baby|toddler|teen(?:ager)?|wife|husband|"
    r"partner|spouse|fianc[eé]e?|boyfriend|girlfriend|ex|mom|mum|mother|dad|father|parents?|brother|sister|"
    r"siblings?|grand(?:ma|pa|mother|father|parents?)|aunt|uncle|cousin|family|friend|roommate|flatmate|boss|"
    r"manager|employer|landlord|landlady|tenants?|neighbou?rs?|co-?workers?|colleagues?|company|business|"
    r"doctor|gp|lawyer|accountant|adviser|advisor)s?\b"
)
NARRATIVE = _rx(
    r"\b(?:i|we)(?:'ve|'m|'d|'re)?\s+(?:(?:have|had|am|was|were|are|just|recently|keep|kept|still|already|been|"
    r"being|got|now)\s+){0,2}(?!interested|tasked|asked|supposed|used|confused|based|related|curious|wondered)"
    r"(?:\w+ed|been|had|got|gotten|received|lost|owe|owed|took|taken|signed|bought|sold|found|felt|broke|broken|"
    r"fell|woke|spent|paid|borrowed|left|quit|hit|told|made|gave|given|ran|won|sent|came|went|having|getting|"
    r"feeling|taking|being|suffering|bleeding|coughing|experiencing|struggling|renting|paying|owing|facing|"
    r"dealing|living with|working for)\b",
    r"\bfor (?:the (?:past|last) )?(?:\d+|a few|a couple(?: of)?|two|three|four|five|six|several|many) "
    r"(?:days?|weeks?|months?|years?)\b",
    r"\b(?:since|ever since) (?:yesterday|last (?:week|month|year|night))\b",
    r"\b(?:the )?(?:past|last) (?:few |couple of |several )?(?:days?|weeks?|months?|years?|night)\b",
    r"\b(?:lately|recently)\b",
)
ADVICE_STRONG = _rx(
    r"\bshould (?:i|we)\b",
    r"\bwhat (?:should|shall|must|can|could|do|would) (?:i|we) do\b",
    r"\bwhat (?:are|were|is) (?:my|our) (?:options|rights|chances|odds|next steps?|best option)\b",
    r"\bwhat do you (?:recommend|suggest|advise|think i should)\b",
    r"\bwhat would you (?:recommend|suggest|advise|do)\b",
    r"\b(?:do|would|will) (?:i|we) (?:need|have) to\b",
    r"\bdo (?:i|we) need (?:a|an|to)\b",
    r"\bam i\b",
    r"\bis (?:it|this|that) (?:legal|illegal|safe|ok|okay|wise|smart|normal|allowed|possible|too late|worth it|"
    r"a good idea|a bad idea|serious|dangerous|bad) for (?:me|us|my)\b",
    r"\b(?:advise|diagnose|prescribe|represent|defend) me\b",
    r"\b(?:give|offer|need|want|get) (?:me )?(?:some |your )?(?:advice|guidance|a diagnosis|a prescription|"
    r"a recommendation|recommendations)\b",
    r"\b(?:help|tell) me (?:decide|choose|figure out|whether|if (?:i|we|my|our))\b",
    r"\bwhich (?:[\w-]+ )?(?:should|do|would) (?:i|we)\b",
    r"\bhow (?:much|many|long|often) (?:[\w-]+ ){0,2}(?:should|do|can|must|would) (?:i|we)\b",
    r"\bwill (?:i|we) (?:be|get|have|lose|need|go|still)\b",
    r"\bwhat (?:happens|will happen|would happen) (?:to me|to us|if (?:i|we|my|our))\b",
    r"\bis (?:it|this|that) (?:normal|serious|dangerous|bad|ok|okay|safe) (?:that|if|when) (?:i|my|we|our)\b",
    r"\bwhat (?:can|could) (?:i|we) (?:do|claim|get)\b",
    r"\bdo (?:i|we) have (?!to\b)",
    r"\b(?:could|might|can) (?:i|we) (?:have|be)\b",
    r"\b(?:can|could|will|would) you (?:please )?(?:treat|cure|replace|be) my\b",
    r"\b(?:treat|cure) (?:my|me)\b",
    r"\b(?:confirm|tell me|know) (?:if|whether) (?:i|i'm|my|we)\b",
    r"\b(?:apa|apakah) (?:yang )?(?:patut|perlu|harus|boleh) (?:saya|aku|kami) (?:buat|lakukan)\b",
    r"\b(?:patutkah|bolehkah|perlukah|adakah) (?:saya|aku|kami)\b",
)
ADVICE_WEAK = _rx(
    r"(?<!how )(?<!what )(?<!where )(?<!who )\b(?:can|could|may) (?:i|we)\b",
    r"\bhow (?:do|can|should|could|would) (?:i|we) (?:get|obtain|apply|qualify|claim|avoid|get out of|get rid of|"
    r"stop|treat|cure|fix|fight|win|appeal|contest|deal with|handle|cope|recover|protect|lower|reduce|pay|repay|"
    r"file|report|prove|know if|tell if|choose|pick|prepare|manage|afford)\b",
    r"\bis (?:it|this|that) (?:normal|safe|ok|okay|serious|dangerous|bad) (?:to|if|when|that)\b",
    r"\bany (?:advice|tips|suggestions|recommendations|ideas)\b",
    r"\b(?:best|right|smartest|safest) (?:way|option|choice|move|thing) for (?:me|us)\b",
    r"\b(?:i|we) (?:need|want) (?:help|to know)\b",
    r"\b(?:could|can|might) (?:it|this|that) (?:be|mean)\b",
    r"\bis (?:this|it|that) (?:a sign|a symptom|signs?|symptoms?) of\b",
    r"\b(?:plan|program|programme|treatment|therapy|regimen|diet|schedule|strategy|portfolio|budget)s? for "
    r"(?:me|myself|us)\b",
)
URGENCY = _rx(
    r"\b(?:urgent(?:ly)?|asap|right now|immediately|tonight|tomorrow|emergency|help|please|desperate(?:ly)?|"
    r"worried|scared|afraid|terrified|panicking|freaking out|stressed)\b"
)
GENERAL_FORM = _rx(
    _SENT + r"(?:(?:can|could|would) you |please )?(?:what|which) (?:is|are|was|were|'s) (?:a|an|the|some)\b"
    r"(?! (?:best|most|easiest|quickest|fastest|simplest|surest|safest|cheapest|right|least|only)\b)",
    _SENT + r"(?:(?:can|could|would) you |please )?what (?:does|did|do (?!i\b|we\b|you\b))",
    _SENT + r"how (?:does|do|did|is|are|was|were) (?!i\b|we\b|my\b|our\b|you\b)",
    _SENT + r"why (?:is|are|was|were|do|does|did|would|might|can'?t|don'?t|doesn'?t)\b(?! i\b| we\b| my\b)",
    _SENT + r"(?:who|when) (?:is|are|was|were|did)\b",
    r"\b(?:explain|describe|define|definition|meaning of|history of|overview of|summar(?:y|ise|ize)|compare|"
    r"comparison|differences? between|pros and cons|in general|generally|typically|statistics|according to|"
    r"what does the law say)\b",
    r"\b(?:section|article|clause|regulation|rule) \d",
    r"\b(?:act|code|law) (?:of )?\d{4}\b",
)
THIRD_PARTY = _rx(
    r"\b(?:people|persons?|someone|somebody|anyone|anybody|one's|patients|investors|employees|employers|tenants|"
    r"landlords|consumers|citizens|individuals|companies|users|customers|workers|students|adults|society|"
    r"countries|governments?)\b"
)
NAMED_POSSESSIVE = re.compile(
    r"\b(?!(?:My|Our|I|What|Who|Where|When|How|Why|It|That|There|Here|He|She|Let|Today|Everyone|Someone|Nobody|One|"
    r"Everybody|Somebody|Anyone|Anybody|This|Which)\b)[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*(?:'s|s')(?=\s)"
)
FICTION = _rx(
    r"\b(?:in|from|for|of) (?:a |an |the |my |this )?(?:movie|film|book|novel|story|short story|screenplay|script|"
    r"tv show|tv series|series|show|sitcom|video ?game|game|play|musical|anime|manga|comic|episode|fan ?fic\w*|"
    r"roleplay|rpg|fiction)\b",
    r"\b(?:fictional|characters?|villain|protagonist|npc|minecraft|fortnite|call of duty|gta|skyrim|the sims|"
    r"pokemon|zelda|counter-strike|world of warcraft|dungeons (?:and|&) dragons)\b",
)
ANIMAL = _rx(
    r"\b(?:dogs?|cats?|pets?|pupp(?:y|ies)|kittens?|horses?|rabbits?|hamsters?|parrots?|vet|vets|veterinar\w*|"
    r"livestock|cattle)\b"
)
# Owning a professional ("my doctor", "my lawyer") is a relation, counted by own_relation, not an owned domain matter.
ROLES = frozenset(
    "doctor doctors gp physician nurse dentist pharmacist specialist therapist psychiatrist lawyer lawyers attorney "
    "attorneys solicitor solicitors barrister barristers landlord landlady employer bank banks".split()
)
TECHNICAL = _rx(
    r"\b(?:python|java(?:script)?|c\+\+|processe?s?|threads?|server|linux|unix|windows|macos|terminal|command|"
    r"script|code|program|software|database|sql|api|docker|container|kubernetes|git|bash|shell|cpu|browser|"
    r"computer|laptop|file|files|excel|spreadsheet|html|css|function|loop|variable|app)\b"
)

# Crisis cues: judged by intent, not topic.
_WANT = r"(?:want|wanna|wish|wished|ready|deserve|tempted|longing|rather|would rather)"
_PLAN = (
    r"(?:going|gonna|plan|planning|planned|decided|deciding|trying|tried|thinking (?:about|of)|thought (?:about|of)|"
    r"think (?:about|of)|considering|urge|urges|need|about|" + _WANT + ")"
)
_ENDING = (
    r"(?:end (?:it|it all|things|everything|my life|this|my suffering)|disappear forever|not (?:be here|exist|wake up|"
    r"be alive)(?: any ?more)?|(?:hurt|harm|cut|kill|hang|starve|burn|poison|drown|shoot|suffocate) myself|overdose|"
    r"od|commit suicide|suicide|sleep forever|never wake up|jump off (?:a|the) \w+)"
)
CRISIS_INTENT = _rx(
    rf"\b{_I}\s+(?:[\w']+\s+){{0,3}}?{_PLAN}\s+(?:to\s+|of\s+)?{_ENDING}",
    rf"\b{_I}\s+(?:[\w']+\s+){{0,2}}?{_WANT}\s+(?:to\s+)?(?:die|be dead|stop living|stop existing|not live)\b",
    r"\b(?:saya|aku) (?:\w+ )?(?:nak|mahu|ingin|hendak) (?:bunuh diri|mati)\b",
)
CRISIS_REFLEXIVE = _rx(
    r"\b(?:hurt|hurting|harm|harming|cut|cutting|burn|burning|kill|killing|punish|punishing|starve|starving|hang|"
    r"hanging|drown|drowning|poison|poisoning|shoot|shooting|suffocate|suffocating|strangle|strangling|overdose|"
    r"overdosing)\s+myself\b",
    r"\bmake myself (?:throw up|vomit|puke|sick|bleed|pass out|faint)\b",
)
# Hopelessness counts when it is the asker's own: "I feel worthless", not "my boss is worthless".
_DESPAIR = (
    r"(?:hopeless|worthless|useless|pointless|meaningless|empty|numb|a burden|such a burden|a failure|"
    r"broken|trapped|defeated|unlovable|unwanted)"
)
CRISIS_HOPELESS = _rx(
    r"\b(?:i|i'm|im|i am|i've|i have|i feel|i felt|feeling|i've become|i have become|my life is|my life feels|"
    r"life is|life feels|everything (?:is|feels))(?: (?:so|really|completely|totally|utterly|just|very|such|"
    r"always|never|been|become|feel|feeling|like))* " + _DESPAIR + r"\b",
    r"\b(?:no (?:point|reason|hope|future|way out) (?:in |to |for me)?(?:living|life|going on|anything|trying|me)|"
    r"what'?s the point (?:of|in) (?:living|life|going on|anything|trying)|what'?s the point any ?more|"
    r"nothing (?:matters any ?more|to live for)|no ?one (?:would|will) (?:care|miss me|notice)|"
    r"nobody (?:would|will) (?:care|miss me|notice)|no ?one cares about me|nobody cares about me|"
    r"better off without me|(?:a|such a) burden (?:to|on) (?:everyone|everybody|my|them)|"
    r"can'?t (?:take|do|handle|bear) (?:it|this|this pain|the pain|life) any ?more|can'?t go on|"
    r"give up on (?:life|everything|myself)|tired of (?:living|life|being alive|existing)|"
    r"hate (?:myself|my life|being alive)|empty inside|want (?:it|everything|the pain) to (?:stop|end)|"
    r"make (?:it|the pain) stop|done with (?:life|everything|living)|putus asa)\b",
)
CRISIS_ENDING = _rx(
    r"\b(?:(?:not|never) (?:to )?wake up(?: again)?|sleep forever|disappear forever|not (?:be|being) (?:here|around|"
    r"alive) any ?more|end it all|end everything|say(?:ing)? (?:my )?goodbyes?|final goodbye|last goodbye|"
    r"goodbye (?:letter|note)|suicide note|until (?:i|we) (?:die|am dead|pass out|starve))\b"
)
CRISIS_METHOD_STRONG = _rx(
    r"\b(?:painless|quick|quickest|easiest|fastest|surest|best|simplest|least painful|peaceful|effective)\s+"
    r"(?:way|ways|method|methods|means)\s+(?:to|of)\s+(?:die|dying|kill (?:myself|yourself|oneself)|"
    r"end (?:my|your|one'?s) (?:own )?life|commit(?:ting)? suicide|suicide|overdos\w*|od)\b",
    r"\bhow (?:much|many)\s+(?:[\w-]+\s+){0,3}?(?:to|would|will|is|are|does|do|before|it takes|it take)\s+"
    r"(?:[\w']+\s+){0,4}?(?:die|overdose|od|kill (?:me|myself)|be (?:fatal|lethal|deadly)|stop (?:my|your|a) heart|"
    r"not wake up|never wake up)\b",
    r"\bhow (?:to|do i|can i|should i) (?:die|kill myself|commit suicide|end my life|overdose|self[- ]?harm)\b",
    r"\b(?:ways?|methods?|objects?|items?|tools?|things?|means|techniques?|places?) (?:\w+ )?(?:to|of|for) "
    r"(?:self[- ]?harm\w*|(?:harm|hurt|cut|burn|kill)(?:ing)? (?:myself|yourself|oneself)|suicide|die)\b",
    r"\b(?:used?|using) (?:for|to|in) (?:self[- ]?harm\w*|suicide|(?:harm|hurt|cut|kill)(?:ing)? (?:myself|oneself))\b",
    r"\b(?:help|teach|show|tell) me (?:to |how to )?(?:self[- ]?harm|hurt myself|harm myself|kill myself|die|"
    r"cut myself|end my life)\b",
)
CRISIS_METHOD = _rx(
    r"\b(?:lethal|fatal|deadly|painless(?:ly)?|bleed out|tie a noose|where to cut|how deep|(?:high|tall) enough)\b",
    r"\bwithout (?:anyone|anybody|people|my (?:\w+ )?(?:parents|family|friends|wife|husband|partner|mum|mom|dad)) "
    r"(?:noticing|knowing|finding out|seeing)\b",
    r"\bhide (?:the |my |these )?(?:[\w-]+ )?(?:cuts|scars|marks|bruises|wounds)\b",
    r"\bhow (?:many|much) (?:[\w-]+ )?(?:pills|tablets|sleeping pills|painkillers|paracetamol|tylenol|ibuprofen|"
    r"aspirin|insulin)\b",
)
CRISIS_THIRD = _rx(
    r"\b(?:he|she|they|his|her|him|them|himself|herself|themselves|people|someone|somebody|person|man|woman)\b"
)
CRISIS_HELPING = _rx(
    r"\b(?:help|support|talk to|approach|comfort|reach out to) (?:a|my|our|someone|somebody|him|her|them|a friend|"
    r"a loved one)\b",
    r"\bworried about (?:my|a|our)\b",
    r"\b(?:prevent\w*|awareness|warning signs|risk factors)\b",
)
CRISIS_ACCIDENTAL = _rx(
    r"\b(?:accident(?:al(?:ly)?)?|by mistake|while (?:cooking|shaving|running|working|training|exercising|"
    r"playing)|at the gym|tripped|slipped|sports?|workout|injur\w*)\b"
)

ADVICE_BIAS = -4.0
ADVICE_WEIGHTS: dict[str, float] = {
    "domain_any": 1.5,
    "domain_more": 0.75,
    "owned_domain": 1.2,
    "self_subject": 1.0,
    "self_object": 0.7,
    "own_relation": 0.8,
    "narrative": 0.7,
    "advice_strong": 1.5,
    "advice_weak": 1.0,
    "urgency": 0.5,
    "general_form": -1.2,
    "third_party": -0.6,
    "named_possessive": -1.0,
    "fiction": -2.0,
    "technical": -1.0,
    "animal": -1.0,
}
_ADVICE_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("self_subject", SELF_SUBJECT),
    ("self_object", SELF_OBJECT),
    ("own_relation", OWN_RELATION),
    ("narrative", NARRATIVE),
    ("advice_strong", ADVICE_STRONG),
    ("advice_weak", ADVICE_WEAK),
    ("urgency", URGENCY),
)
_PERSONAL = frozenset(name for name, _ in _ADVICE_CUES)
_ADVICE_NEGATIVE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("general_form", GENERAL_FORM),
    ("third_party", THIRD_PARTY),
    ("named_possessive", NAMED_POSSESSIVE),
    ("fiction", FICTION),
    ("technical", TECHNICAL),
    ("animal", ANIMAL),
)

CRISIS_BIAS = -3.5
CRISIS_WEIGHTS: dict[str, float] = {
    "domain_any": 1.0,
    "domain_more": 1.0,
    "self_ref": 0.8,
    "intent": 3.5,
    "reflexive_harm": 3.0,
    "hopelessness": 2.0,
    "ending": 2.0,
    "method_strong": 3.0,
    "method": 1.5,
    "general_form": -1.5,
    "third_party": -1.0,
    "helping_other": -1.0,
    "accidental": -2.0,
    "fiction": -2.0,
    "technical": -2.0,
}
_SELF_REF = _rx(SELF_SUBJECT.pattern, SELF_OBJECT.pattern)
_CRISIS_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("self_ref", _SELF_REF),
    ("intent", CRISIS_INTENT),
    ("reflexive_harm", CRISIS_REFLEXIVE),
    ("hopelessness", CRISIS_HOPELESS),
    ("ending", CRISIS_ENDING),
    ("method_strong", CRISIS_METHOD_STRONG),
    ("method", CRISIS_METHOD),
    ("general_form", GENERAL_FORM),
    ("third_party", CRISIS_THIRD),
    ("helping_other", CRISIS_HELPING),
    ("accidental", CRISIS_ACCIDENTAL),
    ("fiction", FICTION),
    ("technical", TECHNICAL),
)

# ---------------------------------------------------------------------------------------------------- compiling


def _bounded(pattern: str) -> str:
    return f"(?<!\\w)(?:{pattern})(?!\\w)"


@dataclass(frozen=True)
class _Domain:
    name: str
    route: Literal["escalate", "crisis"]
    terms: re.Pattern[str] | None


@dataclass(frozen=True)
class _Compiled:
    crisis: tuple[re.Pattern[str], ...]
    escalation: tuple[re.Pattern[str], ...]
    domains: tuple[_Domain, ...]


def _compile_key(key: tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str, tuple[str, ...]], ...]]) -> _Compiled:
    crisis, escalation, domains = key
    compiled_domains = []
    for name, route, terms in domains:
        if terms:
            alternation = "|".join(f"(?:{t})" for t in terms)
            term_rx: re.Pattern[str] | None = re.compile(_bounded(alternation), re.I)
        else:
            term_rx = None
        compiled_domains.append(_Domain(name, "crisis" if route == "crisis" else "escalate", term_rx))
    return _Compiled(
        crisis=tuple(re.compile(_bounded(p), re.I) for p in crisis),
        escalation=tuple(re.compile(_bounded(p), re.I) for p in escalation),
        domains=tuple(compiled_domains),
    )


_BY_KEY: OrderedDict[object, _Compiled] = OrderedDict()
_BY_ID: OrderedDict[int, tuple[Policy, _Compiled]] = OrderedDict()
_CACHE_SIZE = 128


def _compiled(policy: Policy) -> _Compiled:
    """Compile once per policy: by identity first (no work at all), then by the patterns themselves."""
    entry = _BY_ID.get(id(policy))
    if entry is not None and entry[0] is policy:
        return entry[1]
    key = (
        tuple(policy.crisis_lexicon),
        tuple(policy.escalation_phrases),
        tuple((name, d.route, tuple(d.terms)) for name, d in policy.classifier_domains.items()),
    )
    compiled = _BY_KEY.get(key)
    if compiled is None:
        compiled = _compile_key(key)
        _BY_KEY[key] = compiled
        if len(_BY_KEY) > _CACHE_SIZE:
            _BY_KEY.popitem(last=False)
    # The policy is kept alive with its entry, so its id cannot be reused while the entry exists.
    _BY_ID[id(policy)] = (policy, compiled)
    if len(_BY_ID) > _CACHE_SIZE:
        _BY_ID.popitem(last=False)
    return compiled


# ---------------------------------------------------------------------------------------------------- scoring

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"'})


def normalise(text: str) -> str:
    """Straight apostrophes and single spaces, so "I’m" and "I'm" match the same patterns."""
    return " ".join(text.translate(_APOSTROPHES).split())


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _fire(pattern: re.Pattern[str] | None, text: str) -> str | None:
    if pattern is None:
        return None
    found = pattern.search(text)
    return found.group(0).strip() if found else None


def _terms(domain: _Domain, text: str) -> list[str]:
    if domain.terms is None:
        return []
    return list(dict.fromkeys(m.group(0).lower() for m in domain.terms.finditer(text)))


_OWNER = re.compile(r"\b(?:my|our)\s+(?:[\w'-]+\s+){0,2}[\w'-]+", re.I)


def _owned(domain: _Domain, text: str) -> str | None:
    """``my``/``our`` followed within three words by a domain term that is not a person's role."""
    if domain.terms is None:
        return None
    for window in _OWNER.finditer(text):
        for term in domain.terms.finditer(window.group(0)):
            if term.group(0).lower() not in ROLES:
                return window.group(0)[: term.end()]
    return None


def _score_domain(domain: _Domain, text: str, cues: dict[str, str | None]) -> DomainScore:
    terms = _terms(domain, text)
    features: dict[str, float] = {}
    matched: list[str] = list(terms)
    if domain.route == "crisis":
        bias, weights = CRISIS_BIAS, CRISIS_WEIGHTS
        names = [name for name, _ in _CRISIS_CUES]
        gated = False
    else:
        bias, weights = ADVICE_BIAS, ADVICE_WEIGHTS
        names = [name for name, _ in _ADVICE_CUES + _ADVICE_NEGATIVE]
        gated = True
        owned = _owned(domain, text)
        if owned:
            features["owned_domain"] = weights["owned_domain"]
            matched.append(owned)
    if terms:
        features["domain_any"] = weights["domain_any"]
    if len(terms) > 1:
        features["domain_more"] = weights["domain_more"]
    for name in names:
        hit = cues.get(name)
        if hit is None:
            continue
        if gated and name in _PERSONAL and not terms:
            continue
        features[name] = weights[name]
        if weights[name] > 0 and name not in ("self_subject", "self_object", "self_ref"):
            matched.append(hit)
    z = bias + sum(features.values())
    return DomainScore(domain.name, domain.route, _sigmoid(z), features, list(dict.fromkeys(matched)))


def _cues(text: str, crisis: bool, advice: bool) -> dict[str, str | None]:
    cues: dict[str, str | None] = {}
    table = (_CRISIS_CUES if crisis else ()) + ((_ADVICE_CUES + _ADVICE_NEGATIVE) if advice else ())
    for name, pattern in table:
        if name not in cues:
            cues[name] = _fire(pattern, text)
    return cues


def score_domains(text: str, policy: Policy) -> list[DomainScore]:
    """The classifier's score for every domain of the policy, highest first (crisis domains keep no priority
    here; :func:`screen` applies it)."""
    text = normalise(text)
    compiled = _compiled(policy)
    if not text or not compiled.domains:
        return []
    crisis = any(d.route == "crisis" for d in compiled.domains)
    advice = any(d.route == "escalate" for d in compiled.domains)
    # Crisis and advice models share cue names with different patterns; score each with its own table.
    crisis_cues = _cues(text, crisis=True, advice=False) if crisis else {}
    advice_cues = _cues(text, crisis=False, advice=True) if advice else {}
    scores = [
        _score_domain(d, text, crisis_cues if d.route == "crisis" else advice_cues) for d in compiled.domains
    ]
    return sorted(scores, key=lambda s: s.score, reverse=True)


def _label(domain: str) -> str:
    return domain.replace("_", " ")


def screen(text: str, policy: Policy) -> RouteDecision:
    """Route one incoming message: patterns first (crisis, then escalation), then the classifier."""
    text = normalise(text)
    if not text:
        return RouteDecision("proceed", "empty message", [], "none", 0.0)
    compiled = _compiled(policy)
    layers: tuple[tuple[Route, tuple[re.Pattern[str], ...], str], ...] = (
        ("crisis", compiled.crisis, "crisis phrase"),
        ("escalate", compiled.escalation, "escalation phrase"),
    )
    for route, patterns, what in layers:
        hits = [m.group(0) for p in patterns if (m := p.search(text))]
        if hits:
            matched = list(dict.fromkeys(hits))
            return RouteDecision(route, f"{what} matched: {matched[0]!r}", matched, "pattern", 1.0)
    scores = score_domains(text, policy)
    for route, what in (("crisis", "crisis language"), ("escalate", "personal {domain} question")):
        fired = [s for s in scores if s.route == route and s.score >= THRESHOLD]
        if fired:
            best = fired[0]
            reason = f"classifier: {what.format(domain=_label(best.domain))} (score {best.score:.2f})"
            return RouteDecision(route, reason, best.matched, "classifier", round(best.score, 4))
    if scores:
        top = scores[0]
        reason = f"no policy phrase matched; classifier below threshold (highest: {_label(top.domain)} {top.score:.2f})"
    else:
        reason = "no policy phrase matched"
    return RouteDecision("proceed", reason, [], "none", 0.0)
