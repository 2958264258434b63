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


def test_a_template_file_is_read_once_while_it_stays_the_same_and_again_once_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(VALID.format(id="demo"))
    first = load_spec_file(path)
    assert load_spec_file(path) is first  # the same bytes: not parsed nor validated again
    path.write_text(VALID.format(id="demo").replace("title: T\n", "title: U\n"))  # the same size, maybe the same tick
    changed = load_spec_file(path)
    assert changed is not first and changed.title == "U"
    path.write_text("id: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec_file(path)  # a broken edit is refused, not masked by the earlier read
    # The same bytes under another name are checked under that name: the id must match it.
    path.write_text(VALID.format(id="demo"))
    other = tmp_path / "other.yaml"
    other.symlink_to(path)
    with pytest.raises(SpecError, match="does not match the file name"):
        load_spec_file(other)


def test_page_templates_compiled_once_are_compiled_again_when_their_source_changes(tmp_path: Path) -> None:
    from jinja2 import Environment, FileSystemLoader

    from veracity.web.app import COMPILED_PAGES

    compiled: list[str] = []

    class Counting(Environment):
        def compile(self, source, name=None, filename=None, raw=False, defer_init=False):  # type: ignore[no-untyped-def,override]
            compiled.append(source)
            return super().compile(source, name, filename, raw, defer_init)

    def render() -> str:
        env = Counting(loader=FileSystemLoader(tmp_path), bytecode_cache=COMPILED_PAGES)
        return env.get_template("page.html").render(name="a")

    (tmp_path / "page.html").write_text("<p>{{ name }}</p>")
    assert render() == "<p>a</p>" and render() == "<p>a</p>"
    assert compiled == ["<p>{{ name }}</p>"]  # the second environment loaded the first one's code
    (tmp_path / "page.html").write_text("<h1>{{ name }}</h1>")
    assert render() == "<h1>a</h1>"
    assert compiled == ["<p>{{ name }}</p>", "<h1>{{ name }}</h1>"]
