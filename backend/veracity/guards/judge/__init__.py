"""L2, the grounding judge: is a claim supported by its cited sources, and by which sentences?

- ``contract``: ``Source``, ``Span``, ``Judgement`` and the ``GroundingJudge`` protocol every judge speaks;
- ``words``, ``clauses`` and ``sources``: a claim's and its sources' words (over the shared analyser,
  ``veracity.text``), the claim's clauses, the source sentences and which of their words meet the claim's;
- ``lexical``: the lexical reading (clause coverage, numbers by value, names, negation) and ``LexicalJudge``;
- ``signals`` and ``learned``: the offline judge ``make_judge`` returns, the lexical reading and the semantic
  model's similarity weighed by logistic models fitted in ``fit`` on ``training/judge`` (read by ``material``);
- ``claims``: an input of several sentences judged claim by claim, labelled by its worst claim.
"""

from veracity.guards.judge.learned import LearnedJudge, make_judge
from veracity.guards.judge.lexical import LexicalJudge
from veracity.ports import LABEL_ORDER, GroundingJudge, Judgement, Label, Source, Span

__all__ = [
    "LABEL_ORDER",
    "GroundingJudge",
    "Judgement",
    "Label",
    "LearnedJudge",
    "LexicalJudge",
    "Source",
    "Span",
    "make_judge",
]
