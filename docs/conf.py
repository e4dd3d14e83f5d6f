"""Sphinx configuration of the guides: MyST Markdown, the furo theme. Built by `make docs` with
warnings as errors (`-W --keep-going`), so a broken link, a missing page or an unknown heading
anchor fails the build. The tools are in requirements-docs.txt, outside the container image."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aura_eval import __version__  # noqa: E402

project = "AURA-Eval"
author = "AURA-Eval reference implementation (the contributors of this repository)"
copyright = "the contributors of this repository; code Apache-2.0"
version = release = __version__

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
myst_heading_anchors = 3  # `page.md#a-heading` links are checked against the page's headings
myst_enable_extensions = ["colon_fence"]
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"AURA-Eval {release}"
