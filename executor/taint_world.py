"""The isolated world's script of ``executor/taint.py`` (installed in every frame before any page
script runs): it keeps the tainted fields by node identity, masks them, watches the document and
its shadow roots, and covers the text that shows a secret once the executor has said where.

Only ``executor/taint.py`` uses it; ``script`` fills in the names that module chooses per process.
"""

from __future__ import annotations

TEMPLATE = r"""(() => {
  if (globalThis.__ramTaint) { globalThis.__ramTaint.quick(); return; }
  const EVENT = "%EVENT%";
  const SECRET_AUTOCOMPLETE = ["current-password", "new-password", "one-time-code"];
  const tainted = new Set();
  const gone = [];
  const isField = (el) => el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement;
  const secretField = (el) => el instanceof HTMLInputElement && (
    el.type === "password" ||
    (el.getAttribute("autocomplete") || "").toLowerCase().split(/\s+/).some((t) => SECRET_AUTOCOMPLETE.includes(t)));
  const masked = (el) => el.style.getPropertyValue("-webkit-text-security") === "disc" &&
    el.style.getPropertyPriority("-webkit-text-security") === "important";
  const mask = (el) => { if (!masked(el)) el.style.setProperty("-webkit-text-security", "disc", "important"); };
  // A mask that is lifted gives back the page's own inline declaration, if it had one.
  const own = new WeakMap();
  const maskFor = (el) => {
    if (!own.has(el) && !masked(el)) {
      own.set(el, [el.style.getPropertyValue("-webkit-text-security"), el.style.getPropertyPriority("-webkit-text-security")]);
    }
    mask(el);
  };
  const unmask = (el) => {
    const [value, priority] = own.get(el) || ["", ""];
    own.delete(el);
    if (value) el.style.setProperty("-webkit-text-security", value, priority);
    else el.style.removeProperty("-webkit-text-security");
  };
  // Echoes: text the page shows (or a field's value) that contains a secret. Only the executor
  // holds the values: it is asked about every text of at least the shortest secret's length
  // (``watch``; 0 while none is known), and the text stays covered (``awaiting``, counted per
  // question) until it answers with where the secret is. Text is covered by a highlight of its
  // own (a solid box, no glyph: ``::highlight`` in a sheet adopted by the document and every
  // shadow root the world knows), which changes neither the layout nor what scripts read; a
  // field whose value holds a secret is tainted (a provisional mask: the field's discs).
  let watch = 0;
  const awaiting = new Map();
  const asked = new Map();
  let asks = 0;
  const keepsMask = (el) => tainted.has(el) || awaiting.has(el);
  const UNRENDERED = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "TITLE"]);
  const sheet = new CSSStyleSheet();
  sheet.replaceSync("::highlight(%HIGHLIGHT%) { color: transparent !important; background-color: #000 !important; " +
    "text-shadow: none !important; -webkit-text-fill-color: transparent !important; " +
    "-webkit-text-stroke-color: transparent !important; text-decoration: none !important; }");
  const painted = new Highlight();
  const covers = new Map();
  const paint = (roots) => {
    if (CSS.highlights.get("%HIGHLIGHT%") !== painted) CSS.highlights.set("%HIGHLIGHT%", painted);
    for (const root of roots) if (!root.adoptedStyleSheets.includes(sheet)) root.adoptedStyleSheets = [...root.adoptedStyleSheets, sheet];
  };
  // ``node``'s text covered at ``spans`` ([start, end] pairs), all of it without; ``null``: uncovered.
  const cover = (node, spans) => {
    for (const range of covers.get(node) || []) painted.delete(range);
    covers.delete(node);
    if (spans === null) return;
    const length = node.data.length;
    const ranges = (spans.length ? spans : [[0, length]]).map(([a, b]) => {
      const range = new Range();
      range.setStart(node, Math.max(0, Math.min(a, length)));
      range.setEnd(node, Math.max(0, Math.min(b, length)));
      painted.add(range);
      return range;
    });
    covers.set(node, ranges);
    const root = node.getRootNode();
    paint(root instanceof ShadowRoot ? [document, root] : [document]);
  };
  const candidate = (n) => {
    if (n.nodeType === Node.TEXT_NODE) {
      const el = n.parentElement;
      return !!el && !UNRENDERED.has(el.tagName) && !tainted.has(el) && n.data.trim().length >= watch;
    }
    return isField(n) && !tainted.has(n) && n.value.length >= watch;
  };
  const collect = (root, out) => {
    if (!watch) return out;
    if (root.nodeType === Node.TEXT_NODE || isField(root)) { if (candidate(root)) out.push(root); return out; }
    if (!(root instanceof Element || root instanceof Document || root instanceof DocumentFragment)) return out;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.nodeType === Node.TEXT_NODE || isField(n)) { if (candidate(n)) out.push(n); }
    }
    return out;
  };
  const textOf = (n) => n.nodeType === Node.TEXT_NODE ? n.data : n.value;
  const question = (nodes, hold) => nodes.map((n) => {
    const id = ++asks;
    const text = textOf(n);
    // Questions never answered (a session that ended) are dropped oldest first; what they covered stays covered.
    if (asked.size >= 10000) asked.delete(asked.keys().next().value);
    asked.set(id, {n, hold, text});
    if (hold) {
      awaiting.set(n, (awaiting.get(n) || 0) + 1);
      if (n.nodeType === Node.TEXT_NODE) cover(n, []); else maskFor(n);
    }
    return [id, text];
  });
  // The live path: covered now, asked at once (a binding only this world has), answered by ``settle``.
  const ask = (nodes) => {
    if (!nodes.length) return;
    const items = question(nodes, true);
    if (typeof globalThis["%BINDING%"] === "function") globalThis["%BINDING%"](JSON.stringify(items));
  };
  // The executor's answer: ``matched`` the [id, spans] whose text holds a secret, ``seen`` every id asked.
  const settle = (matched, seen) => {
    const hit = new Map(matched);
    for (const id of seen) {
      const entry = asked.get(id);
      asked.delete(id);
      if (!entry) continue;
      const n = entry.n;
      if (entry.hold) {
        const left = (awaiting.get(n) || 1) - 1;
        if (left > 0) awaiting.set(n, left); else awaiting.delete(n);
      }
      // An answer about text that changed since is not applied (a newer question covers it).
      if (!n.isConnected || textOf(n) !== entry.text) { if (!n.isConnected) cover(n, null); continue; }
      if (n.nodeType === Node.TEXT_NODE) {
        if (hit.has(id)) cover(n, hit.get(id));
        else if (!awaiting.has(n)) cover(n, null);
      } else if (hit.has(id)) mark(n);
      else if (entry.hold && !keepsMask(n)) unmask(n);
    }
  };
  const mark = (el) => {
    if (!(el instanceof Element)) return false;
    tainted.add(el);
    mask(el);
    const root = el.getRootNode();
    if (root instanceof ShadowRoot) adopt(root);
    return true;
  };
  // Shadow roots are scanned and observed like the document: open ones as they are found, closed
  // ones handed over by the executor (CDP reaches them; page scripts keep them from this world).
  const roots = new Set();
  let observer = null;
  const OBSERVED = {subtree: true, childList: true, attributes: true, characterData: true,
                    attributeFilter: ["type", "autocomplete", "style"]};
  const adopt = (root) => {
    if (!(root instanceof ShadowRoot) || roots.has(root)) return false;
    roots.add(root);
    if (observer) observer.observe(root, OBSERVED);
    scanTree(root);
    return true;
  };
  const scanTree = (root) => {
    if (root instanceof Element && secretField(root)) mark(root);
    if (root instanceof Element && root.shadowRoot) adopt(root.shadowRoot);
    for (const el of root.querySelectorAll("*")) {
      if (el instanceof HTMLInputElement && secretField(el)) mark(el);
      if (el.shadowRoot) adopt(el.shadowRoot);
    }
  };
  const scan = (root) => {
    if (!(root instanceof Element || root instanceof Document || root instanceof ShadowRoot)) return;
    scanTree(root);
    for (const el of tainted) if (el.isConnected) mask(el);
  };
  // The walk for shadow hosts visits every element (tens of ms on a page of 10,000): it runs at
  // most once a second; the quick scan looks only at the inputs of the document and known roots.
  let lastDeep = 0;
  const deepScan = (force) => {
    if (!force && performance.now() - lastDeep < 1000) return quickScan();
    lastDeep = performance.now();
    scan(document);
    for (const root of roots) if (root.host && root.host.isConnected) scan(root);
    quickScan();
  };
  const liveRoots = () => [document, ...[...roots].filter((root) => root.host && root.host.isConnected)];
  // A field's value changes without a mutation record: the quick scan asks about each new one,
  // and notes when it last found one (``heldAt``, ms since the epoch): a frame rendered before that
  // may show the new value in clear (the live stream drops it, ``executor/feed.py``).
  // (``shownValues`` is not forgotten when the secrets change: a value asked about again is not new on screen.)
  let lastValues = new WeakMap();
  const shownValues = new WeakMap();
  let heldAt = 0;
  const quickScan = () => {
    const changed = [];
    for (const root of liveRoots()) {
      for (const el of root.querySelectorAll("input")) if (secretField(el)) mark(el);
      if (!watch) continue;
      for (const el of root.querySelectorAll("input, textarea")) {
        if (tainted.has(el) || lastValues.get(el) === el.value) continue;
        lastValues.set(el, el.value);
        const fresh = shownValues.get(el) !== el.value;
        shownValues.set(el, el.value);
        if (!candidate(el)) continue;
        changed.push(el);
        if (fresh) heldAt = Date.now();
      }
    }
    ask(changed);
    if (covers.size) {
      for (const node of [...covers.keys()]) if (!node.isConnected) cover(node, null);
      paint(liveRoots());
    }
    for (const el of tainted) if (el.isConnected) mask(el);
  };
  const remember = (el, record) => {
    gone.push({name: el.getAttribute("name") || "", id: el.id || "", parent: record.target,
               previous: record.previousSibling, next: record.nextSibling, form: el.form || null});
    if (gone.length > 200) gone.shift();
  };
  const replaces = (el) => isField(el) && gone.some((g) =>
    (g.name && g.name === el.getAttribute("name") && (g.form === el.form || !g.form || !el.form)) ||
    (g.id && g.id === el.id) ||
    (g.parent === el.parentNode && (g.previous === el.previousSibling || g.next === el.nextSibling)));
  const observe = () => { observer = new MutationObserver((records) => {
    const changed = new Set();
    for (const record of records) {
      if (record.type === "characterData" && watch && candidate(record.target)) changed.add(record.target);
      if (record.type !== "childList") continue;
      for (const node of record.removedNodes) {
        if (!(node instanceof Element)) continue;
        for (const el of tainted) if (el === node || node.contains(el)) remember(el, record);
      }
    }
    for (const record of records) {
      if (record.type === "attributes") {
        const el = record.target;
        if (record.attributeName === "style") { if (keepsMask(el)) mask(el); }
        else if (secretField(el)) mark(el);
        continue;
      }
      for (const node of record.addedNodes) {
        if (node.nodeType === Node.TEXT_NODE && watch && candidate(node)) changed.add(node);
        if (!(node instanceof Element)) continue;
        scan(node);
        for (const n of collect(node, [])) changed.add(n);
        const fields = isField(node) ? [node] : [...node.querySelectorAll("input, textarea")];
        for (const el of fields) if (!tainted.has(el) && replaces(el)) mark(el);
      }
    }
    ask([...changed].filter((n) => n.isConnected && candidate(n)));
  });
    observer.observe(document, OBSERVED);
    for (const root of roots) observer.observe(root, OBSERVED);
  };
  // A shadow root attached to an element already in the document makes no mutation record: the
  // document is scanned again at every press and click, before the page's own handlers (this
  // capture listener on window comes first: a show-password button toggles a field seen as a
  // password field already), again before the next paint after every input event, and once a
  // second as a backstop.
  let pending = false;
  const soon = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; deepScan(); });
  };
  // The shadow roots an event passes through (the open ones) are adopted at once.
  const now = (event) => {
    for (const node of event.composedPath()) if (node instanceof ShadowRoot) adopt(node);
    quickScan();
    soon();
  };
  for (const type of ["pointerdown", "mousedown", "click", "keydown"]) window.addEventListener(type, now, true);
  for (const type of ["input", "change", "keyup", "pointerup", "focusin"]) window.addEventListener(type, soon, true);
  setInterval(() => deepScan(true), 2000);
  window.addEventListener(EVENT, (event) => { event.stopImmediatePropagation(); mark(event.composedPath()[0]); }, true);
  const shadowOf = (el) => el.shadowRoot || [...roots].find((root) => root.host === el) || null;
  const deepActive = () => {
    let el = document.activeElement;
    for (let root = el && shadowOf(el); root && root.activeElement; root = shadowOf(el)) el = root.activeElement;
    return el;
  };
  const editable = (el) => el instanceof Element && (el.isContentEditable ||
    el instanceof HTMLTextAreaElement ||
    (el instanceof HTMLInputElement && !["hidden", "file", "checkbox", "radio", "submit", "button", "image", "reset",
                                         "range", "color"].includes(el.type)));
  const holds = (el) => el.isConnected && (isField(el) ? el.value !== "" : (el.textContent || "") !== "");
  // The fields a person typed into, each with a token of its own: their values are read (here,
  // in the executor's world) after each of the person's inputs, for redaction.
  const personal = new Map();
  const tokenBase = Math.random().toString(36).slice(2);
  let tokens = 0;
  globalThis.__ramTaint = {
    mark,
    markFocused: () => {
      const el = deepActive();
      if (!editable(el)) return false;
      if (isField(el) && !personal.has(el)) personal.set(el, tokenBase + ":" + tokens++);
      return mark(el);
    },
    typed: () => [...personal].filter(([el]) => el.isConnected && el.value !== "")
      .map(([el, token]) => [token, el.value.slice(0, %MAX_TYPED%)]),
    adopt,
    // The executor's side of echoes: the shortest secret's length (a change asks about every
    // text again), every text to ask about (before a capture), and its answers.
    // Every field value is new again to the quick scan: the secrets may have changed.
    watch: (n) => {
      lastValues = new WeakMap();
      if (n === watch) return;
      watch = n;
      ask(liveRoots().flatMap((root) => collect(root, [])));
    },
    texts: () => question(liveRoots().flatMap((root) => collect(root, [])), false),
    settle,
    quick: () => { quickScan(); return tainted.size; },
    // Every field looked at now (a new value is covered at once); when one was last found new.
    look: () => { quickScan(); return heldAt; },
    rescan: () => { deepScan(true); return tainted.size; },
    held: () => { for (const el of tainted) if (holds(el)) return true; return false; },
    focusedHeld: () => { const el = deepActive(); return !!el && tainted.has(el) && holds(el); },
    list: () => [...tainted].filter((el) => el.isConnected),
    text: () => {
      const values = [...document.querySelectorAll("input, textarea")].map((el) => el.value);
      return [document.documentElement ? document.documentElement.outerHTML : "",
              document.body ? document.body.innerText : "", document.title, location.href, ...values].join("\n");
    },
  };
  const start = () => { observe(); deepScan(true); };
  if (document.documentElement) start(); else document.addEventListener("readystatechange", start, {once: true});
})()"""


def script(*, event: str, binding: str, highlight: str, max_typed: int) -> str:
    """The world's script with the mark event's, the binding's and the highlight's names."""
    return (
        TEMPLATE.replace("%EVENT%", event)
        .replace("%BINDING%", binding)
        .replace("%HIGHLIGHT%", highlight)
        .replace("%MAX_TYPED%", str(max_typed))
    )
