from pathlib import Path

import pytest

from veracity.errors import BadInput
from veracity.specs.registry import SpecError, SpecRegistry, load_spec_file


def test_bundled_specs_have_the_sections_the_templates_promise() -> None:
    registry = SpecRegistry.load()
    brief = registry.get("market_brief")
    assert [(s.id, s.required, s.min_evidence) for s in brief.sections] == [
        ("executive_summary", True, 1),
        ("key_findings", True, 2),
        ("market_landscape", False, 1),
        ("data_notes", False, 1),
    ]
    memo = registry.get("investment_memo")
    assert [(s.id, s.required, s.min_evidence) for s in memo.sections] == [
        ("thesis", True, 1),
        ("bull_base_bear", True, 1),
        ("competitors", False, 1),
        ("funding_landscape", False, 1),
        ("risks", True, 0),
    ]


def test_unknown_template_names_the_known_ones() -> None:
    with pytest.raises(BadInput) as info:
        SpecRegistry.load().get("nope")
    assert (
        info.value.message == "Unknown template 'nope'. Known templates: "
        "answer, coach_reply, investment_memo, legal_research, market_brief, support_answer."
    )


VALID = """
id: {id}
title: T
description: D
done_means: X
sections:
  - id: a
    title: A
    description: a section
    required: true
"""


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (VALID.format(id="demo") + "    colour: red\n", "Extra inputs are not permitted"),
        (
            VALID.format(id="demo") + "  - id: a\n    title: B\n    description: again\n",
            "duplicate section ids",
        ),
        (VALID.format(id="other"), "does not match the file name"),
        (VALID.format(id="demo") + "composer:\n  min_chars: 10\n  max_chars: 5\n", "min_chars is larger"),
        (VALID.format(id="demo") + "policy:\n  forbidden_patterns: ['([']\n", "forbidden_patterns"),
        ("- just\n- a list\n", "one mapping"),
        ("id: [unclosed\n", "not valid YAML"),
    ],
)
def test_malformed_spec_is_refused_at_load(tmp_path: Path, body: str, fragment: str) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(body)
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    assert fragment in str(info.value)


def test_spec_registry_refuses_duplicate_ids_across_folders(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "demo.yaml").write_text(VALID.format(id="demo"))
    (tmp_path / "b" / "demo.yaml").write_text(VALID.format(id="demo"))
    with pytest.raises(SpecError, match="defined twice"):
        SpecRegistry.load(tmp_path / "a", tmp_path / "b")
