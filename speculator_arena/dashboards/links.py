"""Links between the board's pages that survive a reload (they carry the viewer's choices)."""

from __future__ import annotations

from urllib.parse import urlencode

from speculator_arena.dashboards import formatting as fmt


def evaluation_href(evaluation_id: str, protocol_version: int | None = None) -> str:
    params = {"evaluation": evaluation_id}
    if protocol_version is not None:
        params["protocol"] = str(protocol_version)
    return "./evaluation?" + urlencode(params)


def evaluation_md(label: str, evaluation_id: str, protocol_version: int | None = None) -> str:
    """A Markdown link to an evaluation's page; the label is escaped (participants choose it)."""
    shown = fmt.md_escape(label) or fmt.md_escape(evaluation_id)
    return f"[{shown}]({evaluation_href(evaluation_id, protocol_version)})"
