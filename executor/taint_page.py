"""One tab's taint state (``PageTaint``): the isolated world installed in every frame of the tab,
out-of-process frames included, the echoes of a secret it is asked about, the closed shadow roots
handed to it, and what its frames hold. ``executor/taint.py`` describes the tracking and is the
module callers use; the world's script is ``executor/taint_world.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from typing import Any

from playwright.async_api import CDPSession, Frame, Page

from executor import taint_world
from executor.redaction import MAX_TYPED_LENGTH, secrets_of
from executor.secret_forms import forms_of, is_base64_form

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
# How long a navigated frame is waited for before its closed shadow roots are adopted (they are
# adopted again before every capture and every selector check anyway).
LOAD_WAIT_MS = 30_000
# Two rendering frames of a frame (what is covered now is in the second's picture), or this long.
RENDER_WAIT_MS = 250
RENDERED = (
    f"new Promise((done) => {{ const late = setTimeout(done, {RENDER_WAIT_MS}, false); "
    "requestAnimationFrame(() => requestAnimationFrame(() => { clearTimeout(late); done(true); })); })"
)

TAINT_SCRIPT = taint_world.script(event=MARK_EVENT, binding=BINDING, highlight=HIGHLIGHT, max_typed=MAX_TYPED_LENGTH)


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
        return secrets_of(self.page).all()

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

    @property
    def watching(self) -> bool:
        """Whether the tab's worlds look for echoes of a secret (one is known in its browser context)."""
        return bool(self._watch)

    async def held_since(self) -> float:
        """Every frame's fields looked at now (a value new since the last look is covered at once), and
        when a look last found one new (seconds since the epoch; 0: never): a picture rendered before
        that may show it in clear."""
        found = [value for value in await self.each_frame("globalThis.__ramTaint.look()") if isinstance(value, int | float)]
        return max(found, default=0) / 1000

    async def rendered(self) -> None:
        """Until every frame has rendered what is covered now (two rendering frames; a frame that is
        not rendered at all, such as a hidden one, is waited for at most RENDER_WAIT_MS)."""
        await self.each_frame(RENDERED, await_promise=True)

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

    async def each_frame(self, expression: str, *, await_promise: bool = False) -> list[Any]:
        """``expression`` evaluated in the isolated world of every frame (by value; with
        ``await_promise``, the value its promise settles to)."""
        values = []
        for cdp, _frame_id, context in await self._worlds():
            with contextlib.suppress(Exception):
                reply = await cdp.send(
                    "Runtime.evaluate",
                    {"expression": expression, "contextId": context, "returnByValue": True, "awaitPromise": await_promise},
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
        widen = 1 if is_base64_form(form) else 0
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
