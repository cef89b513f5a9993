// A live countdown next to each deadline (<time data-countdown>). The deadline
// itself is the server's; this only says how long is left on this device's clock.
(function () {
  const items = Array.from(document.querySelectorAll("time[data-countdown]"));
  if (!items.length) return;
  function left(ms) {
    const s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    const pad = function (n) { return String(n).padStart(2, "0"); };
    if (h > 0) return h + " h " + pad(m) + " min left";
    return m + " min " + pad(r) + " s left";
  }
  function tick() {
    const now = Date.now();
    items.forEach(function (time) {
      const out = time.parentElement.querySelector("[data-countdown-for]");
      if (!out) return;
      const ms = Date.parse(time.getAttribute("datetime")) - now;
      if (ms > 0) {
        out.textContent = "(" + left(ms) + ")";
        out.classList.remove("error");
      } else {
        out.textContent = "(the deadline has passed: reload the page)";
        out.classList.add("error");
      }
    });
  }
  tick();
  setInterval(tick, 1000);
})();
