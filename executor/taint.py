"""Tainted fields: the page's elements that hold a secret, and what follows from them.

A field is tainted while it may hold a secret the agent must never observe: every field
``browser_login`` filled, every field that is or ever was ``type=password`` on its document,
fields with ``autocomplete`` ``current-password``, ``new-password`` or ``one-time-code``, fields a
person typed into on the screen (a credential pause, a takeover), and the nodes a page swaps in
for any of them (a show-password toggle that replaces the input with a clone: same ``name`` or
``id``, or the same place in the same parent).

Tracking is by node identity, in a private isolated world of every frame (``WORLD``: page
scripts cannot see or reach it) that the executor installs over a CDP session of its own
before any page script runs (``Page.addScriptToEvaluateOnNewDocument``, also run at once in the
current document). The world keeps the tainted elements themselves for the document's life,
and a MutationObserver there taints password/one-time-code fields as they appear or change
type, and the clones that replace tainted nodes. ``tainted_nodes`` names them by CDP backend
node id. Shadow roots are scanned and observed like the document: open ones as the world finds
them (added nodes, a press or click passing through them before the page's handlers, every
capture, a walk of the document at most once a second after input events and every 2 s),
closed ones found through CDP (``DOM.getDocument`` with ``pierce``) and handed to the world
(``adopt_closed_roots``: once a document has loaded, before a capture at most every 5 s).
A cross-site frame that runs in a process of its own (an out-of-process iframe) is another CDP
target: the executor opens a session on it (as soon as it navigates) and installs the same world.

Three consequences, each through this module only:

* **Masking at the rendering.** A tainted element carries ``-webkit-text-security: disc`` as an
  ``!important`` inline declaration, set from the isolated world and set again by its observer
  the moment the page changes the element's ``style`` (an inline ``!important`` wins over every
  stylesheet of the page). The page's own rendering shows discs whatever the field's current
  ``type``, so every picture — the screen feed to every subscriber, the ``screenshot`` tool, the
  captures after steps and on pauses, ``browser_login``'s diagnostic — is masked by one path and
  stays in step with scrolling. ``ensure_masked`` re-scans every frame right before a capture.
* **Value-blind selectors** (``value_blind``, ``check_selector``). While a tainted value is on the
  active page (``held``), selector-taking tools accept only a plain-CSS grammar whose matches
  cannot depend on what a field holds; anything else is refused with reason
  ``selector_value_dependent`` (the agent's ``browser.selector_value_dependent``).
* **Redaction** (``redact``). The secret strings the executor typed (``browser_login``'s username,
  password and one-time code, ``auth_answer``'s username and password) and what a person typed
  into a field on the screen (read from the field in the isolated world after each input) are
  kept in this process's memory for the life of the browser context, never logged, and replaced
  by ``[redacted]`` in every string the executor sends (replies and errors, observations,
  titles, URLs, tab and dialog texts, frame URLs), raw and in their common encodings
  (``encoded_forms``: percent-encoding, form encoding, base64 and base64url at every alignment,
  HTML entities).

What ``browser_login`` (``executor/login.py``) calls: ``await taint.mark_filled(page, element,
value)`` right before it sets a credential value on ``element`` (username, password, one-time
code). ``auth_answer`` calls ``remember_secrets``. The runtime calls ``install`` for every page it
adopts, ``mark_focused`` around a person's keys and text, and ``forget_page`` when a tab closes.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import functools
import html
import json
import logging
import re
import secrets
import time
import weakref
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, unquote_plus

from playwright.async_api import CDPSession, ElementHandle, Frame, Page

from executor.control import ControlError
from executor.ops import FailureReason

logger = logging.getLogger(__name__)

WORLD = "ram-taint"
# The event that hands the isolated world an element to taint: dispatched by Playwright's own
# utility world (``ElementHandle.dispatch_event``), heard first by the isolated world's capture
# listener on ``window`` (registered before any page script), which stops it there.
MARK_EVENT = "ram-taint-" + secrets.token_hex(8)
# The function the isolated world calls to ask the executor whether texts hold a secret (added
# to that world only, ``Runtime.addBinding``), and the name it answers under.
BINDING = "ramTaintAsk" + secrets.token_hex(8)
# The custom highlight that covers the text that shows a secret (``::highlight``).
HIGHLIGHT = "ram-secret-" + secrets.token_hex(8)
REDACTED = "[redacted]"
# Secrets shorter than this are not redacted (they would match everywhere); no stored credential is that short.
MIN_REDACTED_LENGTH = 3
# The one-time codes a browser context keeps for redaction (its newest; each TOTP login adds one).
# Usernames and passwords are never dropped while the context lives.
MAX_ONE_TIME_CODES = 8
# What a person typed into a field on the screen, remembered for redaction: the fields of a browser
# context (the newest), each with its latest non-empty value, up to this many characters.
MAX_TYPED_FIELDS = 32
MAX_TYPED_LENGTH = 512
REASON: FailureReason = "selector_value_dependent"
# An agent action whose arguments carry a known secret (any form redaction knows): nothing is done.
ARGUMENTS_REASON: FailureReason = "secret_in_arguments"
# A key pressed while the focused element is a tainted field holding a value (other than Tab/Escape).
KEY_REASON: FailureReason = "secret_field_focused"
# How long a navigated frame is waited for before its closed shadow roots are adopted (they are
# adopted again before every capture and every selector check anyway).
LOAD_WAIT_MS = 30_000
# ``DOM.getDocument`` with ``pierce`` takes about 1.4 s on a page of 10,000 elements: before a
# capture, closed roots are looked for again at most this often (and after every load).
CLOSED_ROOTS_EVERY_SECONDS = 5.0
# The keys that only move focus away or dismiss: allowed on a focused secret field.
KEYS_OFF_A_SECRET = frozenset({"Tab", "Escape"})

TAINT_SCRIPT = """(() => {
  if (globalThis.__ramTaint) { globalThis.__ramTaint.quick(); return; }
  const EVENT = "%EVENT%";
  const SECRET_AUTOCOMPLETE = ["current-password", "new-password", "one-time-code"];
  const tainted = new Set();
  const gone = [];
  const isField = (el) => el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement;
  const secretField = (el) => el instanceof HTMLInputElement && (
    el.type === "password" ||
    (el.getAttribute("autocomplete") || "").toLowerCase().split(/\\s+/).some((t) => SECRET_AUTOCOMPLETE.includes(t)));
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
  // A field's value changes without a mutation record: the quick scan asks about each new one.
  const lastValues = new WeakMap();
  const quickScan = () => {
    const changed = [];
    for (const root of liveRoots()) {
      for (const el of root.querySelectorAll("input")) if (secretField(el)) mark(el);
      if (!watch) continue;
      for (const el of root.querySelectorAll("input, textarea")) {
        if (tainted.has(el) || lastValues.get(el) === el.value) continue;
        lastValues.set(el, el.value);
        if (candidate(el)) changed.push(el);
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
    watch: (n) => {
      if (n === watch) return;
      watch = n;
      ask(liveRoots().flatMap((root) => collect(root, [])));
    },
    texts: () => question(liveRoots().flatMap((root) => collect(root, [])), false),
    settle,
    quick: () => { quickScan(); return tainted.size; },
    rescan: () => { deepScan(true); return tainted.size; },
    held: () => { for (const el of tainted) if (holds(el)) return true; return false; },
    focusedHeld: () => { const el = deepActive(); return !!el && tainted.has(el) && holds(el); },
    list: () => [...tainted].filter((el) => el.isConnected),
    text: () => {
      const values = [...document.querySelectorAll("input, textarea")].map((el) => el.value);
      return [document.documentElement ? document.documentElement.outerHTML : "",
              document.body ? document.body.innerText : "", document.title, location.href, ...values].join("\\n");
    },
  };
  const start = () => { observe(); deepScan(true); };
  if (document.documentElement) start(); else document.addEventListener("readystatechange", start, {once: true});
})()""".replace("%EVENT%", MARK_EVENT).replace("%BINDING%", BINDING).replace("%HIGHLIGHT%", HIGHLIGHT).replace("%MAX_TYPED%", str(MAX_TYPED_LENGTH))


class Secrets:
    """The secret strings typed into one browser context (any of its tabs), kept for redaction,
    the window check and the arguments check until the context closes: usernames and passwords
    for its whole life, one-time codes in a small ring of their own (never at their expense)."""

    def __init__(self) -> None:
        self.lasting: list[str] = []
        self.codes: collections.deque[str] = collections.deque(maxlen=MAX_ONE_TIME_CODES)
        # Field token -> what a person last typed there (a value replaces the field's earlier one:
        # the prefixes typed key by key are not kept).
        self.typed: collections.OrderedDict[str, str] = collections.OrderedDict()

    def add(self, values: Iterable[str], *, one_time: bool = False) -> None:
        for value in values:
            if not value or len(value) < MIN_REDACTED_LENGTH or value in self.lasting:
                continue
            if one_time:
                if value not in self.codes:
                    self.codes.append(value)
            else:
                self.lasting.append(value)

    def typed_by_person(self, token: str, value: str) -> None:
        self.typed.pop(token, None)
        self.typed[token] = value
        while len(self.typed) > MAX_TYPED_FIELDS:
            self.typed.popitem(last=False)

    def all(self) -> list[str]:
        typed = [v for v in self.typed.values() if len(v) >= MIN_REDACTED_LENGTH and v not in self.lasting]
        return [*self.lasting, *self.codes, *typed]

    def clear(self) -> None:
        self.lasting.clear()
        self.codes.clear()
        self.typed.clear()


_SECRETS: weakref.WeakKeyDictionary[Any, Secrets] = weakref.WeakKeyDictionary()


def _secrets_of(page: Page) -> Secrets:
    """The secrets of ``page``'s browser context (shared by all its tabs, open or closed)."""
    owner = page.context
    if owner not in _SECRETS:
        _SECRETS[owner] = Secrets()
    return _SECRETS[owner]


class PageTaint:
    """One tab's taint state: its CDP session (which keeps the isolated world's script
    installed for every new document), and one more for each cross-site frame that runs in a
    process of its own (an out-of-process iframe: its own CDP target, which the tab's session does
    not reach); the secret strings are its browser context's."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.cdp: CDPSession | None = None
        self._installing: asyncio.Lock = asyncio.Lock()
        # The DOM domain's users (adopting closed roots, naming nodes) take turns: one disables it after use.
        self._dom: asyncio.Lock = asyncio.Lock()
        self._adopted_at = 0.0
        # Out-of-process frames and their sessions; frames found in the tab's process, by the URL
        # they were checked at (a navigation may move a frame to a process of its own).
        self._oopif: dict[Frame, CDPSession] = {}
        self._in_process: dict[Frame, str] = {}
        # Echoes: the shortest secret's length the worlds watch for, each session's script that
        # tells new documents so, and the answers being sent.
        self._watch = 0
        self._watch_scripts: dict[int, str] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._watching: asyncio.Lock = asyncio.Lock()

    @property
    def secrets(self) -> list[str]:
        return _secrets_of(self.page).all()

    async def install(self) -> None:
        async with self._installing:
            if self.cdp is None:
                await self._install()

    async def _prepare(self, cdp: CDPSession) -> None:
        await cdp.send("Page.enable")
        await cdp.send(
            "Page.addScriptToEvaluateOnNewDocument",
            {"source": TAINT_SCRIPT, "worldName": WORLD, "runImmediately": True},
        )
        # The isolated world asks about the texts it sees through a binding of its own (page
        # scripts have no such function); the answer goes back to the asking world.
        # (Chromium exposes a binding to a new document's contexts only on a session with Runtime enabled.)
        cdp.on("Runtime.bindingCalled", lambda event: self._asked(cdp, event))
        await cdp.send("Runtime.addBinding", {"name": BINDING, "executionContextName": WORLD})
        await cdp.send("Runtime.enable")
        await self._watch_session(cdp, self._watch)

    async def _watch_session(self, cdp: CDPSession, length: int) -> None:
        """Every new document of ``cdp``'s frames starts asking about texts of ``length`` or more."""
        previous = self._watch_scripts.pop(id(cdp), None)
        if previous is not None:
            with contextlib.suppress(Exception):
                await cdp.send("Page.removeScriptToEvaluateOnNewDocument", {"identifier": previous})
        if length:
            added = await cdp.send(
                "Page.addScriptToEvaluateOnNewDocument",
                {"source": f"globalThis.__ramTaint && globalThis.__ramTaint.watch({length})", "worldName": WORLD},
            )
            self._watch_scripts[id(cdp)] = str(added["identifier"])

    async def watch(self) -> None:
        """The secrets of the browser context changed: every frame's world (and every new
        document's) asks about texts as long as the shortest one, and every current text is
        looked at once."""
        async with self._watching:
            forms = forms_of(self.secrets)
            length = min((len(form) for form in forms), default=0)
            if length != self._watch:
                self._watch = length
                for cdp in await self._sessions():
                    with contextlib.suppress(Exception):
                        await self._watch_session(cdp, length)
                await self.each_frame(f"globalThis.__ramTaint.watch({length})")
            await self.sweep()

    def _asked(self, cdp: CDPSession, event: dict[str, Any]) -> None:
        if event.get("name") != BINDING:
            return
        task = asyncio.get_running_loop().create_task(
            self._answer(cdp, int(event.get("executionContextId", 0)), str(event.get("payload", "")))
        )
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    def _matches(self, items: Any) -> tuple[list[list[Any]], list[int]]:
        """Of ``items`` (``[id, text]`` pairs from a world), each id whose text holds a known
        secret in any form redaction knows (case-insensitively) with where (``[start, end]``
        spans; none: all of it), and every id."""
        forms = forms_of(self.secrets)
        matched: list[list[Any]] = []
        seen: list[int] = []
        for item in items if isinstance(items, list) else []:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)):
                continue
            seen.append(item[0])
            spans = echo_spans(str(item[1]), forms)
            if spans is not None:
                matched.append([item[0], spans])
        return matched, seen

    async def _settle(self, cdp: CDPSession, context: int, items: Any) -> None:
        matched, seen = self._matches(items)
        if seen:
            await cdp.send(
                "Runtime.evaluate",
                {
                    "expression": f"globalThis.__ramTaint.settle({json.dumps(matched)}, {json.dumps(seen)})",
                    "contextId": context,
                },
            )

    async def _answer(self, cdp: CDPSession, context: int, payload: str) -> None:
        with contextlib.suppress(Exception):  # a world that went away asked for nothing any more
            await self._settle(cdp, context, json.loads(payload))

    async def sweep(self) -> None:
        """Every frame's texts asked about at once (right before a capture): what holds a secret is masked."""
        if not self._watch:
            return
        for cdp, _frame_id, context in await self._worlds():
            with contextlib.suppress(Exception):
                reply = await cdp.send(
                    "Runtime.evaluate",
                    {"expression": "globalThis.__ramTaint.texts()", "contextId": context, "returnByValue": True},
                )
                await self._settle(cdp, context, reply.get("result", {}).get("value"))

    async def _install(self) -> None:
        cdp = await self.page.context.new_cdp_session(self.page)
        await self._prepare(cdp)
        self.cdp = cdp
        # An out-of-process frame gets the script as soon as it navigates, not at the next scan;
        # the closed shadow roots a document's scripts attached are adopted once it has loaded.
        self.page.on("framenavigated", self._frame_navigated)

    async def _frame_navigated(self, frame: Frame) -> None:
        with contextlib.suppress(Exception):
            await self._frame_session(frame)
            await frame.wait_for_load_state("load", timeout=LOAD_WAIT_MS)
            await self.adopt_closed_roots()

    async def _session(self) -> CDPSession:
        await self.install()
        if self.cdp is None:
            raise RuntimeError("the taint session did not start")
        return self.cdp

    async def _frame_session(self, frame: Frame) -> CDPSession | None:
        """The session of ``frame``'s own target if it runs out of process (installed), else None."""
        if frame == self.page.main_frame or frame.is_detached():
            return None
        if frame in self._oopif:
            return self._oopif[frame]
        if self._in_process.get(frame) == frame.url:
            return None
        try:
            cdp = await self.page.context.new_cdp_session(frame)
        except Exception:  # noqa: BLE001 - Playwright: the frame is part of its parent's session
            self._in_process[frame] = frame.url
            return None
        try:
            await self._prepare(cdp)
        except Exception:  # noqa: BLE001 - its target went away meanwhile
            with contextlib.suppress(Exception):
                await cdp.detach()
            return None
        self._in_process.pop(frame, None)
        self._oopif[frame] = cdp
        return cdp

    async def _sessions(self) -> list[CDPSession]:
        """The tab's session and one per out-of-process frame (every frame is reached by one)."""
        sessions = [await self._session()]
        for frame in list(self._oopif):
            if frame.is_detached():
                self._oopif.pop(frame, None)
        for frame in self.page.frames:
            with contextlib.suppress(Exception):
                cdp = await self._frame_session(frame)
                if cdp is not None:
                    sessions.append(cdp)
        return sessions

    async def _frames(self) -> list[tuple[CDPSession, str]]:
        """Every frame of the tab, with the session that reaches it."""
        found: list[tuple[CDPSession, str]] = []
        for cdp in await self._sessions():
            try:
                tree = (await cdp.send("Page.getFrameTree"))["frameTree"]
            except Exception:  # noqa: BLE001 - an out-of-process frame's target ended (it navigated)
                for frame, session in list(self._oopif.items()):
                    if session is cdp:
                        self._oopif.pop(frame, None)
                        with contextlib.suppress(Exception):
                            retry = await self._frame_session(frame)
                            if retry is not None:
                                tree = (await retry.send("Page.getFrameTree"))["frameTree"]
                                cdp = retry
                                break
                else:
                    continue
            stack = [tree]
            while stack:
                node = stack.pop()
                found.append((cdp, node["frame"]["id"]))
                stack.extend(node.get("childFrames", []))
        return found

    async def _world(self, cdp: CDPSession, frame_id: str) -> int | None:
        """The execution context of the isolated world in a frame (the script installed in it)."""
        try:
            world = await cdp.send("Page.createIsolatedWorld", {"frameId": frame_id, "worldName": WORLD})
            context = int(world["executionContextId"])
            # A frame whose document predates the session (or whose script has not run) gets it now.
            await cdp.send("Runtime.evaluate", {"expression": TAINT_SCRIPT, "contextId": context})
        except Exception:  # noqa: BLE001 - a frame that went away (or another session's) has nothing to report
            return None
        return context

    async def _worlds(self) -> list[tuple[CDPSession, str, int]]:
        worlds = []
        for cdp, frame_id in await self._frames():
            context = await self._world(cdp, frame_id)
            if context is not None:
                worlds.append((cdp, frame_id, context))
        return worlds

    async def each_frame(self, expression: str) -> list[Any]:
        """``expression`` evaluated in the isolated world of every frame (by value)."""
        values = []
        for cdp, _frame_id, context in await self._worlds():
            with contextlib.suppress(Exception):
                reply = await cdp.send(
                    "Runtime.evaluate", {"expression": expression, "contextId": context, "returnByValue": True}
                )
                values.append(reply.get("result", {}).get("value"))
        return values

    async def adopt_closed_roots(self, *, at_most_every: float = 0) -> int:
        """Hand every closed shadow root of every frame to that frame's isolated world, which then
        scans and observes it like the document (page scripts keep closed roots from other worlds;
        CDP's DOM domain reaches them). Returns how many roots were new to their world."""
        if at_most_every and time.monotonic() - self._adopted_at < at_most_every:
            return 0
        async with self._dom:
            self._adopted_at = time.monotonic()
            return await self._adopt_closed_roots()

    async def _adopt_closed_roots(self) -> int:
        adopted = 0
        group = f"{WORLD}-{secrets.token_hex(4)}"
        worlds = await self._worlds()
        contexts = {(id(cdp), frame_id): context for cdp, frame_id, context in worlds}
        seen: set[int] = set()
        for cdp, _frame_id, _context in worlds:
            if id(cdp) in seen:
                continue
            seen.add(id(cdp))
            try:
                await cdp.send("DOM.enable")
                document = (await cdp.send("DOM.getDocument", {"depth": -1, "pierce": True}))["root"]
                root_frame = str(document.get("frameId") or _frame_id)
                for frame_id, backend_node_id in _closed_roots(document, root_frame):
                    context = contexts.get((id(cdp), frame_id))
                    if context is None:
                        continue  # another process's frame: its own session adopts it
                    with contextlib.suppress(Exception):
                        resolved = await cdp.send(
                            "DOM.resolveNode",
                            {"backendNodeId": backend_node_id, "executionContextId": context, "objectGroup": group},
                        )
                        reply = await cdp.send(
                            "Runtime.callFunctionOn",
                            {
                                "functionDeclaration": "function () { return globalThis.__ramTaint.adopt(this); }",
                                "objectId": resolved["object"]["objectId"],
                                "returnByValue": True,
                            },
                        )
                        adopted += bool(reply.get("result", {}).get("value"))
                with contextlib.suppress(Exception):
                    await cdp.send("Runtime.releaseObjectGroup", {"objectGroup": group})
            except Exception:  # noqa: BLE001, S112 - a target that went away has nothing to adopt
                continue
            finally:
                # Left enabled, the domain would send this session every later change of the page.
                with contextlib.suppress(Exception):
                    await cdp.send("DOM.disable")
        return adopted

    async def held(self) -> bool:
        """A tainted field of the tab's current document (any frame) holds a value, or a secret
        typed into any tab of its browser context (open or closed since) appears anywhere in its
        frames (text, attributes, field values)."""
        if any(await self.each_frame("globalThis.__ramTaint.held()")):
            return True
        wanted = [s.casefold() for s in forms_of(self.secrets)]
        if not wanted:
            return False
        for text in await self.each_frame("globalThis.__ramTaint.text()"):
            folded = str(text or "").casefold()
            if any(secret in folded for secret in wanted):
                return True
        return False

    async def tainted_nodes(self) -> list[int]:
        """The CDP backend node ids of the connected tainted elements, in every frame (an
        out-of-process frame's ids are its own process's)."""
        async with self._dom:
            ids: list[int] = []
            group = f"{WORLD}-{secrets.token_hex(4)}"
            for cdp, _frame_id, context in await self._worlds():
                with contextlib.suppress(Exception):
                    await cdp.send("DOM.enable")
                    array = await cdp.send(
                        "Runtime.evaluate",
                        {"expression": "globalThis.__ramTaint.list()", "contextId": context, "objectGroup": group},
                    )
                    props = await cdp.send(
                        "Runtime.getProperties", {"objectId": array["result"]["objectId"], "ownProperties": True}
                    )
                    for prop in props["result"]:
                        object_id = prop.get("value", {}).get("objectId")
                        if prop["name"].isdigit() and object_id:
                            node = await cdp.send("DOM.describeNode", {"objectId": object_id})
                            ids.append(int(node["node"]["backendNodeId"]))
                    await cdp.send("Runtime.releaseObjectGroup", {"objectGroup": group})
                with contextlib.suppress(Exception):
                    await cdp.send("DOM.disable")
            return ids

    async def mark_backend_node(self, backend_node_id: int, frame_id: str) -> bool:
        """Taint the node ``backend_node_id`` of frame ``frame_id`` (a CDP-side caller's element)."""
        for cdp, frame, context in await self._worlds():
            if frame != frame_id:
                continue
            resolved = await cdp.send(
                "DOM.resolveNode", {"backendNodeId": backend_node_id, "executionContextId": context}
            )
            reply = await cdp.send(
                "Runtime.callFunctionOn",
                {
                    "functionDeclaration": "function () { return globalThis.__ramTaint.mark(this); }",
                    "objectId": resolved["object"]["objectId"],
                    "returnByValue": True,
                },
            )
            return bool(reply.get("result", {}).get("value"))
        return False

    async def focused_held(self) -> bool:
        """The focused element (through shadow roots, in any frame) is a tainted field holding a value."""
        return any(await self.each_frame("globalThis.__ramTaint.focusedHeld()"))


def echo_spans(text: str, forms: list[str]) -> list[list[int]] | None:
    """Where ``text`` shows any of ``forms`` (case-insensitively), as ``[start, end]`` spans; an
    empty list: somewhere, cover all of it (case folding changed the text's length); None: nowhere.
    A base64 form also takes the character on each side (it carries a few of the secret's bits)."""
    folded = text.casefold()
    spans: list[list[int]] = []
    for form in forms:
        wanted = form.casefold()
        at = folded.find(wanted)
        if at < 0:
            continue
        if len(folded) != len(text):
            return []
        widen = 1 if form in _BASE64_FORMS else 0
        while at >= 0:
            spans.append([max(0, at - widen), min(len(text), at + len(wanted) + widen)])
            at = folded.find(wanted, at + 1)
    return spans or None


def _closed_roots(node: dict[str, Any], frame_id: str) -> list[tuple[str, int]]:
    """The closed shadow roots in ``node``'s tree (``DOM.getDocument`` with ``pierce``), each as
    the frame whose document holds it and its backend node id."""
    found: list[tuple[str, int]] = []
    for root in node.get("shadowRoots", []):
        if root.get("shadowRootType") == "closed":
            found.append((frame_id, int(root["backendNodeId"])))
        found.extend(_closed_roots(root, frame_id))
    for child in node.get("children", []):
        found.extend(_closed_roots(child, frame_id))
    if "contentDocument" in node:
        found.extend(_closed_roots(node["contentDocument"], str(node.get("frameId") or frame_id)))
    return found


_PAGES: weakref.WeakKeyDictionary[Page, PageTaint] = weakref.WeakKeyDictionary()
_WATCHING: set[asyncio.Task[None]] = set()


def of(page: Page) -> PageTaint:
    if page not in _PAGES:
        _PAGES[page] = PageTaint(page)
    return _PAGES[page]


async def install(page: Page) -> None:
    """Start tracking a tab (the runtime does this for every page it adopts, before it acts)."""
    await of(page).install()


def forget_page(page: Page) -> None:
    """A closed tab: its tracking ends. Its secrets stay with its browser context (the site may
    keep the session, and another tab may show them): ``forget_context`` drops them."""
    _PAGES.pop(page, None)


def forget_context(context: Any) -> None:
    """A browser context that closes (the computer's browser stops or is reset): its secrets leave memory."""
    secrets_ = _SECRETS.pop(context, None)
    if secrets_ is not None:
        secrets_.clear()
    # The encoded forms computed for any context's secrets go too (the others' are computed again).
    encoded_forms.cache_clear()
    _BASE64_FORMS.clear()


def remember_secrets(page: Page, values: Iterable[str], *, one_time: bool = False) -> None:
    """Secret strings typed into ``page``, kept in memory for its browser context's life (one-time
    codes: the newest few), for redaction, the window check and the arguments check; the
    context's tabs then mask what shows them (at once when called on the event loop)."""
    _secrets_of(page).add(values, one_time=one_time)
    with contextlib.suppress(RuntimeError):  # no running loop: the next capture or check does it
        task = asyncio.get_running_loop().create_task(watch_context(page))
        _WATCHING.add(task)
        task.add_done_callback(_WATCHING.discard)


async def mark_filled(page: Page, element: ElementHandle, value: str, *, one_time: bool = False) -> None:
    """``element`` is about to receive the secret ``value``: taint it (masked before the value
    lands) and keep ``value`` for redaction. Call it right before setting the value."""
    remember_secrets(page, [value], one_time=one_time)
    await install(page)
    await watch_context(page)
    await element.dispatch_event(MARK_EVENT)


async def mark_focused(page: Page, *, learn: bool = False) -> None:
    """Taint the focused editable field of every frame (a person is typing into it). With
    ``learn`` (after the person's input landed), what the person has typed so far into each such
    field of the tab is read in the isolated world and remembered for its browser context like
    the stored secrets (never logged): the latest non-empty value of each field."""
    await install(page)
    await of(page).each_frame("globalThis.__ramTaint.markFocused()")
    if not learn:
        return
    secrets_ = _secrets_of(page)
    for pairs in await of(page).each_frame("globalThis.__ramTaint.typed()"):
        for pair in pairs or []:
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
                secrets_.typed_by_person(pair[0], pair[1])
    await watch_context(page)


async def watch_context(page: Page) -> None:
    """The secrets of ``page``'s browser context may have changed: every tab of it watches for
    the new ones in what its pages show, and masks what shows them now."""
    for other in list(_PAGES):
        if other.context is page.context and not other.is_closed():
            with contextlib.suppress(Exception):
                await of(other).watch()


async def held(page: Page) -> bool:
    """A tainted value is on ``page``'s current document (see ``PageTaint.held``)."""
    await install(page)
    return await of(page).held()


async def check_key(page: Page, key: str) -> None:
    """Refuse (ControlError ``secret_field_focused``) a key other than Tab or Escape
    while the focused element is a tainted field holding a value: a key would edit or submit the
    secret in place, and the page's reaction would tell what it holds."""
    if key in KEYS_OFF_A_SECRET:
        return
    await install(page)
    if await of(page).focused_held():
        raise ControlError(
            "The focused field holds a secret (a password, a one-time code, or a value browser_login or a person "
            "filled): only Tab and Escape are pressed there. Move focus with click or Tab first.",
            KEY_REASON,
        )


async def tainted_nodes(page: Page) -> list[int]:
    """The backend node ids of ``page``'s tainted elements (every frame)."""
    await install(page)
    return await of(page).tainted_nodes()


async def ensure_masked(page: Page) -> None:
    """Right before a capture: every frame scanned again and every tainted element's mask set,
    then one rendering frame, so the picture shows the masks."""
    await install(page)
    await of(page).adopt_closed_roots(at_most_every=CLOSED_ROOTS_EVERY_SECONDS)
    await of(page).each_frame("globalThis.__ramTaint.rescan()")
    await of(page).watch()  # the texts and field values that show a secret: masked too
    with contextlib.suppress(Exception):
        await of(page).each_frame("new Promise((resolve) => requestAnimationFrame(() => resolve(true)))")


# --- Value-blind selectors ------------------------------------------------------------------

# Pseudo-classes whose matching depends only on the document's structure, attributes other
# than the value, focus and checkedness (checkboxes, radios, options: never a text field's value).
BLIND_PSEUDO = frozenset(
    {
        "first-child",
        "last-child",
        "only-child",
        "first-of-type",
        "last-of-type",
        "only-of-type",
        "root",
        "scope",
        "enabled",
        "disabled",
        "checked",
        "required",
        "optional",
        "read-only",
        "read-write",
        "focus",
        "focus-within",
        "focus-visible",
        "link",
        "any-link",
        "defined",
        "visible",  # Playwright's: layout only
    }
)
NTH_PSEUDO = frozenset({"nth-child", "nth-last-child", "nth-of-type", "nth-last-of-type"})
LIST_PSEUDO = frozenset({"not", "is", "where"})
_IDENT = re.compile(r"-?(?:[_a-zA-Z]|[^\x00-\x7f])(?:[_a-zA-Z0-9-]|[^\x00-\x7f])*")
_STRING = re.compile(r"\"[^\"\\\n]*\"|'[^'\\\n]*'")
_NTH = re.compile(r"\s*(?:odd|even|[-+]?\d*n(?:\s*[-+]\s*\d+)?|[-+]?\d+)\s*", re.IGNORECASE)
# Attribute selectors compare a whole value or one whitespace-separated word, never a part.
BLIND_ATTRIBUTE_OPERATORS = ("~=", "=")


class _NotBlind(Exception):
    pass


class _Parser:
    """A strict parser of the value-blind grammar: anything it does not know is refused."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _ws(self) -> bool:
        start = self.pos
        while self._peek() in (" ", "\t", "\n"):
            self.pos += 1
        return self.pos > start

    def _ident(self) -> str:
        match = _IDENT.match(self.text, self.pos)
        if match is None:
            raise _NotBlind
        self.pos = match.end()
        return match.group(0)

    def selector_list(self, *, relative: bool = False, closing: str = "") -> None:
        while True:
            self._ws()
            self.complex(relative=relative)
            self._ws()
            if self._peek() == ",":
                self.pos += 1
                continue
            if self._peek() == closing:
                return
            raise _NotBlind

    def complex(self, *, relative: bool) -> None:
        if relative and self._peek() in (">", "+", "~"):
            self.pos += 1
            self._ws()
        self.compound()
        while True:
            spaced = self._ws()
            if self._peek() in (">", "+", "~"):
                self.pos += 1
                self._ws()
                self.compound()
            elif spaced and self._peek() not in ("", ",", ")"):
                self.compound()
            else:
                return

    def compound(self) -> None:
        items = 0
        if self._peek() == "*":
            self.pos += 1
            items += 1
        elif _IDENT.match(self.text, self.pos):
            self._ident()
            items += 1
        while True:
            char = self._peek()
            if char == "#":
                self.pos += 1
                self._ident()
            elif char == ".":
                self.pos += 1
                self._ident()
            elif char == "[":
                self.attribute()
            elif char == ":":
                self.pseudo()
            else:
                break
            items += 1
        if not items:
            raise _NotBlind

    def attribute(self) -> None:
        self.pos += 1
        self._ws()
        name = self._ident().lower()
        if name == "value":
            raise _NotBlind
        self._ws()
        if self._peek() == "]":
            self.pos += 1
            return
        for operator in BLIND_ATTRIBUTE_OPERATORS:
            if self.text.startswith(operator, self.pos):
                self.pos += len(operator)
                break
        else:
            raise _NotBlind
        self._ws()
        match = _STRING.match(self.text, self.pos) or _IDENT.match(self.text, self.pos)
        if match is None:
            raise _NotBlind
        self.pos = match.end()
        self._ws()
        if self._peek() in ("i", "s", "I", "S") and self.text[self.pos + 1 : self.pos + 2] in (" ", "]"):
            self.pos += 1
            self._ws()
        if self._peek() != "]":
            raise _NotBlind
        self.pos += 1

    def pseudo(self) -> None:
        self.pos += 1
        if self._peek() == ":":
            raise _NotBlind  # pseudo-elements
        name = self._ident().lower()
        if self._peek() != "(":
            if name not in BLIND_PSEUDO:
                raise _NotBlind
            return
        self.pos += 1
        if name in NTH_PSEUDO:
            match = _NTH.match(self.text, self.pos)
            if match is None:
                raise _NotBlind
            self.pos = match.end()
        elif name in LIST_PSEUDO:
            self.selector_list(closing=")")
        elif name == "has":
            self.selector_list(relative=True, closing=")")
        else:
            raise _NotBlind
        if self._peek() != ")":
            raise _NotBlind
        self.pos += 1


def value_blind(selector: str) -> bool:
    """Whether ``selector`` is in the value-blind grammar: plain CSS of type, ``*``, ``#id``,
    ``.class``, attribute presence or whole-value (``=``) or word (``~=``) match on any attribute
    but ``value``, the combinators (descendant, ``>``, ``+``, ``~``), ``:nth-*(an+b)``, the
    structural, state and focus pseudo-classes of ``BLIND_PSEUDO``, and ``:not``/``:is``/``:where``/
    ``:has`` of the same grammar. No Playwright engine (``text=``, ``role=``, ``internal:*``,
    ``xpath``, ``>>`` chains), no ``:has-text``/``:text``, no value pseudo-class (``:placeholder-shown``,
    ``:valid``, ``:invalid``, ``:in-range``, ``:out-of-range``, ``:empty``, ``:blank``,
    ``:autofill``…), no substring attribute match, no escapes."""
    if "\\" in selector or not selector.strip():
        return False
    parser = _Parser(selector)
    try:
        parser.selector_list()
    except _NotBlind:
        return False
    return parser.pos == len(selector)


def refusal_message(selector_kind: str = "selector") -> str:
    return (
        f"This {selector_kind} could depend on what a field holds, and the page holds a secret (a password field, "
        "a one-time code, or a field browser_login or a person filled): until it is gone, selectors are plain "
        'CSS only — tag, #id, .class, [attr], [attr="whole value"] or [attr~=word] (never on value), '
        "combinators, :nth-child() and the structural pseudo-classes, :not/:is/:where/:has of the same. "
        "role=, text=, internal:*, xpath, :has-text(), [value...], ^= $= *= and :placeholder-shown, "
        ":valid, :invalid, :in-range, :out-of-range, :empty are refused now."
    )


async def check_selector(page: Page, selector: str | None) -> None:
    """Refuse (ControlError ``selector_value_dependent``) a selector outside the value-blind grammar
    while a tainted value is on ``page``; anything goes otherwise."""
    if selector is None or value_blind(selector):
        return
    if await held(page):
        raise ControlError(refusal_message(), REASON)


# --- Redaction ------------------------------------------------------------------------------


# An encoded form shorter than this is not matched (base64 of a secret that starts mid-group
# keeps only the characters its own bytes decide: a short one would match everywhere).
MIN_ENCODED_LENGTH = 8


def _base64_cores(data: bytes) -> set[str]:
    """The base64 text ``data`` yields wherever it sits in a longer encoded string: for each of
    the three byte alignments, the characters decided by ``data``'s bytes alone (a page that
    encodes ``"user:" + secret`` carries one of them). The characters at either end that mix in
    a neighbour's bits, and the padding, are taken by redaction's pattern (``_piece``)."""
    cores = set()
    bits = 8 * len(data)
    for shift in (0, 1, 2):
        encoded = base64.b64encode(b"\0" * shift + data).decode()
        start = 8 * shift
        # Character i covers bits [6i, 6i + 6) of the stream: keep those inside ``data``'s bits.
        cores.add(encoded[-(-start // 6) : (start + bits) // 6])
    return cores


def _percent(value: str, safe: str, *, plus: bool = False) -> str:
    """``value`` percent-encoded (UTF-8, upper-case hex) but for ASCII letters, digits and ``safe``."""
    out = []
    for char in value:
        if char.isascii() and (char.isalnum() or char in safe):
            out.append(char)
        elif plus and char == " ":
            out.append("+")
        else:
            out.append("".join(f"%{byte:02X}" for byte in char.encode()))
    return "".join(out)


# The base64 and base64url forms of the known secrets: redaction also takes the character on
# each side of one (it carries a few of the secret's bits) and its padding.
_BASE64_FORMS: set[str] = set()
_BASE64_CHAR = "[A-Za-z0-9+/_-]"


@functools.lru_cache(maxsize=512)
def encoded_forms(value: str) -> frozenset[str]:
    """``value`` and its common encodings: percent-encoding (``encodeURIComponent``, Python's
    ``quote``, form encoding with ``+`` for spaces as ``URLSearchParams`` writes it), base64 and
    base64url at every alignment, HTML entities. Bounded: about a dozen strings per secret,
    computed once (``forget_context`` drops them)."""
    forms = {
        value,
        _percent(value, "-_.~"),  # Python's quote(safe="")
        _percent(value, "-_.~/:@"),
        _percent(value, "-_.!~*'()"),  # encodeURIComponent
        _percent(value, "-_.~", plus=True),  # quote_plus
        _percent(value, "*-._", plus=True),  # application/x-www-form-urlencoded (URLSearchParams)
        html.escape(value, quote=True),
        html.escape(value, quote=False),
    }
    encoded = set()
    for core in _base64_cores(value.encode()):
        encoded |= {core, core.replace("+", "-").replace("/", "_")}
    encoded = {form for form in encoded if len(form) >= MIN_ENCODED_LENGTH}
    _BASE64_FORMS.update(encoded)
    return frozenset(form for form in forms | encoded if len(form) >= MIN_REDACTED_LENGTH)


def _piece(form: str) -> str:
    if form in _BASE64_FORMS:
        return f"{_BASE64_CHAR}?{re.escape(form)}{_BASE64_CHAR}?={{0,2}}"
    return re.escape(form)


def forms_of(values: Iterable[str]) -> list[str]:
    """Every form of ``values`` redaction replaces, longest first (a form inside another goes after it)."""
    found: set[str] = set()
    for value in values:
        if len(value) >= MIN_REDACTED_LENGTH:
            found |= encoded_forms(value)
    return sorted(found, key=len, reverse=True)


def known_secrets() -> list[str]:
    """Every secret string of every browser context, in every form redaction replaces, longest
    first (a secret inside another goes after it)."""
    return forms_of(value for secrets_ in list(_SECRETS.values()) for value in secrets_.all())


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _forms(text: str) -> set[str]:
    """``text`` as given, percent-decoded and HTML-unescaped (once and twice, ``+`` as a space or
    not): the browser may decode what the agent encoded (a URL's ``%61`` becomes ``a``, a page's
    ``&#97;``) before a reply carries it. Encoded forms of a secret (base64) are matched as they are."""
    forms = {text}
    for _ in range(2):
        forms |= {unquote(f) for f in forms} | {unquote_plus(f) for f in forms} | {html.unescape(f) for f in forms}
    return {f.casefold() for f in forms}


def supplies_secret(arguments: Any) -> bool:
    """Whether any string in ``arguments`` (keys and values, at any depth) contains a known secret
    in any form redaction knows, case-insensitively."""
    wanted = [s.casefold() for s in known_secrets()]
    if not wanted:
        return False
    return any(secret in form for text in _strings(arguments) for form in _forms(text) for secret in wanted)


ARGUMENTS_MESSAGE = (
    "This action was refused and nothing was done: its arguments carry a secret this computer's browser holds "
    "(a credential browser_login, auth_answer or a person typed). Secrets are never supplied by the agent."
)


def check_arguments(arguments: Any) -> None:
    """Refuse (ControlError ``secret_in_arguments``) an agent action whose arguments carry a known
    secret. The answer never says which argument or where: an honest agent never knows a secret,
    and a guessing one learns nothing more than that one of its strings matched."""
    if supplies_secret(arguments):
        raise ControlError(ARGUMENTS_MESSAGE, ARGUMENTS_REASON)


def redact_text(text: str, wanted: list[str] | None = None) -> str:
    wanted = known_secrets() if wanted is None else wanted
    if not wanted or not text:
        return text
    folded = text.casefold()
    if not any(secret.casefold() in folded for secret in wanted):
        return text
    pattern = re.compile("|".join(_piece(s) for s in wanted), re.IGNORECASE)
    return pattern.sub(REDACTED, text)


def redact(value: Any, wanted: list[str] | None = None) -> Any:
    """``value`` (a JSON-like structure) with every known secret string replaced in its strings."""
    wanted = known_secrets() if wanted is None else wanted
    if not wanted:
        return value
    if isinstance(value, str):
        return redact_text(value, wanted)
    if isinstance(value, dict):
        return {redact(k, wanted): redact(v, wanted) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, wanted) for v in value]
    return value
