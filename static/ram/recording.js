// The recording player: the segments play one after another in one <video>; each timeline
// button seeks to its offset (in whichever segment holds it). Only RAM's own URLs are loaded.
(function () {
  const root = document.querySelector("[data-replay]");
  const data = document.getElementById("replay-data");
  if (!root || !data) return;
  const player = JSON.parse(data.textContent);
  const segments = player.segments || [];
  const video = document.getElementById("replay-video");
  const position = document.getElementById("replay-position");
  const buttons = Array.from(root.querySelectorAll("button[data-seek]"));
  if (!video || !segments.length) return;
  let current = 0;

  function clock(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    const pad = function (n) { return String(n).padStart(2, "0"); };
    return h ? h + ":" + pad(m) + ":" + pad(r) : m + ":" + pad(r);
  }
  function segmentAt(ms) {
    for (let i = segments.length - 1; i >= 0; i--) {
      if (ms >= segments[i].offset_ms) return i;
    }
    return 0;
  }
  function now() { return segments[current].offset_ms + video.currentTime * 1000; }
  function mark() {
    const at = now();
    position.textContent = clock(at);
    let active = null;
    buttons.forEach(function (b) { if (Number(b.dataset.seek) <= at + 250) active = b; });
    buttons.forEach(function (b) {
      if (b === active) b.setAttribute("aria-current", "true"); else b.removeAttribute("aria-current");
    });
  }
  function load(index, seconds, play) {
    const apply = function () {
      video.currentTime = Math.max(0, seconds);
      if (play) video.play().catch(function () {});
      mark();
    };
    if (index !== current || !video.currentSrc) {
      current = index;
      video.src = segments[index].url;
      video.addEventListener("loadedmetadata", apply, { once: true });
      video.load();
    } else {
      apply();
    }
  }
  buttons.forEach(function (button) {
    button.addEventListener("click", function () {
      const ms = Number(button.dataset.seek);
      const index = segmentAt(ms);
      load(index, (ms - segments[index].offset_ms) / 1000, true);
    });
  });
  video.addEventListener("timeupdate", mark);
  video.addEventListener("seeked", mark);
  video.addEventListener("ended", function () {
    if (current + 1 < segments.length) load(current + 1, 0, true);
  });
})();
