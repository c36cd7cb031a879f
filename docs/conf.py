"""Sphinx configuration; pages are Markdown (MyST), API pages come from docstrings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

project = "django-redislock"
author = "django-redislock developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
# docs/bench/*.md are fragments written by `python -m bench.plot`, included by benchmarks.md
exclude_patterns = ["_build", "bench/*.md"]
html_theme = "alabaster"
html_static_path = ["_static"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
nitpicky = False
suppress_warnings = ["myst.xref_missing"]
