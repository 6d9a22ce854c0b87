"""The front door (issue 57): one install line everywhere, locks that say where torch's CPU build
comes from, a README short enough to read whole, and docs whose links all resolve. No network."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TORCH_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
# how every place installs a lock: hashes checked, and the lock itself names the CPU wheel index
# (`--retries 1`: where that index cannot be reached, one failed lookup a package instead of
# pip's five retries with back-off, ~7 s a package)
INSTALL = "pip install --retries 1 --require-hashes -r "
LOCKS = ("requirements.lock", "requirements-dev.lock")
DOCS = sorted((ROOT / "docs").glob("*.md"))


def read(path: str | Path) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def option_lines(lock: str) -> list[str]:
    """The option lines of a requirements file (not comments, not a pin's --hash continuation)."""
    return [line.strip() for line in read(lock).splitlines() if line.startswith("--")]


@pytest.mark.parametrize("lock", LOCKS)
def test_every_cpu_pin_comes_with_the_index_that_has_it(lock):
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", read(lock), flags=re.MULTILINE)
    cpu_builds = [name for name, version in pins if "+cpu" in version]
    assert "torch" in cpu_builds
    assert TORCH_INDEX in option_lines(lock), f"{lock} pins a +cpu build but does not name {TORCH_INDEX}"
    # no machine's own mirror leaks into the lock: PyTorch's index is the only option line
    assert option_lines(lock) == [TORCH_INDEX]


def test_lock_script_keeps_the_index_line():
    script = read("scripts/lock.sh")
    assert TORCH_INDEX in script
    assert script.count("with_index requirements") == 2  # after each pip-compile run


def install_lines(text: str) -> list[str]:
    """Every `pip install … -r LOCK` in a text, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", text)
    return [line for line in text.splitlines() if re.search(r"pip.*\binstall\b.*-r\s", line, re.IGNORECASE)]


@pytest.mark.parametrize(("path", "lock"), [
    ("README.md", "requirements.lock"),
    ("Dockerfile", "requirements.lock"),
    ("scripts/test.sh", "requirements-dev.lock"),
])
def test_one_install_line(path, lock):
    lines = install_lines(read(path))
    assert lines, f"{path} installs no lock"
    for line in lines:
        assert "--index-url" not in line and "--find-links" not in line, (
            f"{path}: the lock names the index; no install line should add its own: {line}")
        assert re.search(r"--retries 1 (--quiet )?--require-hashes -r requirements(-dev)?\.lock", line), line
    assert any(INSTALL + lock in re.sub(r'"\$\{PIP\[@\]\}"', "pip", line).replace("--quiet ", "")
               for line in lines)
    separate = re.search(r"pip.*\binstall\b.*\btorch\b", read(path))
    assert not separate, f"{path} installs torch apart from the lock"


def test_ci_runs_the_test_script_in_a_new_environment():
    ci = read(".ci/run")
    assert "-m venv" in ci and ci.index("-m venv") < ci.rindex("bash scripts/test.sh")
    assert "pip install" not in ci  # CI installs only through scripts/test.sh
    assert "bash scripts/test.sh" in read("README.md")


def test_readme_is_short():
    lines = read("README.md").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.MULTILINE)}


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # https:, mailto:
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name} links to missing {link}"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{page.name} links to {link}: no such heading"


def test_readme_links_each_doc_once():
    readme = read("README.md")
    for doc in DOCS:
        count = readme.count(f"](docs/{doc.name})")
        assert count == 1, f"README links docs/{doc.name} {count} times"
