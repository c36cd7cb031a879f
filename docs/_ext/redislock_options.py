"""``.. redislock-options:: LOCK_OPTIONS`` renders an option schema of conf.py as a table.

The settings reference is generated from the schema the backends validate against, so a new
option can never be missing from the docs.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from django_redislock import conf


class OptionsTable(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        schema = getattr(conf, self.arguments[0])
        lines = [
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 22 14 64",
            "",
            "   * - Key",
            "     - Default",
            "     - Meaning",
        ]
        for key, option in schema.items():
            lines += [f"   * - ``{key}``", f"     - ``{option.default!r}``", f"     - {option.doc}"]
        container = nodes.container()
        self.state.nested_parse(StringList(lines), self.content_offset, container)
        return container.children


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("redislock-options", OptionsTable)
    return {"parallel_read_safe": True}
