"""The visual app's system check of its settings."""

from __future__ import annotations

from typing import Any

from visual.apps import check_visual_settings


def test_max_fps_outside_1_to_10_fails_the_system_check(settings: Any) -> None:
    assert check_visual_settings() == []
    settings.RAM_VISUAL_MAX_FPS = 11
    assert [e.id for e in check_visual_settings()] == ["visual.E001"]
