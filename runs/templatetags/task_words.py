"""Template filters for text an agent wrote: shown as the task's words, never as the server's."""

from __future__ import annotations

from django import template

from runs.selectors import label_from_task

register = template.Library()


@register.filter(name="task_label")
def task_label(label: str) -> str:
    """An agent's label as on the Vault form: one line, at most 60 characters, links removed."""
    return label_from_task(str(label))
