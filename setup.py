"""Build hook: the one snapshot carried into the package, and the README as PyPI shows it.

The repository keeps a single snapshot at its root (generated from assistant_contract); the
wheel needs it inside `mcp_server/`, so the build copies it there instead of anyone keeping two.

README.md links the pages beside it relatively (`docs/…`), which GitHub resolves and PyPI does
not: the package's long description is the README with each relative link made absolute, to the
file as it stands at this version's tag on GitHub (`python -m scripts.release check` renders the
result as PyPI does and holds every link to a file in the tree).
"""

import pathlib
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).resolve().parent
REPOSITORY = "https://github.com/fairwins/fairwins-mcp"
# A Markdown link or image: `[text](target)` / `![alt](target)`, the target without spaces.
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
ABSOLUTE = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
# An HTML image or link written into the Markdown: `<img src="docs/…">`, `<a href="docs/…">`.
ATTRIBUTE = re.compile(r"""(<(img|a)\b[^>]*?\s(src|href)=")([^"]+)(")""", re.I)


class BuildPyWithSnapshot(build_py):
    def run(self) -> None:
        super().run()
        target = pathlib.Path(self.build_lib) / "mcp_server" / "toolDefs.snapshot.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "toolDefs.snapshot.json", target)


def version() -> str:
    text = (ROOT / "mcp_server" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if found is None:
        raise ValueError("mcp_server/__init__.py holds no __version__ line")
    return found[1]


def absolute_links(text: str, tag: str) -> str:
    """`text` with every relative link to a file, Markdown or HTML, pointing at it on GitHub at `tag` (images at
    the raw file)."""

    def absolute(match: re.Match[str]) -> str:
        image, label, target = match[1], match[2], match[3]
        if ABSOLUTE.match(target) or target.startswith("#"):  # PyPI keeps a heading's anchor on the page
            return match[0]
        path, _, anchor = target.partition("#")
        view = "raw" if image else "blob"
        url = f"{REPOSITORY}/{view}/{tag}/{path}" + (f"#{anchor}" if anchor else "")
        return f"{image}[{label}]({url})"

    def absolute_attribute(match: re.Match[str]) -> str:
        target = match[4]
        if ABSOLUTE.match(target) or target.startswith("#"):
            return match[0]
        view = "raw" if match[2].lower() == "img" else "blob"
        return f"{match[1]}{REPOSITORY}/{view}/{tag}/{target}{match[5]}"

    return ATTRIBUTE.sub(absolute_attribute, LINK.sub(absolute, text))


setup(
    cmdclass={"build_py": BuildPyWithSnapshot},
    long_description=absolute_links((ROOT / "README.md").read_text(encoding="utf-8"), f"v{version()}"),
    long_description_content_type="text/markdown",
)
