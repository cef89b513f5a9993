"""The computers' browser has CJK and emoji fonts (Debian's fonts-noto-cjk and
fonts-noto-color-emoji, installed with Chromium by scripts/system-deps): 中文 is
drawn as characters, not as boxes, and an emoji in colour."""

from __future__ import annotations

from typing import Any

from tests.support.screen import on_executor

# Each character drawn on a canvas in the page's default sans-serif; missing glyphs all draw the same box.
DRAW = """(chars) => chars.map((c) => {
  const canvas = document.createElement("canvas"); canvas.width = 48; canvas.height = 48;
  const g = canvas.getContext("2d"); g.fillStyle = "#fff"; g.fillRect(0, 0, 48, 48);
  g.fillStyle = "#000"; g.font = "32px sans-serif"; g.textBaseline = "top"; g.fillText(c, 4, 4);
  const data = g.getImageData(0, 0, 48, 48).data;
  let colour = 0; for (let i = 0; i < data.length; i += 4) if (Math.abs(data[i] - data[i + 1]) > 40 || Math.abs(data[i + 1] - data[i + 2]) > 40) colour++;
  return {pixels: Array.from(data).join(","), colour: colour};
})"""


def test_cjk_characters_and_emoji_have_glyphs_on_the_computer(screen: Any) -> None:
    drawn = on_executor(screen, lambda: screen.page.evaluate(DRAW, ["中", "文", "丁", "😀"]))
    cjk = [d["pixels"] for d in drawn[:3]]
    assert len(set(cjk)) == 3, "CJK characters are drawn as the same missing-glyph box"
    assert drawn[3]["colour"] > 50, "the emoji is not drawn in colour"
