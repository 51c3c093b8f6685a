"""Every ```python block of docs/language.md, docs/workflow.md (and README.md) runs and checks itself.

Each block is one test case, named after the heading above it. A block is written to a real .py
file and executed from there (``__name__ == "__docs__"``): the front end reads a kernel's source
with ``inspect``, which needs a file on disk, so an ``exec`` of a bare string would not do.

A block that fails because of a known compiler bug is listed in ``XFAIL`` (strict: the test
fails once the bug is fixed, so the entry gets removed).
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "docs" / "language.md", ROOT / "docs" / "workflow.md", ROOT / "README.md"]

# heading id -> reason (a known bug; see the report / CHANGELOG). Keep strict.
XFAIL: dict = {}

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "block"


def _blocks():
    """(test id, file name, line of the block's first code line, code) for every python block."""
    out = []
    seen = {}
    for path in SOURCES:
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        headings = [(m.start(), m.group(2)) for m in _HEADING.finditer(text)]
        for m in _FENCE.finditer(text):
            title = next((h for pos, h in reversed(headings) if pos < m.start()), path.stem)
            base = f"{path.stem}:{_slug(title)}"
            seen[base] = seen.get(base, 0) + 1
            tid = base if seen[base] == 1 else f"{base}-{seen[base]}"
            line = text.count("\n", 0, m.start(1)) + 1
            out.append((tid, path.name, line, m.group(1)))
    return out


BLOCKS = _blocks()


def test_docs_have_blocks():
    assert any(name == "language.md" for _, name, _, _ in BLOCKS), "docs/language.md has no ```python block"


def _params():
    for tid, name, line, code in BLOCKS:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[tid])] if tid in XFAIL else []
        yield pytest.param(name, line, code, id=tid, marks=marks)


@pytest.mark.parametrize("doc,line,code", list(_params()))
def test_doc_block(doc, line, code, tmp_path):
    # Pad with blank lines so tracebacks and kernel error positions give the line in the .md file.
    src = "\n" * (line - 1) + code
    path = tmp_path / f"{pathlib.Path(doc).stem}_block_{line}.py"
    path.write_text(src, encoding="utf-8")
    namespace = {"__name__": "__docs__", "__file__": str(path)}
    exec(compile(src, str(path), "exec"), namespace)  # noqa: S102 - running our own docs
