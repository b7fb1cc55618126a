"""Every ```python block of README.md and docs/**/*.md runs (issue 34, item 9).

The blocks of one page run in order in one namespace, as a reader copying them one after
another would run them. A block meant as an outline, not a program, is preceded by the
visible comment ``<!-- no-run: REASON -->`` (the reason is required, and the test counts
them: they must stay few). A block whose first line starts with ``>>>`` is a doctest,
run by ``doctest``. Blocks identical to one already run (the README's first example is
also the site's front page) run once. Pages whose blocks compile or train for long run
in the slow suite (``SLOW``). Notebooks run in the docs build, not here.
"""

import contextlib
import doctest
import re
import textwrap
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md"] + [p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts]
)
#: Pages with blocks that train models or compile many kernels (> 20 CPU-s each).
SLOW = {
    "docs/guides/training.md",
    "docs/guides/kernel_calibration.md",
    "docs/guides/sklearn.md",
    "docs/getting_started.md",
    "docs/guides/scale.md",
}
#: The most ``no-run`` blocks allowed over the whole tree.
MAX_NO_RUN = 5  # + the warehouse guide's outlines that need an engine or stored tables

BLOCK = re.compile(r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
NO_RUN = re.compile(r"<!--\s*no-run:\s*(?P<reason>\S[^>]*?)\s*-->\s*$")


def blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, no-run reason or None) of every ```python block of a page."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in BLOCK.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NO_RUN.search(before)
        line = text.count("\n", 0, m.start()) + 1
        out.append((line, textwrap.dedent(m.group("body")), reason and reason["reason"]))
    return out


def _rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def test_no_run_blocks_are_few_and_say_why():
    skipped = [(_rel(p), line) for p in PAGES for line, _, why in blocks(p) if why]
    assert len(skipped) <= MAX_NO_RUN, skipped
    assert blocks(ROOT / "README.md")[0][2] is None  # the first example always runs


def test_the_site_front_page_shows_the_readme_example():
    readme = blocks(ROOT / "README.md")[0][1]
    assert readme in [code for _, code, _ in blocks(ROOT / "docs" / "index.md")]
    assert "load_breast_cancer" in readme and len(readme.splitlines()) <= 25


_SEEN: set[str] = set()


@pytest.fixture
def stack():
    with contextlib.ExitStack() as s:
        yield s


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(p, marks=pytest.mark.slow) if _rel(p) in SLOW else p
        for p in PAGES
        if any(why is None for _, _, why in blocks(p))
    ],
    ids=_rel,
)
def test_page_code_blocks_run(page, monkeypatch, tmp_path, stack):
    pytest.importorskip("sklearn")
    if "flax" in page.read_text(encoding="utf-8"):
        pytest.importorskip("flax")
    monkeypatch.chdir(tmp_path)  # a block that writes files writes them here
    # A reader runs the blocks with JAX's defaults, not the test session's strict dtype
    # dtype and rank promotion (conftest.py).
    stack.enter_context(jax.numpy_dtype_promotion("standard"))
    stack.enter_context(jax.numpy_rank_promotion("allow"))
    namespace: dict = {"__name__": "__doc_example__"}
    for line, code, why in blocks(page):
        if why is not None or code in _SEEN:
            continue
        _SEEN.add(code)
        name = f"{_rel(page)}:{line}"
        if code.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(code, namespace, name, name, line)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test)
            assert runner.failures == 0, f"{name}: doctest failed"
            continue
        try:
            exec(compile(code, name, "exec"), namespace)
        except Exception as err:  # name the block, keep the cause
            raise AssertionError(f"the ```python block at {name} failed: {err!r}") from err
