"""What the model is told about the page in words: the open tabs, the dialogs waiting for an answer,
a dialog an action opened, and an address without its query (which may carry a one-time token).
Read by the tools' results (``runs.tools``), the run loop's observations (``runs.browser``) and the
OpenAI-compatible agent's prompt (``runs.agents``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit


def without_query(url: str) -> str:
    # A query or fragment may carry a one-time token: record where, not how.
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def tabs_summary(tabs: list[dict[str, Any]]) -> str:
    """The open tabs as the model reads them: id, title, address (without query), the active one marked."""
    lines = [
        f"{t.get('id')}{' (active)' if t.get('active') else ''}: {str(t.get('title') or 'untitled')[:200]} "
        f"<{without_query(str(t.get('url', '')))}>"
        for t in tabs
    ]
    return "; ".join(lines) if lines else "no open tab"


def dialogs_summary(dialogs: list[dict[str, Any]]) -> str:
    """The dialogs waiting for an answer as the model reads them: id, tab, kind, the page's message
    (a site's sign-in prompt: the origin that asks and its realm, the site's own words)."""
    lines = []
    for d in dialogs:
        if d.get("kind") == "auth":
            realm = f" (realm “{str(d.get('realm'))[:200]}”, the site's own words)" if d.get("realm") else ""
            lines.append(f"{d.get('id')} on tab {d.get('tab')}: auth, {d.get('origin')} asks for a sign-in{realm}")
            continue
        default = f" (default answer “{str(d.get('default_text'))[:200]}”)" if d.get("default_text") else ""
        lines.append(f"{d.get('id')} on tab {d.get('tab')}: {d.get('kind')} “{str(d.get('message', ''))[:500]}”{default}")
    return "; ".join(lines) if lines else "none"


def dialog_opened_note(dialog: dict[str, Any]) -> str:
    """What the model is told when its action made the page open a dialog (or a site ask for a sign-in)."""
    if dialog.get("kind") == "auth":
        return (
            f" The site asks for an HTTP sign-in: {dialogs_summary([dialog])}. The page waits until you answer "
            "it with auth_answer (a stored credentialId whose origins include exactly that origin, or accept "
            "false to cancel)."
        )
    return (
        f" The page opened a dialog: {dialogs_summary([dialog])}. It blocks the page until you answer it "
        "with dialog_answer."
    )
