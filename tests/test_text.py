"""The shared sentence splitter (``veracity.text.sentence_spans``): where a line break ends a sentence."""

from __future__ import annotations

from veracity.guards.judge.claims import split_claims
from veracity.ports import SearchHit
from veracity.search.evidence import read_passage
from veracity.text import sentence_spans


def sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]


PAGE = (
    "Silver Reel Archive — Film History\n"
    "Home > Biographies > Actresses\n"
    "Marisol Vendrecht (1921–1994)\n"
    "Marisol Vendrecht was born on 14 March 1921 in Oskelund, a small lake town where her father kept a shop.\n"
    "[Photo: Vendrecht on set, 1945]\n"
    "Her breakthrough came with Winter Orchard (1943), directed by Pieter Gaul.\n"
    "Filmography (selected)\n"
    "1940 | The Lantern Keeper | dir. Anselm Rook | Greta (uncredited)\n"
    "1943 | Winter Orchard | dir. Pieter Gaul | Ilse Marran\n"
)


def test_an_extracted_page_s_menu_heading_caption_and_table_rows_are_lines_of_their_own() -> None:
    assert sentences(PAGE) == [
        "Silver Reel Archive — Film History",
        "Home > Biographies > Actresses",
        "Marisol Vendrecht (1921–1994)",
        "Marisol Vendrecht was born on 14 March 1921 in Oskelund, a small lake town where her father kept a shop.",
        "[Photo: Vendrecht on set, 1945]",
        "Her breakthrough came with Winter Orchard (1943), directed by Pieter Gaul.",
        "Filmography (selected)",
        "1940 | The Lantern Keeper | dir. Anselm Rook | Greta (uncredited)",  # a row is one record
        "1943 | Winter Orchard | dir. Pieter Gaul | Ilse Marran",
    ]


def test_hard_wrapped_prose_stays_one_sentence_even_where_a_line_opens_with_a_name() -> None:
    text = (
        "The contract was signed in the spring after a long negotiation with\n"
        "Halvard Studios, which had offered a shorter term the year before and\n"
        "wanted an option on two more films. The studio agreed in May.\n"
    )
    assert sentences(text) == [
        "The contract was signed in the spring after a long negotiation with\n"
        "Halvard Studios, which had offered a shorter term the year before and\n"
        "wanted an option on two more films.",
        "The studio agreed in May.",
    ]


def test_list_items_are_sentences_and_an_item_s_number_is_not_one() -> None:
    text = "Bring these:\n- a passport\n- Two photos\n1. Fill in the form\n2) Pay the fee\nHe was no. 1. She came."
    assert sentences(text) == [
        "Bring these:",
        "- a passport",
        "- Two photos",
        "1. Fill in the form",
        "2) Pay the fee",
        "He was no. 1.",
        "She came.",
    ]


def test_a_line_ending_in_a_comma_or_lower_case_continuation_is_not_cut() -> None:
    assert sentences("Revenue rose in 2021,\nProfit fell") == ["Revenue rose in 2021,\nProfit fell"]
    assert sentences("Revenue rose\nin 2021") == ["Revenue rose\nin 2021"]


def test_offsets_point_into_the_text_and_blank_lines_still_end_sentences() -> None:
    text = "Title line\n\nFirst sentence here. Second one\nThird line"
    spans = sentence_spans(text)
    assert [text[s:e] for s, e in spans] == ["Title line", "First sentence here.", "Second one", "Third line"]
    assert all(text[s:e] == text[s:e].strip() for s, e in spans)


def test_a_verified_input_of_unpunctuated_lines_is_judged_line_by_line() -> None:
    # /v1/verify and `veracity verify` split multi-sentence input into claims with the same splitter.
    assert split_claims("Revenue rose 5% in 2021\nProfit fell to 2 million") == [
        "Revenue rose 5% in 2021",
        "Profit fell to 2 million",
    ]


def test_a_lone_long_line_above_a_list_is_not_taken_for_wrapped_prose() -> None:
    text = (
        "The term refers to the six classical simple machines defined by Renaissance scientists: Lever\n"
        "Wheel and axle\nPulley\nInclined plane"
    )
    assert sentences(text) == [
        "The term refers to the six classical simple machines defined by Renaissance scientists: Lever",
        "Wheel and axle",
        "Pulley",
        "Inclined plane",
    ]


def test_prose_wrapped_in_proportional_type_stays_whole_where_a_line_opens_with_a_capital() -> None:
    # A PDF page's lines: wrapped, of uneven length (proportional type: the second line would have held "The" in
    # fixed-width type), some opening with a capitalised word.
    text = (
        "The committee reviewed the annual budget in detail and approved the\n"
        "Funding of three new programmes, subject to costs set by\n"
        "The Treasury in the autumn. A second meeting is planned."
    )
    assert sentences(text) == [
        "The committee reviewed the annual budget in detail and approved the\n"
        "Funding of three new programmes, subject to costs set by\n"
        "The Treasury in the autumn.",
        "A second meeting is planned.",
    ]


NOTE = (
    "Riverside Community Clinic\n"
    "Home | Services | Opening hours | Contact\n"
    "Opening hours\n"
    "Monday to Friday: 8am to 6pm\n"
    "Saturday: 9am to 1pm\n"
    "The clinic is closed on Sundays and public holidays.\n"
    "Fees\n"
    "Service | Price | Notes\n"
    "Standard consultation | 45 EUR | 20 minutes\n"
    "Repeat prescription | free | registered patients only\n"
)


def test_a_note_s_evidence_is_its_sentences_and_the_records_that_state_a_figure_never_a_heading_or_menu() -> None:
    # Before, the note's first "sentence" was everything up to the first full stop, menu and headings included.
    hit = SearchHit(doc_id="clinic", title="clinic", text=NOTE, start=0, end=len(NOTE), score=1.0)
    assert [c.text for c in read_passage(hit, "2025-01-01T00:00:00+00:00")[0]] == [
        "Monday to Friday: 8am to 6pm",
        "Saturday: 9am to 1pm",
        "The clinic is closed on Sundays and public holidays.",
        "Standard consultation | 45 EUR | 20 minutes",
    ]


def test_a_paragraph_holding_two_pipes_is_no_table_row() -> None:
    text = "Shell pipelines such as cat a.txt | grep foo | wc -l count lines. The command was added in 1971. It lasts."
    assert sentences(text) == [
        "Shell pipelines such as cat a.txt | grep foo | wc -l count lines.",
        "The command was added in 1971.",
        "It lasts.",
    ]


def test_a_line_ending_on_the_or_of_runs_on_and_a_final_newline_changes_nothing() -> None:
    assert sentences("The clinic opened in\n2019 and serves 4,000 patients.") == [
        "The clinic opened in\n2019 and serves 4,000 patients."
    ]
    text = "The committee reviewed the annual budget and approved the\nFunding of three new programmes."
    assert sentences(text) == sentences(text + "\n") == [text]


def test_a_heading_ending_in_a_colon_heads_its_records_without_swallowing_the_first() -> None:
    text = "Opening hours:\nMonday to Friday: 8am to 6pm\nSaturday: 9am to 1pm\n"
    assert sentences(text) == ["Opening hours:", "Monday to Friday: 8am to 6pm", "Saturday: 9am to 1pm"]


def test_a_page_s_furniture_is_no_record_but_a_figure_in_a_row_or_label_line_is() -> None:
    from veracity.search.evidence import is_fact_shaped

    furniture = [
        "Posted: 3 May 2021",
        "Figure 2: Revenue by region",
        "© 2024 Clinic | Privacy | Terms",
        "Service | Price | Notes",
    ]
    assert not any(is_fact_shaped(line) for line in furniture)
    records = ["Population: 1,234,567 (2020 census)", "1943 | Winter Orchard | dir. Pieter Gaul | Ilse Marran"]
    assert all(is_fact_shaped(line) for line in records)


def test_abbreviations_initials_and_item_numbers_do_not_end_a_sentence_however_many_run_on() -> None:
    assert sentences("Dr. A. Smith met Mr. Jones in the U.S. at St. Mary's. Then they left.") == [
        "Dr. A. Smith met Mr. Jones in the U.S. at St. Mary's.",
        "Then they left.",
    ]
    assert sentences("  1. First step. Then (iv). More text here.") == [
        "1. First step.",
        "Then (iv).",
        "More text here.",
    ]
    # A sentence that runs on past 20,000 abbreviations is read once (the word before each dot is read backwards
    # from the dot, not out of everything since the sentence began), and stays one sentence.
    long_run = "  " + "Dr. " * 20_000 + "Who. Next one."
    assert [long_run[s:e][-8:] for s, e in sentence_spans(long_run)] == ["Dr. Who.", "ext one."]
    assert sentence_spans(long_run)[0][0] == 2
    # "word ." reads "word": an abbreviation set off by a space is still one.
    assert sentences("Costs rose etc . Then fell.") == ["Costs rose etc . Then fell."]


def test_rows_records_and_items_of_even_length_are_lines_of_their_own_not_wrapped_prose() -> None:
    # Lines of much the same length read like a hard-wrapped paragraph; a run of table rows, "Label: value"
    # records or list items is none, and a heading's byline is no part of the heading.
    timetable = (
        "Stop | Trip 1 | Trip 2 | Trip 3\n"
        "Millbrook Green | 09:15 | 12:15 | 15:30\n"
        "Hollins Cross | 09:22 | 12:22 | 15:37\n"
        "Castleford Hospital | 09:40 | 12:40 | 15:55\n"
    )
    assert sentences(timetable) == timetable.splitlines()
    spec = (
        "Model numbers: KT17-SLV (silver), KT17-BLK (black)\n"
        "Capacity: 1.7 litres (minimum fill 0.25 litres)\n"
        "Weekday evening (Mon–Fri, 5pm–11pm): £24 per hour\n"
        "Cord length: 0.75 m\n"
    )
    assert sentences(spec) == spec.splitlines()
    minutes = (
        "Minutes of the committee meeting held on Tuesday 14 October 2026, 7:30pm, at the Orchard Row room\n"
        "Present: Helen Marsh (chair), Tobias Reeve (treasurer), Priya Anand (secretary), Gareth Lloyd\n"
        "- Tobias: send subscription reminders by 31 October\n"
        "- Helen: letter to highways team about double yellow lines\n"
        "- Noor: mulled juice stall for the winter lights event\n"
    )
    assert sentences(minutes) == minutes.splitlines()
    assert sentences("# Abrams tanks get a new round of shields\nBy: Kyle Rempfer July 5, 2018") == [
        "# Abrams tanks get a new round of shields",
        "By: Kyle Rempfer July 5, 2018",
    ]
    # A record runs on where its line ends on a word no line ends on; wrapped prose stays whole.
    assert sentences("Venue: the hall at the back of the\nOld Library, Quay Street") == [
        "Venue: the hall at the back of the\nOld Library, Quay Street"
    ]


def test_a_wrapped_item_or_record_runs_on_and_a_label_inside_wrapped_prose_is_no_record() -> None:
    # A list item or record whose line wraps onto an indented line, even one opening with a capital, is one unit;
    # items that follow items are cut however even their lengths.
    items = (
        "- The committee thanked the outgoing chair, Councillor\n"
        "  Smith, for ten years of service to the association.\n"
        "- The treasurer presented the accounts.\n"
    )
    assert sentences(items) == [
        "- The committee thanked the outgoing chair, Councillor\n  Smith, for ten years of service to the association.",
        "- The treasurer presented the accounts.",
    ]
    record = (
        "Address: Unit 4, Castleford Business Park, West Yorkshire, United\n  Kingdom, WF10 1AA\nPhone: 01632 960 000"
    )
    assert sentences(record) == [
        "Address: Unit 4, Castleford Business Park, West Yorkshire, United\n  Kingdom, WF10 1AA",
        "Phone: 01632 960 000",
    ]
    # In hard-wrapped prose a line that happens to open with "Name: …" is a wrap, not a record.
    prose = (
        "The treaty that closed the conflict was negotiated over many months in\n"
        "Paris, and its final text was signed in the Hall of Mirrors by the Prime Minister\n"
        "Lloyd George: it ended the war with Germany and set the terms of the peace for\n"
        "the decade that followed, though many historians have since argued that its\n"
        "reparations clauses sowed the seeds of the next conflict in Europe.\n"
    )
    assert sentences(prose) == [prose.strip()]
    # A label opens with a capital of any script: a lower-case Cyrillic word before a colon is no label.
    russian = "Согласно письму, направленному министерством,\nговорится следующее: расходы были сокращены."
    assert sentences(russian) == [russian]
    # An indented line under a heading is still the heading's next sentence.
    assert sentences("Introduction\n    The project began in 2019 with a grant.") == [
        "Introduction",
        "The project began in 2019 with a grant.",
    ]
