"""Build hook: carry the one vendored toolDefs.snapshot.json into the built package.

The repository keeps a single snapshot at its root (generated from assistant_contract); the
wheel needs it inside `mcp_server/`, so the build copies it there instead of anyone keeping two.
"""

import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).resolve().parent


class BuildPyWithSnapshot(build_py):
    def run(self) -> None:
        super().run()
        target = pathlib.Path(self.build_lib) / "mcp_server" / "toolDefs.snapshot.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "toolDefs.snapshot.json", target)


setup(cmdclass={"build_py": BuildPyWithSnapshot})
