"""The screen's cues: general regular expressions for how people ask for personal advice and how they speak of
crisis, run on the lower-cased message (``named_person`` on the message as written).

They no longer carry hand-set weights. Each cue is one binary feature of the learned screen
(:mod:`veracity.guards.screen_model`), whose weights are fitted on the training material in ``training/screen``;
the matched text is what ``veracity screen`` shows as the cue's evidence.
"""

from __future__ import annotations

import re

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


_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"'})
_OWNER = re.compile(r"\b(?:my|our)\s+(?:[\w'-]+\s+){0,2}[\w'-]+")
CRISIS_SELF = _rx(r"\b(?:i|i'm|i've|i'd|i'll|im|ive|we|we're|we've|we'd|my|our|mine|me|myself|ourselves)\b")

# name → pattern, in the order of the learned screen's feature vector. ``third_party`` and ``general_form`` exist in
# an advice and a crisis form; both are features.
CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
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
    ("general_form", GENERAL_FORM),
    ("research_context", RESEARCH_CONTEXT),
    ("third_party", THIRD_PARTY),
    ("named_person", NAMED_PERSON),
    ("fiction", FICTION),
    ("technical", TECHNICAL),
    ("animal", ANIMAL),
    ("everyday", EVERYDAY),
    ("crisis_self", CRISIS_SELF),
    ("intent", CRISIS_INTENT),
    ("reflexive_harm", CRISIS_REFLEXIVE),
    ("hopelessness", CRISIS_HOPELESS),
    ("passive_ideation", CRISIS_PASSIVE),
    ("ending", CRISIS_ENDING),
    ("method_strong", CRISIS_METHOD_STRONG),
    ("method", CRISIS_METHOD),
    ("imminent", CRISIS_IMMINENT),
    ("disguise", CRISIS_DISGUISE),
    ("crisis_third", CRISIS_THIRD),
    ("helping_other", CRISIS_HELPING),
    ("accidental", CRISIS_ACCIDENTAL),
)
CUE_NAMES = tuple(name for name, _ in CUES)
# Cues that need the message's own capitals (everything else runs on the lower-cased text).
_CASED = frozenset({"named_person"})
# Cues whose matched text is worth showing (the rest are pronouns or negatives).
SHOWN = frozenset(
    "advice_strong advice_weak own_relation narrative urgency amount intent reflexive_harm hopelessness "
    "passive_ideation ending method_strong method imminent disguise".split()
)


def normalise(text: str) -> str:
    """Straight apostrophes and single spaces, so "I’m" and "I'm" match the same patterns."""
    return " ".join(text.translate(_QUOTES).split())


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.search(text)
    if found is None:
        return None
    return found.group(0).strip(" .,;:!?") or found.group(0)


def find_cues(text: str) -> dict[str, str]:
    """Each cue that fires on the (normalised) message → the text it matched."""
    low = text.lower()
    found: dict[str, str] = {}
    for name, pattern in CUES:
        hit = _first(pattern, text if name in _CASED else low)
        if hit is not None:
            found[name] = hit
    return found


def owned_term(terms: re.Pattern[str], low: str) -> str | None:
    """``my``/``our`` followed within three words by a domain term that is not a person's role ("my tax return")."""
    for window in _OWNER.finditer(low):
        for term in terms.finditer(window.group(0)):
            if term.group(0) not in ROLES:
                return window.group(0)[: term.end()]
    return None
