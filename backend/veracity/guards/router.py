"""The router's screen: is this message a research question, a request for personal advice, or a crisis?

Two layers, both deterministic, local and free (no search, no model call):

1. **Patterns.** The policy's ``crisis_lexicon`` (→ ``crisis``) then its ``escalation_phrases`` (→ ``escalate``):
   case-insensitive regular expressions matched at word boundaries, compiled once per policy. They catch the
   obvious phrasings ("kill myself", "my client", "should I invest") instantly.

2. **Classifier.** A small linear model (a logistic score over hand-set, documented weights; no training data)
   for requests worded in ways the patterns do not know. It scores every ``policy.classifier_domains`` entry:
   the domain's *terms* come from the policy packs (YAML); the structural *cues* are general and live here.
   Each weight is a feature's contribution to ``z``; the score is ``1 / (1 + e^-z)`` and a domain fires at
   ``score >= THRESHOLD`` (0.5, i.e. ``z >= 0``). Crisis domains are checked before advice domains, and a crisis
   score over the threshold also outranks an escalation phrase ("stockpiling my meds ... tonight is the night").

**Advice domains** (route ``escalate``). A personal-advice request touches the domain *and* is about the asker's
own situation and/or asks what to do. The personal cues count only when a domain term is present (a gated linear
model: cue × domain presence), so "Should I bring an umbrella?" never escalates, while a general question about
the domain ("What are the symptoms of diabetes?") carries no personal cue and reads as a general question.

==================  ======  =====================================================================================
feature             weight  fires on
==================  ======  =====================================================================================
bias                -4.00
domain_any          +1.50   a domain term ("landlord", "dose", "mortgage")
domain_more         +0.75   a second, different domain term
owned_domain        +1.20   my/our + (≤ 2 words) + a domain term that is not a person's role ("my tax return")
*personal cues, counted only with a domain term:*
self_subject        +1.00   I, I'm, I've ... (Malay saya/aku)
self_plural         +0.50   we, we're, we've (often society's "we", so it counts for less)
self_object         +0.70   my, our, me, mine, myself
own_relation        +0.80   my/our + a person in the asker's life (son, wife, boss, landlord, doctor ...)
narrative           +0.70   a situation: "I was charged", "I keep waking up", "my dad was diagnosed",
                            "searched my car", "for two weeks", "lately"
question            +0.40   the message asks something ("?" or an interrogative opening)
amount              +0.50   a specific sum ("$5,000", "40k", "RM 300", "2000 ringgit")
advice_strong       +1.50   "should I/my", "what should I do", "what are my options", "am I", "do I have",
                            "I might have", "do I qualify", "is it legal for me", "advise me", "what now?" ...
advice_weak         +1.00   "should we", "can I", "can my employer", "how do I get/avoid/claim ...", "is it worth",
                            "was that legal", "could it be", "is it cancer?", "any tips"
urgency             +0.50   urgent, asap, tonight, worried, scared, help, please ...
*negative cues, always counted:*
general_form        -1.20   "What is a ...", "How does ...", "Why did ...", explain, define, history of,
                            in general, "section 90A", "Act 1950"
research_context    -1.50   "I'm a law student", "for my essay", "I'm researching", "writing a report"
third_party         -0.60   people, someone, patients, investors ... (only without a first-person reference)
named_person        -1.00   a named person is the subject: "Joe Biden's", "Harry Potter's", "my doctor, Emily"
fiction             -2.00   in a movie/book/game, fictional, character ...
technical           -1.00   python, linux, server, "kill a process" ...
animal              -1.00   dog, cat, pet, vet ...
everyday            -1.00   lunch, recipe, restaurant, holiday, hotel, hobby ...
==================  ======  =====================================================================================

**Crisis domains** (route ``crisis``). Self-harm language is judged by intent, not topic: the domain terms
("suicide", "pills", "hopeless") only nudge the score; first-person intent, the asker's own hopelessness and
method-seeking carry it. Definitions, history, other people, fiction and technical homonyms pull it down.

==================  ======  =====================================================================================
bias                -3.50
domain_any/more     +1.00   crisis terms from the pack (one, and a second different one)
self_ref            +0.80   any first-person reference
intent              +3.50   I + want/plan/ready/thinking about + die/end it/hurt myself/overdose ...
reflexive_harm      +3.00   hurt/cut/burn/starve/poison myself, "I keep cutting my arms", make myself throw up
hopelessness        +2.00   the asker's own despair: "I feel worthless", "I can't take it anymore", "a burden" ...
hopelessness_more   +1.50   a second, different expression of despair
passive_ideation    +3.00   "tired of living", "no reason to live", "better off without me", "don't deserve to live"
ending              +3.00   not wake up, sleep forever, end it all, "if I wasn't around", goodbye note ...
method_strong       +3.00   painless/quickest way to die, how many X to overdose, ways to self-harm ...
method              +1.50   lethal, without anyone noticing, hide the scars, a bottle of pills, blades hidden ...
imminent            +1.00   right now, tonight, in front of me, this is it ...
disguise            +2.00   "asking for a friend", "asking for me"
general_form        -1.50   definitions, history, statistics ("What is suicide?", "Why did ...")
third_party         -1.00   he/she/they/people/someone, only when the message has no first-person reference
helping_other       -1.00   help/support a friend, prevention, warning signs ...
accidental          -2.00   accidentally, while cooking, at the gym, sports injury ...
fiction/technical   -2.00   each
==================  ======  =====================================================================================

The weights were set by hand from how people phrase such requests and checked on examples written for the
purpose (``tests/test_router.py`` holds some); no evaluation set was used to fit them. Pure Python and
deterministic: precompiled regular expressions run on the lower-cased message, about 0.2 ms per message, and every
decision is explainable feature by feature (:func:`score_domains`).
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
DomainRoute = Literal["escalate", "crisis"]


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
    route: DomainRoute
    score: float
    features: dict[str, float]
    """Feature name → its contribution to z, for the explanation."""
    matched: list[str]


# ------------------------------------------------------------------------------------------------------- cues


def _rx(*alternatives: str) -> re.Pattern[str]:
    """Cues are written in lower case and run on the lower-cased message (much faster than re.IGNORECASE).
    Alternatives that start at a word boundary share one ``(?<!\\w)`` guard, which lets the engine skip
    positions inside words without trying every alternative there."""
    at_word = [a for a in alternatives if a.startswith(r"\b")]
    others = [a for a in alternatives if not a.startswith(r"\b")]
    parts = ([r"(?<!\w)(?:" + "|".join(f"(?:{a})" for a in at_word) + ")"] if at_word else []) + [
        f"(?:{a})" for a in others
    ]
    return re.compile("|".join(parts))


_I = r"(?:i|i'm|im|i am|i've|ive|i have|i'll|i'd)"
# Who is meant to act, in crisis intent: the asker, or a part of them ("part of me wants to ...").
_I_CRISIS = (
    r"(?:i|i'm|im|i am|i've|ive|i have|i'll|i'd|part of me|my (?:mind|brain|head)|a voice|the voices?|"
    r"something in me)"
)
# The start of a sentence, after any greeting or filler.
_SENT = r"(?:^|[.!?;:]\s+|\n)\s*(?:(?:so|ok|okay|hi|hello|hey|please|but|and|also|quick question)[,:]?\s+)*"
_WHO = r"(?:he|she|they|my [\w-]+|our [\w-]+)"

SELF_SUBJECT = _rx(r"\b(?:i|i'm|i've|i'd|i'll|im|ive)\b", r"\b(?:saya|aku)\b")
# "We" is often society's we ("Should we invest in public transport?"), so it counts for less than "I".
SELF_PLURAL = _rx(r"\b(?:we|we're|we've|we'd|kami)\b")
SELF_OBJECT = _rx(r"\b(?:my|our|mine|me|myself|ourselves)\b")
OWN_RELATION = _rx(
    r"\b(?:my|our)\s+(?:[\w'-]+\s+)?(?:son|daughter|kids?|child|children|baby|toddler|teen(?:ager)?|wife|husband|"
    r"partner|spouse|fianc[eé]e?|boyfriend|girlfriend|ex|mom|mum|mother|dad|father|parents?|brother|sister|"
    r"siblings?|grand(?:ma|pa|mother|father|parents?)|aunt|uncle|cousin|family|friend|roommate|flatmate|boss|"
    r"manager|employer|landlord|landlady|tenants?|neighbou?rs?|co-?workers?|colleagues?|company|business|"
    r"doctor|gp|lawyer|accountant|adviser|advisor|newborn|infant|client)s?\b",
    r"\b(?:my|our)\s+(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten)[- ](?:year|month|week)[- ]old\b",
)
NARRATIVE = _rx(
    r"\b(?:i|we)(?:'ve|'m|'d|'re)?\s+(?:(?:have|had|am|was|were|are|just|recently|keep|kept|still|already|been|"
    r"being|got|now)\s+){0,2}(?!interested|tasked|asked|supposed|used|confused|based|related|curious|wondered)"
    r"(?:[\w-]+ed|been|had|got|gotten|received|lost|owe|owed|took|taken|signed|bought|sold|found|felt|broke|broken|"
    r"fell|woke|spent|paid|borrowed|left|quit|hit|told|made|gave|given|ran|won|sent|came|went|lent|having|getting|"
    r"feeling|taking|being|suffering|bleeding|coughing|experiencing|struggling|renting|paying|owing|facing|"
    r"dealing|living with|working for)\b",
    r"\b(?:i|we) (?:keep|kept|have been|'ve been|started|stopped|can't stop|cannot stop) \w+ing\b",
    r"\b(?:my|our) [\w'-]+(?: [\w'-]+){0,2} (?:was|were|is being|has been|have been|has gone|has become|has got|got|"
    r"just|recently|keeps|kept|started|stopped|[\w-]+ed)\b",
    r"\b(?:\w+ed|hit|took|told|sent|gave|stole|broke|sued|fired|paid|owes?|refused|denied) (?:me|my|us|our)\b",
    r"\bfor (?:the (?:past|last) )?(?:\d+|a few|a couple(?: of)?|two|three|four|five|six|several|many) "
    r"(?:days?|weeks?|months?|years?)\b",
    r"\b(?:since|ever since) (?:yesterday|this (?:morning|afternoon|week)|last (?:week|month|year|night))\b",
    r"\b(?:the )?(?:past|last) (?:few |couple of |several )?(?:days?|weeks?|months?|years?|night)\b",
    r"\b(?:lately|recently)\b",
    r"\b(?:i'm|i am|im|i've been|he's|she's) (?:currently |now |still )?on (?!the\b|a\b|an\b|my\b|holiday\b|"
    r"vacation\b|leave\b|time\b|call\b|board\b|track\b|it\b)[\w-]+",
    r"\b(?:keeps?|kept) [\w-]+ing (?:me|my|us|our)\b",
)
QUESTION = _rx(
    r"\?",
    _SENT + r"(?:what|how|should|can|could|is|are|do|does|will|would|may|am|who|which|when|where|why)\b",
)
AMOUNT = _rx(
    r"(?:[$£€]|\brm ?|\busd ?)\d",
    r"\b\d+(?:[.,]\d+)?\s?(?:k|grand|thousand|million)\b",
    r"\b\d{1,3}(?:,\d{3})+\b",
    r"\b\d[\d,.]*\s?(?:ringgit|dollars|pounds|euros|usd|sgd|rm|bucks)\b",
)
ADVICE_STRONG = _rx(
    r"\bshould (?:i|my|our)\b",
    r"\bwhat (?:should|shall|must|can|could|do|would) (?:i|we) do\b",
    r"\bwhat (?:now|next)\s*\?",
    r"\bwhat (?:are|were|is) (?:my|our) (?:options|rights|chances|odds|next steps?|best option)\b",
    r"\bwhat do you (?:recommend|suggest|advise|think i should)\b",
    r"\bwhat would you (?:recommend|suggest|advise|do)\b",
    r"\bwhat (?:[\w-]+ )?should " + _WHO + r" (?:do|choose|take|get|say|pick)\b",
    r"\b(?:do|would|will) (?:i|we) (?:need|have) to\b",
    r"\bdo (?:i|we) (?:need|require) (?!help\b)",
    r"\b(?:what|which)(?:'s| is| are)? (?:the )?(?:best|strongest|safest|right|cheapest|most effective) "
    r"(?:[\w-]+ ){0,2}(?:i|we) (?:can|could|should) (?:take|use|do|buy|get)\b",
    r"\b(?:does|do|would|will) (?:he|she|they|my [\w-]+|our [\w-]+) have (?:a|any) (?:chance|case|claim|right)\b",
    r"\b(?:do|would|will|can|could) (?:i|we) (?:qualify|be eligible|be entitled|get compensation|claim)\b",
    r"\bam i\b",
    r"\bwhat'?s wrong with (?:me|my|us|our)\b",
    r"\b(?:right|best|good|bad|safe|worth it|suitable|appropriate|smart|wise|a good (?:move|idea|choice|time|option|"
    r"investment|decision)) for (?:me|us|my [\w-]+|our [\w-]+|the baby|the foetus|the fetus)\b",
    r"\b(?:if you were me|in my (?:shoes|position|situation)|what would you do)\b",
    r"\b(?:recommend|suggest|pick|choose|prescribe|find) (?:me )?(?:an? |some |the )?(?:[\w-]+ ){0,2}for me\b",
    r"\b(?:tell|show) me (?:which|what) (?:[\w-]+ ){0,2}to (?:buy|sell|take|invest in|choose|pick|do)\b",
    r"\b(?:is|would) (?:that|this|it) (?:be )?(?:a )?(?:bad|good|smart|dumb|stupid|terrible|wise|sensible) "
    r"(?:idea|move|choice|decision|plan)\b",
    r"\b(?:risks?|downsides?|consequences|implications|dangers) (?:for|to) (?:me|us|my|our)\b",
    r"\bhow (?:much|many) of (?:my|our)\b",
    r"\b(?:can|could|are|is|will) (?:they|he|she|it|my [\w-]+|our [\w-]+) (?:legally |even |still )?(?:do that|do this|"
    r"allowed to|stop me|stop us|make me|make us|force me|force us|fire me|evict (?:me|us)|sue (?:me|us)|charge me|"
    r"take (?:my|our|it|that|them))\b",
    r"\bis (?:that|this|it) (?:an? )?(?:emergency|problem|concern|cause for concern|something to worry about)\b",
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
    r"\bwhat (?:can|could|should) (?:i|we) (?:do|claim|get|take|use|try)\b",
    r"\bdo (?:i|we) have (?!to\b)",
    r"\b(?:could|might|can) (?:i|we) (?:have|be)\b",
    r"\b(?:i|we)(?: (?:think|thought|believe|fear|suspect|worry)(?: that)? (?:i|we))? (?:might|may|could) "
    r"(?:have|be|need)\b",
    r"\b(?:can|could|will|would) you (?:please )?(?:treat|cure|replace|be) my\b",
    r"\b(?:treat|cure) (?:my|me)\b",
    r"\b(?:confirm|tell me|know) (?:if|whether) (?:i|i'm|my|we)\b",
    r"\b(?:apa|apakah) (?:yang )?(?:patut|perlu|harus|boleh) (?:saya|aku|kami) (?:buat|lakukan)\b",
    r"\b(?:patutkah|bolehkah|perlukah|adakah) (?:saya|aku|kami)\b",
)
ADVICE_WEAK = _rx(
    r"(?<!how )(?<!what )(?<!where )(?<!who )\b(?:can|could|may) (?:i|we)\b",
    r"\b(?:can|could|may) (?:my|our)\b",
    r"\bshould (?:he|she|they|we)\b",
    r"\bhow (?:do|can|should|could|would) (?:i|we) (?:get|obtain|apply|qualify|claim|avoid|get out of|get rid of|"
    r"stop|treat|cure|fix|fight|win|appeal|contest|deal with|handle|cope|recover|protect|lower|reduce|pay|repay|"
    r"file|report|prove|know if|tell if|choose|pick|prepare|manage|afford)\b",
    r"\bis (?:it|this|that) (?:normal|safe|ok|okay|serious|dangerous|bad) (?:to|if|when|that)\b",
    r"\b(?:is|would|was) it (?:be )?(?:worth|wise|smart|a good idea|better|best|sensible|advisable)\b",
    r"\b(?:is|was|would) (?:it|this|that) (?:even |be )?(?:legal|illegal|allowed|lawful|fair|enough)\b",
    r"\b(?:is|could|might) (?:it|this|that|these) (?:be )?(?:a |an |my )?(?:sign of |symptom of )?"
    r"(?!(?:true|right|correct|accurate|real|legit|a myth|a fact|so)\b)[\w-]+(?: [\w-]+)?\s*\?",
    r"\bany (?:advice|tips|suggestions|recommendations|ideas)\b",
    r"\b(?:keep|sell|buy|sign|quit|stay|wait|pay|invest|refinance|settle|take|switch|go|save|rent|fight|accept)\b"
    r"[^.?!]{0,40}\bor\b[^.?!]{0,40}\?",
    r"\b(?:best|right|smartest|safest) (?:way|option|choice|move|thing) for (?:me|us)\b",
    r"\b(?:i|we) (?:need|want) (?:help|to know)\b",
    r"\b(?:could|can|might) (?:it|this|that) (?:be|mean)\b",
    r"\bis (?:this|it|that) (?:a sign|a symptom|signs?|symptoms?) of\b",
    r"\b(?:plan|program|programme|treatment|therapy|regimen|diet|schedule|strategy|portfolio|budget)s? for "
    r"(?:me|myself|us)\b",
)
URGENCY = _rx(
    r"\b(?:urgent(?:ly)?|asap|right now|immediately|tonight|tomorrow|emergency|help|please|desperate(?:ly)?|"
    r"worried|scared|afraid|terrified|panicking|freaking out|stressed)\b",
    r"\b(?:an?|a few|\d+|two|three|four|five|ten|twenty) (?:minutes?|hours?|days?) ago\b",
    r"\b(?:this morning|last night|yesterday)\b",
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
    r"\b(?:is|was) (?:that|this|it) (?:really |actually )?(?:true|correct|accurate|a myth|real|a fact)\b",
    r"\b(?:i|we) (?:read|heard|saw) (?:that|somewhere|online|on|in)\b|\b(?:says|said|claims?|claimed) (?:that )?",
    r"\b(?:act|code|law) (?:of )?\d{4}\b",
)
RESEARCH_CONTEXT = _rx(
    r"\b(?:i'm|i am|im|we're|we are) (?:a |an )?(?:[\w-]+ )?(?:student|researcher|journalist|writer|author|teacher|"
    r"professor|lecturer|analyst|reporter|historian|academic)s?\b",
    r"\b(?:i'm|i am|im|we're|we are) (?:researching|studying|writing (?:a|an|my|our)|preparing (?:a|an))\b",
    r"\bfor (?:a|an|my|our) (?:class|course|paper|essay|thesis|report|article|assignment|project|presentation|"
    r"dissertation|lecture|research|podcast|blog post)\b",
    r"\b(?:i'm|i am|im|we're|we are) (?:building|developing|designing|creating|compiling|collecting) "
    r"(?:a|an|the|our|my) (?:[\w-]+ )?(?:dashboard|app|website|tool|model|database|dataset|report|chart|"
    r"spreadsheet|presentation|course|newsletter|podcast|video|survey)\b",
    r"\b(?:my|our) (?:research|studies|thesis|dissertation|lab)\b|\bresearch (?:group|team|project)\b",
)
THIRD_PARTY = _rx(
    r"\b(?:people|persons?|someone|somebody|anyone|anybody|one's|patients|investors|employees|employers|tenants|"
    r"landlords|consumers|citizens|individuals|companies|users|customers|workers|students|adults|society|"
    r"countries|governments?)\b"
)
NAMED_PERSON = re.compile(
    r"\b(?!(?:My|Our|I|What|Who|Where|When|How|Why|It|That|There|Here|He|She|Let|Today|Everyone|Someone|Nobody|One|"
    r"Everybody|Somebody|Anyone|Anybody|This|Which)\b)[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*(?:'s|s')(?=\s)"
    r"|\b[Mm]y [\w-]+(?: [\w-]+)?, [A-Z][a-zA-Z]+\b"
)
FICTION = _rx(
    r"\b(?:in|from|for|of) (?:a |an |the |my |this )?(?:movie|film|book|novel|story|short story|screenplay|script|"
    r"tv show|tv series|series|show|sitcom|video ?game|game|play|musical|anime|manga|comic|episode|fan ?fic\w*|"
    r"roleplay|rpg|fiction)\b",
    r"\b(?:fictional|characters?|villain|protagonist|npc|minecraft|fortnite|call of duty|gta|skyrim|the sims|"
    r"pokemon|zelda|counter-strike|world of warcraft|dungeons (?:and|&) dragons)\b",
)
TECHNICAL = _rx(
    r"\b(?:python|java(?:script)?|c\+\+|linux|unix|macos|terminal|bash|powershell|docker|kubernetes|git|sql|"
    r"database|server|cpu|gpu|browser|software|html|css|api|compiler|segfault|"
    r"segmentation fault)\b",
    r"\b(?:kill|killing|terminate|terminating|end|ending|hang|hanging|execute|executing|abort|aborting)\w* "
    r"(?:a |the |this |my |all |every )?(?:[\w-]+ )?(?:process(?:es)?|threads?|tasks?|jobs?|daemons?|programs?|"
    r"scripts?|apps?|containers?|pods?|sessions?|servers?|quer(?:y|ies)|commands?)\b",
)
EVERYDAY = _rx(
    r"\b(?:lunch|dinner|breakfast|brunch|recipes?|snacks?|restaurants?|cook(?:ing)?|bak(?:e|ing)|holiday|vacation|"
    r"hotel|sightseeing|hobby|hobbies)\b"
)
ANIMAL = _rx(
    r"\b(?:dogs?|cats?|pets?|pupp(?:y|ies)|kittens?|horses?|rabbits?|hamsters?|parrots?|vet|vets|veterinar\w*|"
    r"livestock|cattle)\b"
)
# Owning a professional ("my doctor", "my lawyer") is a relation, counted by own_relation, not an owned matter.
ROLES = frozenset(
    "doctor doctors gp physician nurse dentist pharmacist specialist therapist psychiatrist lawyer lawyers attorney "
    "attorneys solicitor solicitors barrister barristers landlord landlady employer bank banks".split()
)

# Crisis cues: judged by intent, not topic.
_WANT = r"(?:want|wants|wanted|wanna|wish|wishes|wished|ready|deserve|tempted|longing|rather|would rather)"
_PLAN = (
    r"(?:going|gonna|plan|planning|planned|decided|deciding|trying|tried|thinking (?:about|of)|thought (?:about|of)|"
    r"think (?:about|of)|considering|urge|urges|need|about|should|could|might|will|'ll|"
    r"(?:keeps? )?tell(?:s|ing)? me to|feel like|" + _WANT + ")"
)
# "end things" / "end it" are also how people talk about a relationship or a contract: not when something follows.
_NOT_AN_OBJECT = r"(?!\s+(?:with|between|for|on|at|in|off|up|early|now|here|there)\b)"
_ENDING = (
    r"(?:(?:end|ending) (?:it|it all|things|everything|this)" + _NOT_AN_OBJECT + r"|(?:end|ending) (?:my life|"
    r"my suffering)|disappear(?:ing)? forever|not (?:be here|exist|wake up|be alive)(?: any ?more)?|"
    r"(?:hurt|hurting|harm|harming|cut|cutting|kill|killing|hang|hanging|starve|starving|burn|burning|poison|"
    r"poisoning|drown|drowning|shoot|shooting|suffocate|suffocating) myself|overdos(?:e|ing)|od|"
    r"commit(?:ting)? suicide|suicide|sleep(?:ing)? forever|never wak(?:e|ing) up|"
    r"(?:jump(?:ing)?|step(?:ping)?|throw(?:ing)? myself) (?:off|from|in front of|under) (?:a|an|the|my) [\w-]+|"
    r"walk(?:ing)? into (?:traffic|the sea|the ocean|the river)|crash(?:ing)? (?:my|the) car|"
    r"tak(?:e|ing) (?:all|every one|the whole|a whole) (?:of )?(?:my |the |these )?(?:pills|tablets|meds|bottle|"
    r"pack|box|packet)|jump(?:ing)?(?=\s+(?:tonight|today|now|tomorrow)\b|\s*[.!?]|$)|"
    r"letting go(?=\s*[.!?]|$))"
)
CRISIS_INTENT = _rx(
    rf"\b{_I_CRISIS}\s+(?:[\w']+\s+){{0,6}}?{_PLAN}\s+(?:just\s+|really\s+|finally\s+|simply\s+)?(?:to\s+|of\s+)?"
    rf"{_ENDING}",
    rf"\b{_I}\s+(?:[\w']+\s+){{0,2}}?{_WANT}\s+(?:to\s+)?(?:die|be dead|stop living|stop existing|not live)\b",
    r"\b(?:saya|aku) (?:\w+ )?(?:nak|mahu|ingin|hendak) (?:bunuh diri|mati)\b",
)
CRISIS_REFLEXIVE = _rx(
    r"\b(?:hurt|hurting|harm|harming|cut|cutting|burn|burning|kill|killing|punish|punishing|starve|starving|hang|"
    r"hanging|drown|drowning|poison|poisoning|shoot|shooting|suffocate|suffocating|strangle|strangling|overdose|"
    r"overdosing)\s+myself\b",
    r"\b(?:cutting|burning|scratching|hitting|punching|carving) (?:my|myself on my|into my) (?:arms?|wrists?|legs?|"
    r"thighs?|skin|stomach|body|face)\b",
    r"\bmake myself (?:throw up|vomit|puke|sick|bleed|pass out|faint)\b",
    r"\b(?:took|swallowed|taken) (?:a whole|an entire|the whole|all (?:of )?(?:my|the)|every one of (?:my|the)|"
    r"loads of|a lot of|too many|a bunch of) (?:[\w-]+ )?(?:packet|bottle|box|pack|strip|pills|tablets|meds)\b",
    r"\b(?:i|i've|i have) (?:cut|burned|burnt|hurt myself|harmed myself|self[- ]?harmed|relapsed)(?: myself)? again\b",
    r"\bdeeper this time\b",
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
    r"\b(?:no (?:point|hope|future|way out) (?:in |to |for me)?(?:anything|trying|me)|"
    r"what'?s the point (?:of|in) (?:anything|trying)|what'?s the point any ?more|"
    r"nothing matters any ?more|no ?one (?:would|will) (?:care|miss me|notice)|"
    r"nobody (?:would|will) (?:even |really |ever )?(?:care|miss me|notice)|no ?one cares about me|"
    r"nobody cares about me|no ?one (?:would|will) (?:even |really |ever )?(?:care|miss me|notice)|"
    r"nothing (?:helps|works) any ?more|nothing helps|everything hurts|"
    r"(?:happier) (?:off )?without me|(?:a|such a) burden (?:to|on) (?:everyone|everybody|my|them)|"
    r"can'?t (?:take|do|handle|bear) (?:it|this|this pain|the pain|life) any ?more|"
    r"give up on (?:life|everything|myself)|"
    r"hate (?:myself|my life|being alive)|empty inside|want (?:it|everything|the pain) to (?:stop|end)|"
    r"make (?:it|the pain) stop|"
    r"nothing (?:ever )?(?:gets|will get|is going to get) better|"
    r"(?:it|things|life) (?:will )?never (?:gets?|be|going to be) better|"
    r"when (?:it|things|everything) (?:gets?|get) (?:bad|too much|really bad|too hard)|putus asa)\b",
)
# Passive suicidal ideation: no plan named, but the wish not to live is. Weighted like an ending.
CRISIS_PASSIVE = _rx(
    r"\b(?:no (?:point|reason) (?:in |to )?(?:living|live|go on|going on|keep going|be alive|being alive)|"
    r"what'?s the point (?:of|in) (?:living|life|going on|being alive)|nothing (?:left )?to live for|"
    r"(?:better|happier) off (?:dead|without me)|(?:everyone|everybody|they|people|my family) (?:would|will|'d) be "
    r"(?:better|happier) (?:off )?(?:without me|if i)|can'?t go on(?: living| like this| any ?more)?|"
    r"tired of (?:living|life|being alive|existing)|done with (?:life|living|being alive)|"
    r"(?:don'?t|do not) deserve to (?:live|be alive|be here|exist)|(?:hate|hating) being alive|"
    r"wish i (?:was|were|could be) dead|wish i (?:had )?never (?:been born|existed)|"
    r"wish i (?:wouldn'?t|didn'?t|won'?t|would not|did not|could not|couldn'?t) wake up|"
    r"point (?:in|of) (?:living|being alive|life|going on|staying alive)|"
    r"(?:whether|if) i (?:live|lived) or (?:die|died)|"
    r"giv(?:e|ing) (?:away )?(?:all )?(?:my|of my) (?:things|stuff|belongings|possessions)(?: away)?)\b"
)
CRISIS_ENDING = _rx(
    r"\b(?:(?:not|never) (?:to )?wake up(?: again| ever again| tomorrow)?(?=\s*(?:[.?!,;]|$|and\b|but\b))|"
    r"sleep forever|disappear forever|not (?:be|being) (?:here|around|alive) any ?more|"
    r"(?:end|ending) (?:it all|everything|things)" + _NOT_AN_OBJECT + r"|"
    r"say(?:ing)? (?:my )?goodbyes?|final goodbye|last goodbye|goodbye (?:letter|note)|suicide note|"
    r"until (?:i|we) (?:die|am dead|pass out|starve)|"
    r"(?:if|when|once) i (?:wasn't|weren't|wasnt|was not|were not|am not|'m not|was no longer|am no longer|"
    r"was gone|am gone|were gone|died|disappeared)(?: (?:around|here|alive))?|"
    r"(?:won'?t|will not|not going to|don'?t think i'?ll|don'?t think i will) be (?:here|around|alive) "
    r"(?:much longer|for (?:much )?longer|for long|tomorrow|next week)|"
    r"(?:wrote|written|writing|finished) my note|(?:suicide|goodbye|farewell) (?:note|letter|message)s?|"
    r"(?:this is|here is|these are) my (?:last|final) (?:message|post|note|words|goodbye)|"
    r"goodbye (?:everyone|everybody|world|all|forever|cruel world)|(?:pass out|sleep|rest) forever|"
    r"(?:this|today|tonight|this weekend|this week|tomorrow) (?:will be|is going to be|is) my last(?=\s*[.!?]|$| day)|"
    r"(?:imagin|fantasi[sz]|dream)\w* (?:about )?my (?:own )?(?:funeral|death|suicide))\b"
)
CRISIS_METHOD_STRONG = _rx(
    r"\b(?:painless|quick|quickest|easiest|fastest|surest|best|simplest|least painful|peaceful|effective)\s+"
    r"(?:way|ways|method|methods|means)\s+(?:to|of)\s+(?:die|dying|kill (?:myself|yourself|oneself)|"
    r"end (?:my|your|one'?s) (?:own )?life|end (?:it all|things|everything)|commit(?:ting)? suicide|suicide|"
    r"overdos\w*|od|go|do it|end it)\b(?=\s*(?:[.?!,]|$)|\s+(?:quickly|fast|peacefully|painlessly))",
    r"\bhow (?:much|many)\s+(?:[\w-]+\s+){0,3}?(?:to|would|will|is|are|does|do|before|it takes|it take)\s+"
    r"(?:[\w']+\s+){0,4}?(?:die|overdose|od|kill (?:me|myself)|be (?:fatal|lethal|deadly)|stop (?:my|your|a) heart|"
    r"not wake up|never wake up)\b",
    r"\b(?:lethal|fatal|deadly|overdose) (?:dose |amount )?(?:\w+ )?for "
    r"(?:me|someone (?:my|of my) (?:size|weight|age))\b",
    r"\bhow (?:high|tall|far|deep|long) (?:[\w-]+ ){0,6}?(?:to (?:die|kill (?:me|myself|you|yourself)|not survive)|"
    r"(?:don'?t|won'?t|wouldn'?t|not) survive|(?:be|is) (?:fatal|lethal|deadly))\b",
    r"\b(?:tie|tying|make|making) a noose\b",
    r"\bif i (?:jumped|jump|took|take|drank|drink|swallowed|swallow|overdosed|overdose|hung|hang|cut) [^.?!]{0,40}"
    r"(?:would|will|could) (?:it|i) (?:be (?:instant|quick|painless|fatal|enough)|die|survive|"
    r"feel (?:it|anything)|hurt)\b",
    r"\b(?:would|could|will) (?:make me|kill me)(?: (?:pass out|stop breathing|die))?"
    r"(?: forever| for good| permanently)\b",
    r"\bhow long (?:does it |would it |will it |it )?takes? to (?:bleed out|die|overdose|suffocate|drown)\b",
    r"\bmake sure (?:i|you|one) (?:don'?t|do not|won'?t|never) (?:survive|wake up)\b",
    r"\bhow (?:to|do i|can i|should i) (?:die|kill myself|commit suicide|end my life|overdose|self[- ]?harm)\b",
    r"\b(?:ways?|methods?|objects?|items?|tools?|things?|means|techniques?|places?) (?:\w+ )?(?:to|of|for) "
    r"(?:self[- ]?harm\w*|(?:harm|hurt|cut|burn|kill)(?:ing)? (?:myself|yourself|oneself)|suicide|die|"
    r"commit(?:ting)? suicide|end(?:ing)? (?:my|your|one'?s) (?:own )?life)\b",
    r"\b(?:used?|using) (?:for|to|in) (?:self[- ]?harm\w*|suicide|(?:harm|hurt|cut|kill)(?:ing)? (?:myself|oneself))\b",
    r"\b(?:help|teach|show|tell) me (?:to |how to )?(?:self[- ]?harm|hurt myself|harm myself|kill myself|die|"
    r"cut myself|end my life)\b",
    r"\b(?:stockpil\w*|hoard(?:ing)?|sav(?:e|ing) up) (?:my |all my |the )?(?:pills|meds|tablets|medications?|"
    r"painkillers|sleeping pills)\b",
)
CRISIS_METHOD = _rx(
    r"\b(?:lethal|fatal|deadly|painless(?:ly)?|bleed out|where to cut|how deep|(?:high|tall) enough)\b",
    r"\bwithout (?:anyone|anybody|people|my (?:\w+ )?(?:parents|family|friends|wife|husband|partner|mum|mom|dad)) "
    r"(?:noticing|knowing|finding out|seeing)\b",
    r"\bhide (?:the |my |these )?(?:[\w-]+ )?(?:cuts|scars|marks|bruises|wounds)\b",
    r"\b(?:bottle|handful|box|pack|packet|stash|jar) of (?:my )?(?:pills|tablets|meds|painkillers|sleeping pills|"
    r"paracetamol)\b",
    r"\bkill (?:themselves|yourself|oneself|myself) (?:with|using|by)\b",
    r"\b(?:hidden|stashed|hiding|saved up|keep|kept) (?:[\w-]+ ){0,2}"
    r"(?:razors?|razor blades|blades|pills|rope|a noose|a gun)\b",
    r"\b(?:razors?|razor blades|blades|pills|rope) (?:hidden|stashed|saved|ready)\b",
    r"\bhow (?:many|much) (?:[\w-]+ ){0,3}(?:is|are|would be|to be) (?:a )?(?:lethal|fatal|deadly)\b",
    r"\b(?:deadly|lethal|fatal) in (?:large|high|big) (?:amounts|doses|quantities)\b",
)
CRISIS_IMMINENT = _rx(
    r"\b(?:right now|tonight|in front of me|this is it|today is the day|tonight is the night|this weekend|"
    r"before (?:anyone|everyone) wakes up|one last time|for the last time)\b"
)
# "Asking for a friend" / "asking for me": a general-sounding question that is about the asker after all.
CRISIS_DISGUISE = _rx(r"\basking for (?:me|myself|a friend)\b", r"\b(?:it'?s|this is) for me\b")
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

# -------------------------------------------------------------------------------------------------- weights

ADVICE_BIAS = -4.0
ADVICE_WEIGHTS: dict[str, float] = {
    "domain_any": 1.5,
    "domain_more": 0.75,
    "owned_domain": 1.2,
    "self_subject": 1.0,
    "self_plural": 0.5,
    "self_object": 0.7,
    "own_relation": 0.8,
    "narrative": 0.7,
    "question": 0.4,
    "amount": 0.5,
    "advice_strong": 1.5,
    "advice_weak": 1.0,
    "urgency": 0.5,
    "general_form": -1.2,
    "research_context": -1.5,
    "third_party": -0.6,
    "named_person": -1.0,
    "fiction": -2.0,
    "technical": -1.0,
    "animal": -1.0,
    "everyday": -1.0,
}
# Personal cues: counted only when the message touches the domain.
_ADVICE_PERSONAL: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("self_subject", SELF_SUBJECT),
    ("self_plural", SELF_PLURAL),
    ("self_object", SELF_OBJECT),
    ("own_relation", OWN_RELATION),
    ("narrative", NARRATIVE),
    ("question", QUESTION),
    ("amount", AMOUNT),
    ("advice_strong", ADVICE_STRONG),
    ("advice_weak", ADVICE_WEAK),
    ("urgency", URGENCY),
)
_ADVICE_NEGATIVE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("general_form", GENERAL_FORM),
    ("research_context", RESEARCH_CONTEXT),
    ("third_party", THIRD_PARTY),
    ("named_person", NAMED_PERSON),
    ("fiction", FICTION),
    ("technical", TECHNICAL),
    ("animal", ANIMAL),
    ("everyday", EVERYDAY),
)

CRISIS_BIAS = -3.5
CRISIS_WEIGHTS: dict[str, float] = {
    "domain_any": 1.0,
    "domain_more": 1.0,
    "self_ref": 0.8,
    "intent": 3.5,
    "reflexive_harm": 3.0,
    "hopelessness": 2.0,
    "hopelessness_more": 1.5,
    "passive_ideation": 3.0,
    "ending": 3.0,
    "method_strong": 3.0,
    "method": 1.5,
    "imminent": 1.0,
    "disguise": 2.0,
    "general_form": -1.5,
    "third_party": -1.0,
    "helping_other": -1.0,
    "accidental": -2.0,
    "fiction": -2.0,
    "technical": -2.0,
}
_CRISIS_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("self_ref", _rx(r"\b(?:i|i'm|i've|i'd|i'll|im|ive|we|we're|we've|we'd|my|our|mine|me|myself|ourselves)\b")),
    ("intent", CRISIS_INTENT),
    ("reflexive_harm", CRISIS_REFLEXIVE),
    ("hopelessness", CRISIS_HOPELESS),
    ("passive_ideation", CRISIS_PASSIVE),
    ("ending", CRISIS_ENDING),
    ("method_strong", CRISIS_METHOD_STRONG),
    ("method", CRISIS_METHOD),
    ("imminent", CRISIS_IMMINENT),
    ("disguise", CRISIS_DISGUISE),
    ("general_form", GENERAL_FORM),
    ("third_party", CRISIS_THIRD),
    ("helping_other", CRISIS_HELPING),
    ("accidental", CRISIS_ACCIDENTAL),
    ("fiction", FICTION),
    ("technical", TECHNICAL),
)
# Cues whose matched text is worth showing in ``matched`` (the rest are pronouns or negatives).
_SHOWN = frozenset(
    "advice_strong advice_weak own_relation narrative urgency amount intent reflexive_harm hopelessness "
    "passive_ideation ending "
    "method_strong method imminent".split()
)

# ------------------------------------------------------------------------------------------------ compiling


def _bounded(pattern: str) -> str:
    return f"(?<!\\w)(?:{pattern})(?!\\w)"


@dataclass(frozen=True)
class _Domain:
    name: str
    route: DomainRoute
    terms: re.Pattern[str] | None


@dataclass(frozen=True)
class _Compiled:
    crisis: tuple[re.Pattern[str], ...]
    escalation: tuple[re.Pattern[str], ...]
    domains: tuple[_Domain, ...]
    crisis_any: re.Pattern[str] | None
    escalation_any: re.Pattern[str] | None
    """All patterns of a list in one expression: one scan to learn whether any of them matches at all."""


_Key = tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str, tuple[str, ...]], ...]]


def _compile_key(key: _Key) -> _Compiled:
    crisis, escalation, domains = key
    compiled_domains = []
    for name, route, terms in domains:
        term_rx = _policy_rx("|".join(f"(?:{t})" for t in terms)) if terms else None
        compiled_domains.append(_Domain(name, "crisis" if route == "crisis" else "escalate", term_rx))
    return _Compiled(
        crisis=tuple(_policy_rx(p) for p in crisis),
        escalation=tuple(_policy_rx(p) for p in escalation),
        domains=tuple(compiled_domains),
        crisis_any=_any_rx(crisis),
        escalation_any=_any_rx(escalation),
    )


_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")


def _any_rx(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """None when the list is empty or cannot be joined safely (a back-reference would be renumbered)."""
    if not patterns or any(_BACKREFERENCE.search(p) for p in patterns):
        return None
    joined = "|".join(f"(?:{p})" for p in patterns)
    return re.compile(_bounded(joined), 0 if joined == joined.lower() else re.I)


def _policy_rx(pattern: str) -> re.Pattern[str]:
    """A policy pattern, run on the lower-cased message: case-insensitive by construction when the pattern is
    lower case, with re.IGNORECASE kept for any pattern that is not (an upper-case escape such as \\W)."""
    return re.compile(_bounded(pattern), 0 if pattern == pattern.lower() else re.I)


_BY_KEY: OrderedDict[_Key, _Compiled] = OrderedDict()
_BY_ID: OrderedDict[int, tuple[Policy, _Compiled]] = OrderedDict()
_CACHE_SIZE = 128


def _compiled(policy: Policy) -> _Compiled:
    """Compile once per policy: looked up by identity first (no work at all), then by the patterns themselves."""
    entry = _BY_ID.get(id(policy))
    if entry is not None and entry[0] is policy:
        return entry[1]
    key: _Key = (
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
    # The entry holds the policy itself, so its id cannot be reused by another object while the entry exists.
    _BY_ID[id(policy)] = (policy, compiled)
    if len(_BY_ID) > _CACHE_SIZE:
        _BY_ID.popitem(last=False)
    return compiled


# -------------------------------------------------------------------------------------------------- scoring

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"'})
_OWNER = re.compile(r"\b(?:my|our)\s+(?:[\w'-]+\s+){0,2}[\w'-]+")
# Cues that need the message's own capitals (everything else runs on the lower-cased text).
_CASED = frozenset({"named_person"})


def normalise(text: str) -> str:
    """Straight apostrophes and single spaces, so "I’m" and "I'm" match the same patterns."""
    return " ".join(text.translate(_QUOTES).split())


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.search(text)
    if found is None:
        return None
    return found.group(0).strip(" .,;:!?") or found.group(0)


def _terms(domain: _Domain, text: str) -> list[str]:
    if domain.terms is None:
        return []
    return list(dict.fromkeys(m.group(0) for m in domain.terms.finditer(text)))


def _owned(domain: _Domain, text: str) -> str | None:
    """``my``/``our`` followed within three words by a domain term that is not a person's role."""
    if domain.terms is None:
        return None
    for window in _OWNER.finditer(text):
        for term in domain.terms.finditer(window.group(0)):
            if term.group(0) not in ROLES:
                return window.group(0)[: term.end()]
    return None


def _score(domain: _Domain, text: str, cues: dict[str, str | None]) -> DomainScore:
    terms = _terms(domain, text)
    matched: list[str] = list(terms)
    features: dict[str, float] = {}
    crisis = domain.route == "crisis"
    weights = CRISIS_WEIGHTS if crisis else ADVICE_WEIGHTS
    if terms:
        features["domain_any"] = weights["domain_any"]
    if len(terms) > 1:
        features["domain_more"] = weights["domain_more"]
    if crisis:
        for name, _ in _CRISIS_CUES:
            if cues.get(name) is not None:
                features[name] = weights[name]
        if "third_party" in features and "self_ref" in features:
            del features["third_party"]  # "they'd be better off without me" is still about the asker
        if "hopelessness" in features and cues.get("hopelessness_more"):
            features["hopelessness_more"] = weights["hopelessness_more"]
    else:
        if terms:
            owned = _owned(domain, text)
            if owned:
                features["owned_domain"] = weights["owned_domain"]
                matched.append(owned)
            for name, _ in _ADVICE_PERSONAL:
                if cues.get(name) is not None:
                    features[name] = weights[name]
        for name, _ in _ADVICE_NEGATIVE:
            if cues.get(name) is not None:
                features[name] = weights[name]
        if "third_party" in features and features.keys() & {"self_subject", "self_plural", "self_object"}:
            del features["third_party"]  # "someone is using photos of me" is still the asker's situation
    matched += [hit for name in features if name in _SHOWN and (hit := cues.get(name))]
    z = (CRISIS_BIAS if crisis else ADVICE_BIAS) + sum(features.values())
    return DomainScore(domain.name, domain.route, _sigmoid(z), features, list(dict.fromkeys(matched)))


def _cues(
    text: str, low: str, table: tuple[tuple[str, re.Pattern[str]], ...], memo: dict[int, str | None]
) -> dict[str, str | None]:
    """The first match of each cue (``memo`` shares the cues the two models have in common)."""
    cues: dict[str, str | None] = {}
    for name, pattern in table:
        key = id(pattern)
        if key not in memo:
            memo[key] = _first(pattern, text if name in _CASED else low)
        cues[name] = memo[key]
    return cues


def _scores(text: str, compiled: _Compiled) -> list[DomainScore]:
    """Every domain's score; ``text`` is already normalised."""
    low = text.lower()
    routes = {d.route for d in compiled.domains}
    memo: dict[int, str | None] = {}
    crisis_cues = _cues(text, low, _CRISIS_CUES, memo) if "crisis" in routes else {}
    if crisis_cues.get("hopelessness"):
        despair = {m.group(0) for m in CRISIS_HOPELESS.finditer(low)}
        crisis_cues["hopelessness_more"] = " / ".join(sorted(despair)) if len(despair) > 1 else None
    advice_cues = _cues(text, low, _ADVICE_PERSONAL + _ADVICE_NEGATIVE, memo) if "escalate" in routes else {}
    scores = [_score(d, low, crisis_cues if d.route == "crisis" else advice_cues) for d in compiled.domains]
    return sorted(scores, key=lambda s: s.score, reverse=True)


def score_domains(text: str, policy: Policy) -> list[DomainScore]:
    """The classifier's score for each of the policy's domains, highest first, with the features that fired."""
    text = normalise(text)
    return _scores(text, _compiled(policy)) if text else []


def _label(domain: str) -> str:
    return domain.replace("_", " ")


def screen(text: str, policy: Policy) -> RouteDecision:
    """Route one incoming message: patterns first (crisis, then escalation), then the classifier."""
    text = normalise(text)
    if not text:
        return RouteDecision("proceed", "empty message", [], "none", 0.0)
    compiled = _compiled(policy)
    low = text.lower()
    layers: tuple[tuple[Route, tuple[re.Pattern[str], ...], re.Pattern[str] | None, str], ...] = (
        ("crisis", compiled.crisis, compiled.crisis_any, "crisis phrase"),
        ("escalate", compiled.escalation, compiled.escalation_any, "escalation phrase"),
    )
    scores: list[DomainScore] | None = None
    for route, patterns, any_of, what in layers:
        if any_of is not None and any_of.search(low) is None:
            continue
        hits = [m.group(0) for p in patterns if (m := p.search(low))]
        if hits:
            matched = list(dict.fromkeys(hits))
            if route == "escalate":
                # Crisis outranks escalation: a personal-advice phrase does not hide crisis language around it.
                scores = _scores(text, compiled)
                crisis = [s for s in scores if s.route == "crisis" and s.score >= THRESHOLD]
                if crisis:
                    reason = (
                        f"classifier: crisis language (score {crisis[0].score:.2f}); "
                        f"escalation phrase also matched: {matched[0]!r}"
                    )
                    return RouteDecision("crisis", reason, crisis[0].matched, "classifier", round(crisis[0].score, 4))
            return RouteDecision(route, f"{what} matched: {matched[0]!r}", matched, "pattern", 1.0)
    scores = _scores(text, compiled) if scores is None else scores
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
