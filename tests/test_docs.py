"""What users read cites sources they can open: no internal issue numbers or briefs.

A figure in README.md, BENCHMARKS.md, docs/, or a message, comment or data file under analysis/, ceilings/,
kernels/ and scripts/ comes with a public source (paper, NVIDIA document, repository and file, issue URL), this
project's own measurement (file and command), or the word "assumption". "issue 22's profile" or "the brief"
names nothing a user can find.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USER_FACING = ("README.md", "BENCHMARKS.md", "docs", "analysis", "ceilings", "kernels", "scripts")

# "issue 21", "Issues 21 and 22"; not the instruction sense ("issues 2 x HMMA", "issues 2 × HMMA")
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? [0-9]+\b(?! ?[x×] )")
# "issue #12", "PR #9494", "NVIDIA/DCGM#251": a public one is cited by its URL instead
ISSUE_HASH = re.compile(r"(?i)\b(?:issues?|prs?|pull requests?|tickets?)\s*#[0-9]+|\b[\w.-]+/[\w.-]+#[0-9]+(?![\w-])")
# a bare "#251" in prose or code; not a colour in quotes ("#555555"), nor a Markdown anchor (torch.md#3-...)
BARE_HASH = re.compile(r"(?<![\w\"'&/.#-])#[0-9]+\b(?![\w-])")
INTERNAL = re.compile(r"(?i)\bbriefs?\b|\bwork items?\b")  # "the brief", "the 2023 brief"; not "briefly"


def _text_files() -> list[Path]:
    files = []
    for name in USER_FACING:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in candidates:
            if "__pycache__" in p.parts:
                continue
            data = p.read_bytes()
            if b"\0" not in data[:8192]:  # text only, as grep -I reads them
                files.append(p)
    return files


def _hits(pattern: re.Pattern, suffixes: tuple[str, ...] | None = None) -> list[str]:
    hits = []
    for p in _text_files():
        if suffixes is not None and p.suffix not in suffixes:
            continue
        for number, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{p.relative_to(ROOT)}:{number}: {line.strip()}")
    return hits


def test_the_scan_sees_the_user_facing_files():
    names = {str(p.relative_to(ROOT)) for p in _text_files()}
    assert {"README.md", "BENCHMARKS.md", "docs/llm.md", "docs/latency.md", "analysis/roofline/__init__.py",
            "kernels/tensor.py", "scripts/bench_nsys.py", "ceilings/data/datasheets.csv"} <= names


def test_the_patterns_catch_what_they_are_for():
    for cited in ("(issue 21)", "issue 22's decode profile", "Issues 21 and 22", "Since issue 19 the"):
        assert ISSUE_NUMBER.search(cited), cited
    for cited in ("issue #12", "cupy PR #9494", "NVIDIA/DCGM#251"):
        assert ISSUE_HASH.search(cited), cited
    assert BARE_HASH.search("NVIDIA/DCGM #251).") and BARE_HASH.search("(see #13)")
    for cited in ("the brief of issue 23", "the 2023 brief quoted", "a work item"):
        assert INTERNAL.search(cited), cited
    for fine in ("issues 2 × `HMMA.16816.F32`", "issues 2 x HMMA", "an SM issues one warp instruction"):
        assert not ISSUE_NUMBER.search(fine), fine
    for fine in ('"#555555"', "docs/torch.md#3-an-example", "https://github.com/NVIDIA/DCGM/issues/251",
                 "the colour \"#222\""):
        assert not (ISSUE_HASH.search(fine) or BARE_HASH.search(fine)), fine
    assert not INTERNAL.search("Comments say why, briefly.")


def test_no_user_facing_file_cites_an_internal_issue_number():
    hits = _hits(ISSUE_NUMBER) + _hits(ISSUE_HASH)
    assert not hits, "cite the public source, the project's own file and command, or say 'assumption':\n" + \
        "\n".join(hits)


def test_no_bare_hash_number_in_prose_or_code():
    hits = _hits(BARE_HASH, (".md", ".py"))
    assert not hits, "a '#NN' reference: give the issue's URL instead:\n" + "\n".join(hits)


def test_no_user_facing_file_cites_a_brief_or_work_item():
    hits = _hits(INTERNAL)
    assert not hits, "a brief is not a source a user can open:\n" + "\n".join(hits)
