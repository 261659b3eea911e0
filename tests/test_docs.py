"""The documentation's links and references resolve, and nothing points outside the repository.

The rules, over the repository's files (``git ls-files`` with untracked, not ignored files;
without git, a walk of the source folders):

1. Every relative markdown link, ``[text](path)`` or ``![alt](path)``, with an optional
   ``#anchor``, in every markdown file (README.md, ARCHITECTURE.md, docs/*.md and the others)
   names a file or folder inside the repository, and its anchor a heading of that markdown
   file, slugged as GitHub does (lowercase; punctuation other than ``-`` and ``_`` dropped;
   each space a ``-``; a repeated heading gets ``-1``, ``-2``...). ``(#anchor)`` alone names a
   heading of the same file. Code (fenced blocks, inline code) holds text, not links.
2. Every ``docs/...`` path written in a .py file under abricot_local/, bench/ or tests/ exists
   (and its ``#anchor``, if any, is a heading of it).
3. No file refers to a place outside the repository: none holds ``../shared``,
   ``shared/spec``, ``shared/README``, ``/work/`` or the path join ``parent / "shared"``,
   since users have no ``../shared``. The
   exceptions are the test-data finder and what runs it: tests/realdata.py (it looks in
   ``../shared`` second), tests/test_realdata.py (its tests), tests/conftest.py, .ci/, the
   README's "Test" section (which documents the finder's search order), and this file (which
   names the patterns).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
CODE_DIRS = ("abricot_local", "bench", "tests")
OUTSIDE = ("../shared", "shared/spec", "shared/README", "/work/", 'parent / "shared"')
OUTSIDE_ALLOWED = {"tests/realdata.py", "tests/test_realdata.py", "tests/conftest.py", "tests/test_docs.py"}
OUTSIDE_ALLOWED_DIRS = (".ci/",)
SKIP_DIRS = {".git", "build", "dist", "results", "__pycache__", ".venv", ".ci-venv", ".pytest_cache"}

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
DOCS_REF = re.compile(r"(?<![\w/.-])docs/[\w./#-]*[\w/]")


def repo_files() -> list[str]:
    """Paths relative to ROOT (posix), tracked or untracked but not ignored."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
        return sorted({p for p in out.decode().split("\0") if p and (ROOT / p).is_file()})
    except (OSError, subprocess.SubprocessError):
        found = []
        for folder, dirs, files in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")
                       and (not d.startswith(".") or d == ".ci")]
            found += [(Path(folder) / f).relative_to(ROOT).as_posix() for f in files]
        return sorted(found)


def read_text(rel: str) -> str | None:
    try:
        return (ROOT / rel).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # binary (figures, GGUFs) or unreadable


def prose_lines(text: str) -> list[str]:
    """The markdown's lines with fenced code blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    parts = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).split("`")  # a link: its text
    # outside inline code (even parts) markup goes: HTML tags, emphasis; code is text as written
    text = "".join(p if i % 2 else re.sub(r"<[^>]+>", "", p).replace("*", "") for i, p in enumerate(parts))
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose_lines(text):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every markdown link outside code."""
    prose = "\n".join(INLINE_CODE.sub("", line) for line in prose_lines(text))
    return [(prose.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(prose)]


def broken_target(base: Path, target: str) -> str | None:
    """Why ``target`` (relative to the folder ``base``) does not resolve, or None."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
        return None  # http:, https:, mailto:
    path, _, anchor = unquote(target).partition("#")
    dest = (base / path).resolve() if path else None
    if dest is not None:
        if dest != ROOT and ROOT not in dest.parents:
            return "outside the repository"
        if not dest.exists():
            return "no such file"
    if anchor and dest is None:
        return "anchor"  # the caller checks it against the same file
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
        return f"no heading #{anchor} in {dest.relative_to(ROOT).as_posix()}"
    return None


def link_problems(rel: str, text: str) -> list[str]:
    base = (ROOT / rel).parent
    own = anchors(text)
    problems = []
    for line, target in links(text):
        why = broken_target(base, target)
        if why == "anchor":
            why = None if target[1:] in own else f"no heading {target} in this file"
        if why:
            problems.append(f"{rel}:{line}: ({target}) {why}")
    return problems


def outside_references(rel: str, text: str) -> list[str]:
    if rel in OUTSIDE_ALLOWED or rel.startswith(OUTSIDE_ALLOWED_DIRS):
        return []
    lines = text.splitlines()
    if rel == "README.md":  # its Test section documents where the tests look for their data
        start = next((i for i, line in enumerate(lines) if line.strip() == "## Test"), None)
        if start is not None:
            end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
            lines = lines[:start] + [""] * (end - start) + lines[end:]
    return [f"{rel}:{i}: {line.strip()[:120]}" for i, line in enumerate(lines, 1)
            if any(p in line for p in OUTSIDE)]


# -- the repository ---------------------------------------------------------------------------
def test_every_relative_markdown_link_resolves():
    pages = [p for p in repo_files() if p.endswith(".md")]
    assert {"README.md", "ARCHITECTURE.md", "docs/numerics.md", "docs/RESULTS.md"} <= set(pages)
    checked = sum(len(links(read_text(p) or "")) for p in pages)
    assert checked > 30, "the link finder found almost nothing: is it still working?"
    problems = [x for p in pages for x in link_problems(p, read_text(p) or "")]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_readme_is_a_front_page():
    """What it is, install, the first run, the headline command, where to go next: under 250
    lines; the manual lives in docs/."""
    lines = read_text("README.md").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move the detail to docs/"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:3] == ["## Install", "## Run", "## Did I reproduce the paper?"], headings


def test_the_readme_links_every_docs_page():
    readme = {target.partition("#")[0] for _, target in links(read_text("README.md"))}
    pages = {p for p in repo_files() if p.startswith("docs/") and p.endswith(".md")} - {"docs/report-example.md"}
    assert pages - readme == set(), "pages the README's 'Where to go next' does not name"


def test_every_docs_path_in_the_code_exists():
    refs = []
    for rel in repo_files():
        if rel.endswith(".py") and rel.split("/", 1)[0] in CODE_DIRS and rel != "tests/test_docs.py":
            text = read_text(rel) or ""
            refs += [(rel, text.count("\n", 0, m.start()) + 1, m.group(0)) for m in DOCS_REF.finditer(text)]
    assert refs, "no docs/ reference found in the code: is the pattern still right?"
    problems = [f"{rel}:{line}: {ref} ({why})" for rel, line, ref in refs
                if (why := broken_target(ROOT, ref)) and why != "anchor"]
    assert not problems, "docs/ references that do not resolve:\n" + "\n".join(problems)


def test_nothing_refers_outside_the_repository():
    problems = [x for rel in repo_files() for x in outside_references(rel, read_text(rel) or "")]
    assert not problems, "references to files outside the repository:\n" + "\n".join(problems)


# -- the checker itself -----------------------------------------------------------------------
def test_slugs_are_githubs():
    assert slug("Bigger than one machine: llama.cpp RPC") == "bigger-than-one-machine-llamacpp-rpc"
    assert slug("Options of `run`") == "options-of-run"
    assert slug("lm-eval's requests") == "lm-evals-requests"
    assert slug("Re-scoring a run: check") == "re-scoring-a-run-check"
    assert slug("A task entry (`tasks.<name>`)") == "a-task-entry-tasksname"
    assert anchors("# A\n## Run\n```\n# not a heading\n```\n## Run\n") == {"a", "run", "run-1"}


def test_the_checker_finds_what_is_broken():
    text = ("# Page\n\n[fine](README.md) [gone](docs/nope.md) [bad anchor](docs/numerics.md#no-such)\n"
            "[here](#page) [not here](#nowhere) [out](../elsewhere.md) [web](https://example.org)\n"
            "`[code](not-a-link.md)`\n```\n[fenced](not-a-link-either.md)\n```\n"
            "[two\nlines](docs/missing.md)\n")
    problems = link_problems("page.md", text)
    assert [p.split(" ", 1)[0] for p in problems] == [
        "page.md:3:", "page.md:3:", "page.md:4:", "page.md:4:", "page.md:9:"]
    assert "(docs/nope.md) no such file" in problems[0]
    assert "no heading #no-such in docs/numerics.md" in problems[1]
    assert "(#nowhere)" in problems[2] and "outside the repository" in problems[3]
    assert outside_references("docs/x.md", "see ../shared/spec/NUMERICS.md\n")
    assert not outside_references("tests/realdata.py", "../shared\n")
    readme = "# R\n../shared\n## Test\n../shared beside the clone\n## Next\n"
    assert [p.split(":")[1] for p in outside_references("README.md", readme)] == ["2"]
