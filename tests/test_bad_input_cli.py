"""Every bad input to the ``veracity`` command line gets one clear line on stderr, a non-zero exit and no
traceback, and changes nothing (issue 17, item 6); a folder ingest reports each file and goes on.

``cli.main`` runs in this process over one SQLite database per module (each call opens the runtime as the
console script does; a subprocess per case would cost seconds more each). Every case asserts the exit code, the
message (a substring, from ``veracity.messages`` where one applies) and the rows of ``research_runs``,
``run_events``, ``documents`` and ``chunks``: unchanged, or grown by exactly the good files of a mixed folder.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader, PdfWriter

from conftest import make_settings, sqlite_url
from fixture_pages import report_pdf
from veracity import messages
from veracity.db.migrate import upgrade

TABLES = ("research_runs", "run_events", "documents", "chunks")
EXIT_BAD_INPUT, EXIT_FAILED = 2, 1


class Result:
    def __init__(self, code: int, out: str, err: str, grown: dict[str, int]) -> None:
        self.code, self.out, self.err, self.grown = code, out, err, grown

    def refused(self, code: int, message: str) -> None:
        """Exit ``code``, ``message`` on stderr in lines of ``veracity: …`` (never a traceback), no row stored."""
        assert self.code == code, (self.code, self.err)
        assert message in self.err, self.err
        assert "Traceback" not in self.err
        assert all(line.startswith("veracity: ") for line in self.err.splitlines()), self.err
        assert self.grown == dict.fromkeys(TABLES, 0), self.grown

    def ingest_summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = json.loads(self.out)
        return summary


Veracity = Callable[..., Result]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bad-input-cli") / "cli.db"
    upgrade(sqlite_url(path))
    return path


def _counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}  # noqa: S608


@pytest.fixture
def veracity(db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Veracity]:
    """``veracity(*args, stdin=b"…")`` → the exit code, stdout, stderr and the rows each table grew by."""
    from veracity import cli

    monkeypatch.setattr(cli, "get_settings", lambda: make_settings(sqlite_url(db)))
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", root.level)  # main() raises the root level; give it back afterwards

    def main(*args: str, stdin: bytes | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        before = _counts(db)
        try:
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse refuses an option before main() does anything
            code = int(exc.code or 0)
        after = _counts(db)
        out = capsys.readouterr()
        return Result(code, out.out, out.err, {t: after[t] - before[t] for t in TABLES})

    main("migrate")  # the first runtime loads the bundled corpora: before any case counts rows
    yield main


# ---- JSONL inputs: verify, screen, search --queries, ask --questions ------------------------------------------

NOT_UTF8 = [b'{"id": "a", "claim": "caf\xe9"}\n', b"\x80\x81\n", b"\xff\xfe{\x00}\x00\n"]
DEEP = [b"[" * 100_000 + b"\n", b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"\n", b'{"id": [' * 3000 + b"\n"]
HUGE_NUMBER = b'{"id": 1' + b"1" * 5000 + b"}\n"
FILE_KINDS: list[tuple[str, bytes, str]] = (
    [("not-utf8", raw, "not UTF-8 text") for raw in NOT_UTF8]
    + [("deep", raw, "JSON nested too deeply to read") for raw in DEEP]
    + [("huge-number", HUGE_NUMBER, "JSON with a number too long to read")]
    + [("not-json", b"not json\n", "not JSON (Expecting value)"), ("truncated", b'{"id": "a", \n', "not JSON")]
)
VERIFY_LINES = [
    (b"[]", "line: Input should be a valid dictionary"),
    (b'{"id": "a"}', "claim: Field required"),
    (b'{"id": "a", "claim": "\\ud800", "sources": []}', "claim: Input should be a valid string"),
    (b'{"id": "a", "claim": "' + b"x" * 4001 + b'", "sources": []}', "claim: String should have at most 4000"),
    (b'{"id": "", "claim": "c", "sources": []}', "id: String should have at least 1 character"),
    (b'{"id": "a", "claim": "c", "sources": "s"}', "sources: Input should be a valid list"),
]
SCREEN_LINES = [
    (b'{"id": "a"}', "text: Field required"),
    (b'{"id": "a", "text": "' + b"x" * 20_001 + b'"}', "text: String should have at most 20000"),
    (b'{"id": "", "text": "x"}', "id: String should have at least 1 character"),
    (b'{"id": "a", "text": "\\udfff"}', "text: Input should be a valid string"),
    (b'{"id": "a", "text": 7}', "text: Input should be a valid string"),
    (b"7", "line: Input should be a valid dictionary"),
]


def _write(tmp_path: Path, raw: bytes, name: str = "in.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    return path


@pytest.mark.parametrize("command", ["verify", "screen"])
@pytest.mark.parametrize(("kind", "raw", "message"), FILE_KINDS, ids=[k[0] for k in FILE_KINDS])
def test_a_verify_or_screen_file_that_cannot_be_read(
    veracity: Veracity, tmp_path: Path, command: str, kind: str, raw: bytes, message: str
) -> None:
    result = veracity(command, str(_write(tmp_path, raw)), "--json")
    result.refused(EXIT_BAD_INPUT, message)
    assert result.out == ""


@pytest.mark.parametrize("command", ["verify", "screen"])
@pytest.mark.parametrize(("kind", "raw", "message"), FILE_KINDS[:4], ids=[k[0] for k in FILE_KINDS[:4]])
def test_a_verify_or_screen_stdin_that_cannot_be_read(
    veracity: Veracity, command: str, kind: str, raw: bytes, message: str
) -> None:
    veracity(command, "-", "--json", stdin=raw).refused(EXIT_BAD_INPUT, message)


@pytest.mark.parametrize(("line", "message"), VERIFY_LINES, ids=repr)
def test_verify_rejects_a_bad_line_before_answering_any(
    veracity: Veracity, tmp_path: Path, line: bytes, message: str
) -> None:
    good = b'{"id": "ok", "claim": "Tea is a drink.", "sources": [{"id": "s", "text": "Tea is a drink."}]}\n'
    result = veracity("verify", str(_write(tmp_path, good + line + b"\n")), "--json")
    result.refused(EXIT_BAD_INPUT, f":2: {message}")
    assert result.out == ""


@pytest.mark.parametrize(("line", "message"), SCREEN_LINES, ids=repr)
def test_screen_rejects_a_bad_line_before_answering_any(
    veracity: Veracity, tmp_path: Path, line: bytes, message: str
) -> None:
    result = veracity("screen", str(_write(tmp_path, b'{"id": "ok", "text": "hello"}\n' + line + b"\n")), "--json")
    result.refused(EXIT_BAD_INPUT, f":2: {message}")
    assert result.out == ""


@pytest.mark.parametrize("command", ["verify", "screen"])
def test_a_missing_or_folder_input_file(veracity: Veracity, tmp_path: Path, command: str) -> None:
    veracity(command, str(tmp_path / "missing.jsonl")).refused(EXIT_BAD_INPUT, "No such file or folder")
    veracity(command, str(tmp_path)).refused(EXIT_BAD_INPUT, "No such file or folder")


def test_screen_with_an_unknown_template(veracity: Veracity, tmp_path: Path) -> None:
    path = _write(tmp_path, b'{"id": "a", "text": "hello"}\n')
    veracity("screen", str(path), "--template", "nope").refused(EXIT_BAD_INPUT, "Unknown template 'nope'")


QUERY_LINES = [
    (b'{"id": 1}', "each line must be a JSON object with 'id' and 'query'"),
    (b'{"query": "tea"}', "each line must be a JSON object with 'id' and 'query'"),
    (b"[1, 2]", "each line must be a JSON object with 'id' and 'query'"),
    (b'"tea"', "each line must be a JSON object with 'id' and 'query'"),
    (b"not json", "each line must be a JSON object with 'id' and 'query'"),
    (b'{"id": "q", "query": "tea\\u0000"}', "query: cannot be searched: it holds a NUL character"),
    (b'{"id": "q", "query": "\\ud800"}', "query: cannot be searched: it holds a lone surrogate"),
    (b"[" * 100_000, "each line must be a JSON object with 'id' and 'query'"),
    (HUGE_NUMBER.strip(), "each line must be a JSON object with 'id' and 'query'"),
]


@pytest.mark.parametrize(("line", "message"), QUERY_LINES, ids=lambda v: repr(v)[:50])
def test_search_queries_rejects_a_bad_line_before_searching(
    veracity: Veracity, tmp_path: Path, line: bytes, message: str
) -> None:
    path = _write(tmp_path, b'{"id": "ok", "query": "tea"}\n' + line + b"\n")
    result = veracity("search", "--queries", str(path), "--corpus", "market_brief")
    result.refused(EXIT_BAD_INPUT, f":2: {message}")
    assert result.out == ""


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: str(p / "missing.jsonl"), "No such file or folder"),
        (lambda p: str(p), "No such file or folder"),
        (lambda p: str(_write(p, b'{"id": "q", "query": "caf\xe9"}\n')), "not UTF-8 text"),
    ],
    ids=["missing", "folder", "not-utf8"],
)
def test_search_queries_file_that_cannot_be_read(
    veracity: Veracity, tmp_path: Path, make: Callable[[Path], str], message: str
) -> None:
    veracity("search", "--queries", make(tmp_path)).refused(EXIT_BAD_INPUT, message)


@pytest.mark.parametrize("k", ["0", "-1", "abc", "1001", "\u0661", "1.5", "99999999999999999999"])
def test_search_refuses_a_bad_k(veracity: Veracity, k: str) -> None:
    result = veracity("search", "tea", "-k", k)
    assert result.code == EXIT_BAD_INPUT
    assert "must be a whole number from 1 to 1000" in result.err and "Traceback" not in result.err


@pytest.mark.parametrize(
    ("query", "corpus", "message"),
    [
        ("   ", "market_brief", messages.SEARCH_QUERY_EMPTY),
        ("tea\x00", "market_brief", "The search query cannot be stored: it holds a NUL character"),
        ("tea \udcff", "market_brief", "The search query cannot be stored: it holds a lone surrogate"),
        ("tea", "nope", "Unknown corpus 'nope'"),
    ],
    ids=repr,
)
def test_search_refuses_a_bad_query_or_corpus(veracity: Veracity, query: str, corpus: str, message: str) -> None:
    veracity("search", query, "--corpus", corpus).refused(EXIT_BAD_INPUT, message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["\x00"], "The question cannot be stored: it holds a NUL character"),
        (["coffee\x00market"], "The question cannot be stored: it holds a NUL character"),
        (["\udcff"], "The question cannot be stored: it holds a lone surrogate"),
        (["\u200b"], messages.QUESTION_SAYS_NOTHING),
        (["\u200b\u2060\ufeff"], messages.QUESTION_SAYS_NOTHING),
        (["???"], messages.QUESTION_SAYS_NOTHING),
        (["\x01\x02"], messages.QUESTION_SAYS_NOTHING),
        (["   "], messages.QUESTION_EMPTY),
        (["x" * 2001], "characters long; the limit is 2000"),
        (["coffee", "--template", "nope"], "Unknown template 'nope'"),
        (["coffee", "--corpus", "nope"], "Unknown corpus 'nope'"),
        (["coffee", "--corpus", "nope\x00"], "The corpus name cannot be stored: it holds a NUL character"),
        (["coffee", "--template", "answer\udcff"], "The template name cannot be stored: it holds a lone surrogate"),
    ],
    ids=repr,
)
def test_ask_refuses_a_bad_question_and_stores_no_run(veracity: Veracity, args: list[str], message: str) -> None:
    veracity("ask", *args, "--json", "--progress", "none").refused(EXIT_BAD_INPUT, message)


@pytest.mark.parametrize(("kind", "raw", "message"), FILE_KINDS, ids=[k[0] for k in FILE_KINDS])
def test_ask_questions_file_that_cannot_be_read(
    veracity: Veracity, tmp_path: Path, kind: str, raw: bytes, message: str
) -> None:
    result = veracity("ask", "--questions", str(_write(tmp_path, raw)), "--progress", "none")
    result.refused(EXIT_BAD_INPUT, message)


# ---- ingest: names, files, folders ----------------------------------------------------------------------------


def ingest(veracity: Veracity, path: Path, corpus: str) -> Result:
    return veracity("ingest", str(path), "--corpus", corpus, "--json", "--progress", "none")


@pytest.mark.parametrize(
    ("corpus", "message"),
    [
        ("bad name!", "Corpus names are 1-64 letters"),
        ("", "Corpus names are 1-64 letters"),
        ("a" * 65, "Corpus names are 1-64 letters"),
        ("x/y", "Corpus names are 1-64 letters"),
        ("nul\x00", "Corpus names are 1-64 letters"),
        ("caf\u00e9", "Corpus names are 1-64 letters"),
        ("web", messages.CORPUS_RESERVED),
    ],
    ids=repr,
)
def test_ingest_refuses_a_bad_corpus_name(veracity: Veracity, tmp_path: Path, corpus: str, message: str) -> None:
    (tmp_path / "a.txt").write_text("Tea is a drink made from leaves.")
    ingest(veracity, tmp_path, corpus).refused(EXIT_BAD_INPUT, message)


def test_ingest_refuses_a_missing_path(veracity: Veracity, tmp_path: Path) -> None:
    ingest(veracity, tmp_path / "missing", "x").refused(EXIT_BAD_INPUT, "No such file or folder")


def encrypted_pdf(user_password: str, algorithm: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(report_pdf())))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def blank_pdf() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


NEEDS_PASSWORD = messages.PDF_NEEDS_PASSWORD
BAD_FILES: list[tuple[str, Callable[[], bytes], str]] = [
    ("aes256.pdf", lambda: encrypted_pdf("secret", "AES-256"), NEEDS_PASSWORD),
    ("aes256r5.pdf", lambda: encrypted_pdf("secret", "AES-256-R5"), NEEDS_PASSWORD),
    ("aes128.pdf", lambda: encrypted_pdf("secret", "AES-128"), NEEDS_PASSWORD),
    ("rc4-128.pdf", lambda: encrypted_pdf("secret", "RC4-128"), NEEDS_PASSWORD),
    ("rc4-40.pdf", lambda: encrypted_pdf("secret", "RC4-40"), NEEDS_PASSWORD),
    ("junk.pdf", lambda: b"%PDF-1.4 this is not really a pdf", "not a readable PDF"),
    ("truncated.pdf", lambda: report_pdf()[: len(report_pdf()) // 2], "not a readable PDF"),
    ("empty.pdf", lambda: b"", "not a readable PDF"),
    ("blank.pdf", blank_pdf, "it holds no text"),
    ("empty.md", lambda: b"", "it holds no text"),
    ("spaces.txt", lambda: b" \n\t\n ", "it holds no text"),
    ("binary.txt", lambda: b"\x00\x01\x02\x03" * 10, "it looks like a binary file"),
    ("late-nul.txt", lambda: b"a" * 5000 + b"\x00tail", "it holds a NUL character"),
    ("latin1.txt", lambda: "caf\u00e9 au lait".encode("latin-1"), "not UTF-8 text"),
    ("nothing.html", lambda: b"<html><head><title>t</title></head><body></body></html>", "no readable main text"),
    ("notes.docx", lambda: b"PK\x03\x04", "Unsupported file type '.docx'"),
    ("bad.jsonl", lambda: b'{"_id": "a", "text": "fine"}\nnot json\n', "line 2 is not JSON"),
    ("deep.jsonl", lambda: b"[" * 100_000 + b"\n", "line 1 is JSON nested too deeply to read"),
    ("number.jsonl", lambda: HUGE_NUMBER, "line 1 is JSON with a number too long to read"),
    ("array.jsonl", lambda: b"[1, 2]\n", "line 1 is not a JSON object"),
    ("notext.jsonl", lambda: b'{"_id": "a"}\n', 'line 1 needs an "_id" or "id" and a non-empty "text"'),
    ("nul.jsonl", lambda: b'{"_id": "a", "text": "tea\\u0000"}\n', '"text" cannot be stored: it holds a NUL'),
    ("lone.jsonl", lambda: b'{"_id": "a", "text": "tea \\ud800"}\n', '"text" cannot be stored: it holds a lone'),
    ("lone-id.jsonl", lambda: b'{"_id": "\\udfff", "text": "tea"}\n', '"_id" cannot be stored: it holds a lone'),
    ("nul-title.jsonl", lambda: b'{"id": "a", "title": "\\u0000", "text": "t"}\n', '"title" cannot be stored'),
    ("long-id.jsonl", lambda: json.dumps({"_id": "i" * 513, "text": "t"}).encode(), "its id is 513 characters"),
    ("empty.jsonl", lambda: b"\n\n", "it holds no documents"),
]


@pytest.mark.parametrize(("name", "make", "message"), BAD_FILES, ids=[f[0] for f in BAD_FILES])
def test_ingest_refuses_a_bad_file_with_its_reason(
    veracity: Veracity, tmp_path: Path, name: str, make: Callable[[], bytes], message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(make())
    result = ingest(veracity, path, "badfiles")
    result.refused(EXIT_FAILED, message)
    assert result.ingest_summary()["per_file"] == [
        {"path": str(path), "outcome": "refused", "documents": 0, "reason": result.ingest_summary()["errors"][0]}
    ]


@pytest.mark.parametrize(("name", "make", "message"), BAD_FILES[:5] + BAD_FILES[-6:-1], ids=lambda v: str(v)[:20])
def test_a_bad_file_in_a_folder_is_reported_and_the_next_file_ingested(
    veracity: Veracity, tmp_path: Path, name: str, make: Callable[[], bytes], message: str
) -> None:
    (tmp_path / name).write_bytes(make())
    (tmp_path / "zz-good.md").write_text("# Tea\n\nTea is an aromatic drink brewed from cured leaves.\n")
    result = ingest(veracity, tmp_path, f"mixed{abs(hash(name)) % 10**8}")
    assert result.code == EXIT_FAILED and message in result.err and "Traceback" not in result.err
    assert result.grown["documents"] == 1 and result.grown["chunks"] == 1
    assert [(f["path"], f["outcome"]) for f in result.ingest_summary()["per_file"]] == [
        (str(tmp_path / name), "refused"),
        (str(tmp_path / "zz-good.md"), "ingested"),
    ]


def test_an_aes_pdf_with_an_empty_password_is_ingested(veracity: Veracity, tmp_path: Path) -> None:
    """pypdf reads AES only with ``cryptography`` (a dependency now): this used to be a traceback."""
    path = tmp_path / "open.pdf"
    path.write_bytes(encrypted_pdf("", "AES-256"))
    result = ingest(veracity, path, "openpdf")
    assert result.code == 0, result.err
    assert result.grown["documents"] == 1
    assert result.ingest_summary()["per_file"][0]["outcome"] == "ingested"


def test_an_aes_pdf_without_cryptography_is_refused_with_the_reason(
    veracity: Veracity, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pypdf
    from pypdf.errors import DependencyError

    def no_cryptography(*_args: Any, **_kwargs: Any) -> Any:
        raise DependencyError("cryptography>=3.1 is required for AES algorithm")

    monkeypatch.setattr(pypdf, "PdfReader", no_cryptography)
    path = tmp_path / "aes.pdf"
    path.write_bytes(encrypted_pdf("", "AES-256"))
    ingest(veracity, path, "nocrypto").refused(EXIT_FAILED, messages.PDF_NEEDS_CRYPTOGRAPHY)


def test_a_parser_that_crashes_refuses_the_file_not_the_ingest(
    veracity: Veracity, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pypdf

    def crashes(*_args: Any, **_kwargs: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(pypdf, "PdfReader", crashes)
    (tmp_path / "a.pdf").write_bytes(report_pdf())
    (tmp_path / "b.txt").write_text("Tea is an aromatic drink brewed from cured leaves.")
    result = ingest(veracity, tmp_path, "parsercrash")
    assert result.code == EXIT_FAILED and "not a readable PDF (RecursionError" in result.err
    assert result.grown["documents"] == 1


def test_a_jsonl_file_is_stored_whole_or_not_at_all(
    veracity: Veracity, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Line 1,500 cannot be stored: none of the file's documents are (they used to be 1,000, one batch), and the
    folder's next file is still ingested."""
    from sqlalchemy.exc import OperationalError

    from veracity.corpus import ingest as ingest_module

    real = ingest_module.upsert_documents

    async def fails_at_1500(*, session: Any, corpus: str, docs: Any, chunk_chars: int) -> list[str]:
        if any(doc.doc_id == "d1500" for doc in docs):
            raise OperationalError("INSERT INTO documents ...", {}, Exception("disk I/O error"))
        return await real(session=session, corpus=corpus, docs=docs, chunk_chars=chunk_chars)

    monkeypatch.setattr(ingest_module, "upsert_documents", fails_at_1500)
    rows = [{"_id": f"d{i}", "text": f"Document number {i} is about tea."} for i in range(1, 2001)]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "b.txt").write_text("Tea is an aromatic drink brewed from cured leaves.")
    result = ingest(veracity, tmp_path, "atomic")
    assert result.code == EXIT_FAILED
    assert messages.INGEST_NOT_STORED.format(path=tmp_path / "a.jsonl", reason=messages.DATABASE_FAILED) in result.err
    assert result.grown["documents"] == 1  # b.txt alone
    summary = result.ingest_summary()
    assert (summary["added"], summary["files"]) == (1, 1)
    assert [f["outcome"] for f in summary["per_file"]] == ["refused", "ingested"]


def test_a_jsonl_file_with_a_bad_line_1500_stores_nothing(veracity: Veracity, tmp_path: Path) -> None:
    rows = [json.dumps({"_id": f"d{i}", "text": f"Document number {i} is about tea."}) for i in range(1, 2001)]
    rows[1499] = '{"_id": "d1500", "text": "tea \\ud800"}'
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(rows))
    ingest(veracity, path, "bigbad").refused(EXIT_FAILED, 'line 1500: "text" cannot be stored')


def _link_case(tmp_path: Path, kind: str) -> tuple[Path, Path, str]:
    """(folder, link, message) with one good file beside the link."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text("Tea is an aromatic drink brewed from cured leaves.")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("A secret that lives outside the folder.")
    targets = {
        "hosts": (folder / "hosts.txt", Path("/etc/hosts")),
        "outside-file": (folder / "secret.txt", outside / "secret.txt"),
        "outside-folder": (folder / "etc", outside),
        "root-folder": (folder / "root", Path("/")),
        "parent": (folder / "up", tmp_path),
        "broken": (folder / "gone.md", tmp_path / "nothing-here.md"),
        "dev-zero": (folder / "zero.txt", Path("/dev/zero")),
    }
    link, target = targets[kind]
    link.symlink_to(target)
    message = "is a link to nothing" if kind == "broken" else "outside the folder being ingested"
    return folder, link, message


@pytest.mark.parametrize(
    "kind", ["hosts", "outside-file", "outside-folder", "root-folder", "parent", "broken", "dev-zero"]
)
def test_a_link_out_of_the_folder_is_refused_and_reported(veracity: Veracity, tmp_path: Path, kind: str) -> None:
    folder, link, message = _link_case(tmp_path, kind)
    result = ingest(veracity, folder, f"links{kind.replace('-', '')}")
    assert result.code == EXIT_FAILED and message in result.err and "Traceback" not in result.err
    assert result.grown["documents"] == 1  # good.txt only: nothing behind the link
    outcomes = {f["path"]: f["outcome"] for f in result.ingest_summary()["per_file"]}
    assert outcomes == {str(link): "refused", str(folder / "good.txt"): "ingested"}


def test_a_link_inside_the_folder_is_followed_once(veracity: Veracity, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "tea.txt").write_text("Tea is an aromatic drink brewed from cured leaves.")
    (folder / "alias.txt").symlink_to(folder / "sub" / "tea.txt")
    (folder / "loop").symlink_to(folder)  # a folder link inside is not descended (its files have their own path)
    result = ingest(veracity, folder, "inside")
    assert result.code == 0, result.err
    assert sorted(f["path"] for f in result.ingest_summary()["per_file"]) == [
        str(folder / "alias.txt"),
        str(folder / "sub" / "tea.txt"),
    ]


def test_a_folder_1500_levels_deep_is_listed_and_its_deep_file_refused(veracity: Veracity, tmp_path: Path) -> None:
    """``rglob`` recursed and raised RecursionError; the deep file's id (its path) is longer than an id may be."""
    top = tmp_path / "deep"
    top.mkdir()
    (top / "top.txt").write_text("Tea is an aromatic drink brewed from cured leaves.")
    bottom = top
    for _ in range(1500):  # about 3,000 characters: within a path's limit (mkdir(parents=True) would recurse)
        bottom = bottom / "d"
        bottom.mkdir()
    (bottom / "bottom.txt").write_text("The bottom of a very deep folder.")
    try:
        result = ingest(veracity, top, "deep")
    finally:  # pytest's clean-up (shutil.rmtree) recurses: take it down here, deepest first
        (bottom / "bottom.txt").unlink()
        while bottom != top:
            bottom.rmdir()
            bottom = bottom.parent
    assert result.code == EXIT_FAILED and "a document id is at most 512" in result.err
    assert "Traceback" not in result.err
    assert result.grown["documents"] == 1
    assert [f["outcome"] for f in result.ingest_summary()["per_file"]] == ["refused", "ingested"]


def test_a_file_name_that_is_not_utf8_is_refused(veracity: Veracity, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    with open(os.fsencode(folder) + b"/caf\xe9.txt", "wb") as f:
        f.write(b"Coffee is a drink.")
    (folder / "good.txt").write_text("Tea is an aromatic drink brewed from cured leaves.")
    result = ingest(veracity, folder, "names")
    assert result.code == EXIT_FAILED and "caf\\xe9.txt: its path is not valid UTF-8" in result.err
    assert result.grown["documents"] == 1


def test_a_fifo_is_refused_not_read_forever(veracity: Veracity, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    ingest(veracity, fifo, "fifo").refused(EXIT_FAILED, "it is not a regular file")


def test_a_file_over_the_size_or_document_limit_is_refused_whole(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ingest limits (VERACITY_CORPUS__MAX_FILE_BYTES, __MAX_DOCUMENTS_PER_FILE): the big file and the crowded
    JSONL store nothing and are reported; the folder's small file is ingested."""
    from veracity import cli
    from veracity.settings import Settings

    settings = Settings(
        database={"url": sqlite_url(db)},
        corpus={"autoload_wiki": False, "max_file_bytes": 5_000, "max_documents_per_file": 3},
    )
    monkeypatch.setattr(cli, "get_settings", lambda: settings)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "big.txt").write_text("Tea is grown in many countries. " * 400)  # 12,800 bytes
    (folder / "crowded.jsonl").write_text(
        "\n".join(json.dumps({"_id": f"d{i}", "text": f"Tea fact {i}."}) for i in range(4))
    )
    (folder / "small.txt").write_text("Tea is an aromatic drink brewed from cured leaves.")
    before = _counts(db)
    code = cli.main(["ingest", str(folder), "--corpus", "limits", "--json", "--progress", "none"])
    err = capsys.readouterr().err
    assert code == EXIT_FAILED
    assert "big.txt: 12,800 bytes is larger than this server ingests (5,000" in err
    assert "crowded.jsonl: 4 documents in one file is more than this server ingests (3" in err
    assert _counts(db)["documents"] - before["documents"] == 1  # small.txt alone
