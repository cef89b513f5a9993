// The clean screen: watch the computer through jpeg-websocket-v1 on one `control`
// session opened from the start (watching sends nothing; `takeover` goes only when the
// person asks, so taking control needs no second socket), send one input at a time and
// wait for its ack, never replay. Typing goes as `text` (bursts, IME, paste of the
// person's own clipboard), named keys, shortcuts and single key presses as `key`;
// pointer moves are coalesced and no release is ever dropped. A gesture is mapped with
// the image box measured at its pointerdown, and a tap sends its up where it went down.
(function () {
  "use strict";
  const root = document.getElementById("screen");
  if (!root) return;
  const computerId = root.dataset.computerId;
  const canvas = document.getElementById("screen-canvas");
  const stage = document.getElementById("screen-stage");
  const context = canvas.getContext("2d");
  const stateText = document.getElementById("screen-state");
  const holderText = document.getElementById("screen-holder");
  const pendingText = document.getElementById("screen-pending");
  const urlField = document.getElementById("screen-url");
  const urlForm = document.getElementById("screen-address");
  const goButton = document.getElementById("go");
  const noticeText = document.getElementById("screen-notice");
  const keys = document.getElementById("screen-keys");
  const keysLabel = document.getElementById("screen-keys-label");
  const takeButton = document.getElementById("take-control");
  const releaseButton = document.getElementById("release");
  const reconnectButton = document.getElementById("reconnect");
  const startButton = document.getElementById("start");
  const keyboardButton = document.getElementById("keyboard");
  const zoomIn = document.getElementById("zoom-in");
  const zoomOut = document.getElementById("zoom-out");
  const zoomLevel = document.getElementById("zoom-level");
  const tabsNav = document.getElementById("screen-tabs");
  const tabList = document.getElementById("tab-list");
  const tabNotice = document.getElementById("screen-tab-notice");
  const TABS_PROTOCOL = "ram-tabs-v1"; // the tab addition to jpeg-websocket-v1 (tabs messages, tab inputs)
  const DIALOGS_PROTOCOL = "ram-dialogs-v1"; // the dialog addition (dialogs messages, dialog answers)
  const NOTICES_PROTOCOL = "ram-notices-v1"; // notices that end nothing (a failed navigation, a slow link)
  const MAX_URL = 4096;
  const dialogBox = document.getElementById("screen-dialog");
  const dialogTitle = document.getElementById("dialog-title");
  const dialogWhere = document.getElementById("dialog-where");
  const dialogMessage = document.getElementById("dialog-message");
  const dialogTextLabel = document.getElementById("dialog-text-label");
  const dialogText = document.getElementById("dialog-text");
  const dialogAccept = document.getElementById("dialog-accept");
  const dialogDismiss = document.getElementById("dialog-dismiss");
  const dialogNote = document.getElementById("dialog-note");
  const dialogAuth = document.getElementById("dialog-auth");
  const dialogUsername = document.getElementById("dialog-username");
  const dialogPassword = document.getElementById("dialog-password");
  const DIALOG_WORDS = {
    alert: ["The page shows a message", "OK", null],
    confirm: ["The page asks you to confirm", "OK", "Cancel"],
    prompt: ["The page asks for an answer", "OK", "Cancel"],
    beforeunload: ["Leave this page? Changes may not be saved.", "Leave", "Stay"],
    auth: ["The site asks you to sign in", "Sign in", "Cancel"],
  };
  const MAX_AUTH = 1000;       // characters of a sign-in prompt's username or password
  const ASKED_AGAIN_MS = 10000; // the same site asking again this soon after a sign-in refused it
  const NAMED_KEYS = new Set(["Backspace", "Tab", "Enter", "Escape", "Delete", "Home", "End", "ArrowUp",
    "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown", "Shift", "Control", "Alt", "Meta",
    "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12"]);
  const MAX_TEXT = 4000;       // UTF-16 units in one `text` input
  const WAIT_MS = 30000;       // the client's limit for each ack and transition
  const ZOOMS = [1, 1.5, 2, 3];

  let conn = null;           // the current connection: {ws, mode, generation, pendingFrame, observed}
  let width = Number(root.dataset.width) || 1280;
  let height = Number(root.dataset.height) || 720;
  let control = null;        // the last frame's `control` (available, leased, transition, human)
  let controlling = false;
  let transition = null;     // "takeover" | "release" while waiting for its state
  let unavailable = false;   // the computer's screen failed: stays shown until Reconnect
  let pending = null;        // sequence of the input awaiting its ack
  let sequence = 0;
  let queue = [];            // inputs not yet sent (one is in flight at a time)
  let uncertain = false;
  let releasing = false;     // Release was asked: the held keys' releases go out, then `release`
  let ended = false;
  let startOffered = false;  // the computer is stopped: Start is offered; it connects once ready (a first connection only)
  let connectedOnce = false; // after a first connection, a new generation asks for Reconnect, as the contract says
  let deadline = null;
  let drawing = false;
  let nextImage = null;
  let zoom = 0;
  let tabs = [];             // the computer's open pages from the last `tabs` message
  let activeTab = null;      // the id of the page the screen shows
  let dialogs = [];          // the dialogs waiting for an answer (oldest first) from the last `dialogs` message
  let shownDialog = null;    // the one on screen
  let answering = null;      // the id of the dialog whose answer was sent
  let signedIn = null;       // the origin, tab and time of the last sign-in sent (the same site asking soon after: refused)
  // Inside a frame (RAM_VIEW_FRAME_ANCESTORS), the page around it could cover or hide the screen:
  // control is taken, and pointer input sent, only while the browser reports the screen and the
  // Take control button fully visible (IntersectionObserver v2); where it cannot tell, never.
  const framed = window.self !== window.top;
  const unseen = new Set(framed ? ["screen-canvas", "take-control"] : []);
  const heldKeys = new Map(); // event.code -> key sent as down
  const heldButtons = new Map(); // pointerId -> button sent as down

  function show(text, kind) {
    stateText.textContent = text;
    stateText.dataset.state = kind;
    root.dataset.state = kind;
  }

  function holder() {
    if (unavailable) return ["unavailable", "The computer's screen is unavailable."];
    if (controlling) return ["you", "Who has the computer: you."];
    if (control === "human") return ["person", "Who has the computer: another person."];
    if (control === "leased") return ["agent", "Who has the computer: the agent."];
    if (control === "transition") return ["transition", "Who has the computer: control is changing hands."];
    if (control === "available") return ["nobody", "Who has the computer: nobody."];
    return ["unknown", "Who has the computer: checking…"];
  }

  function visible(forTakeover) {
    return !unseen.has("screen-canvas") && !(forTakeover && unseen.has("take-control"));
  }

  function canTakeControl() {
    return visible(true) && !!conn && conn.observed && !ended && !unavailable && !controlling && transition === null &&
      (control === "available" || control === "leased");
  }

  function render() {
    const [who, whoText] = holder();
    holderText.textContent = whoText;
    holderText.dataset.holder = who;
    takeButton.hidden = controlling || transition === "release";
    takeButton.disabled = !canTakeControl();
    releaseButton.hidden = !controlling && transition !== "release";
    releaseButton.disabled = !controlling || transition !== null || releasing;
    reconnectButton.hidden = !(ended || unavailable) || startOffered;
    startButton.hidden = !startOffered;
    keyboardButton.hidden = !controlling;
    urlField.readOnly = !controlling;
    goButton.hidden = !controlling;
    goButton.disabled = !controlling || transition !== null || releasing;
    canvas.classList.toggle("controlling", controlling);
    const tabsUsable = controlling && transition === null && !releasing;
    for (const button of tabList.querySelectorAll("button")) button.disabled = !tabsUsable;
    const canAnswer = tabsUsable && shownDialog !== null && answering !== shownDialog.id;
    dialogAccept.disabled = dialogDismiss.disabled = dialogText.disabled = !canAnswer;
    dialogUsername.disabled = dialogPassword.disabled = !canAnswer;
    if (shownDialog !== null) {
      const more = dialogs.length > 1 ? ` ${dialogs.length - 1} more waiting after this one.` : "";
      dialogNote.textContent = (controlling
        ? "The page waits for your answer; the screen does not react until then."
        : "The page waits for an answer. Take control to answer it.") + more;
    }
    const waiting = queue.length + (pending !== null ? 1 : 0);
    pendingText.classList.toggle("idle", waiting === 0);  // hidden, its space kept (the screen must not move)
    pendingText.textContent = waiting === 0 ? "" : `Sending your input to the computer… (${waiting} waiting)`;
    if (ended) return;
    if (unavailable) { show("The computer's screen is unavailable: its browser failed. Reconnect to check it again.", "unavailable"); return; }
    if (transition === "takeover") show("Taking control…", "transition");
    else if (transition === "release" || releasing) show("Releasing control…", "transition");
    else if (controlling) show("You have control. Clicks, keys and scrolling go to the computer.", "controlling");
    else if (conn && conn.observed) {
      if (!visible(true)) show("Observing. This screen is shown inside another page: Take control works only while the screen is fully visible, not hidden or covered.", "observing");
      else if (control === "human") show("Observing. Another person has control; you cannot take it now.", "observing");
      else if (control === "leased") show("Observing. The agent is using the computer; Take control stops it.", "observing");
      else if (control === "transition") show("Observing. Control is changing hands…", "observing");
      else show("Observing. Nothing you do here reaches the computer.", "observing");
    } else show("Connecting…", "connecting");
  }

  function armDeadline() {
    clearTimeout(deadline);
    deadline = setTimeout(() => end("No answer in time; the result is uncertain. Check the screen after reconnecting."), WAIT_MS);
  }

  function clearDeadline() { clearTimeout(deadline); deadline = null; }

  function closeSocket(c) {
    if (c && c.ws.readyState <= 1) c.ws.close();
  }

  function end(message) {
    clearDeadline();
    const wasUncertain = uncertain || pending !== null || transition !== null || queue.length > 0;
    closeSocket(conn);
    conn = null;
    controlling = false; transition = null; pending = null; queue = []; releasing = false;
    heldKeys.clear(); heldButtons.clear(); gesture = null;
    forgetSignIn();
    ended = true;
    hideKeyboard();
    render();
    if (unavailable) return;
    if (wasUncertain) {
      show((message ? message + " " : "") + "Uncertain: the last action may or may not have happened. Reconnect and check before acting again.", "uncertain");
    } else {
      show((message ? message + " " : "") + "Disconnected. Reconnect to watch again.", "disconnected");
    }
  }

  function send(c, value) {
    if (!c || c.ws.readyState !== 1) throw new Error("closed");
    c.ws.send(JSON.stringify(value));
  }

  // --- the input queue ------------------------------------------------------

  function pump() {
    if (controlling && releasing && pending === null && queue.length === 0) { sendRelease(); return; }
    if (!controlling || transition !== null || pending !== null || queue.length === 0) { render(); return; }
    const input = queue.shift();
    sequence += 1;
    pending = sequence;
    armDeadline();
    try { send(conn, { type: "input", sequence: sequence, input: input }); }
    catch (error) { uncertain = true; end("The connection closed while sending."); return; }
    render();
  }

  function enqueue(input) {
    if (!controlling || releasing) return;
    const last = queue[queue.length - 1];
    if (last && input.type === "pointer" && input.phase === "move" && last.type === "pointer" && last.phase === "move") {
      queue[queue.length - 1] = input;      // only the latest position of a move matters
    } else if (last && input.type === "wheel" && last.type === "wheel" &&
               Math.abs(last.delta_x + input.delta_x) <= 2000 && Math.abs(last.delta_y + input.delta_y) <= 2000) {
      queue[queue.length - 1] = { type: "wheel", delta_x: last.delta_x + input.delta_x, delta_y: last.delta_y + input.delta_y };
    } else {
      queue.push(input);
    }
    pump();
  }

  function enqueueText(text) {
    if (!controlling || releasing || !text) return;
    const last = queue[queue.length - 1];
    if (last && last.type === "text" && last.text.length + text.length <= MAX_TEXT) {
      queue[queue.length - 1] = { type: "text", text: last.text + text };  // typing goes in bursts
      pump();
      return;
    }
    let start = 0;
    while (start < text.length) {
      let stop = Math.min(text.length, start + MAX_TEXT);
      const code = text.charCodeAt(stop - 1);
      if (stop < text.length && code >= 0xd800 && code <= 0xdbff) stop -= 1;  // never split a surrogate pair
      queue.push({ type: "text", text: text.slice(start, stop) });
      start = stop;
    }
    pump();
  }

  function releaseEverything() {
    // Key and button releases for whatever the person still holds; never dropped.
    for (const [, button] of heldButtons) enqueue({ type: "pointer", phase: "up", x: lastPoint.x, y: lastPoint.y, button: button });
    heldButtons.clear(); gesture = null;
    for (const [, key] of Array.from(heldKeys).reverse()) enqueue({ type: "key", phase: "up", key: key });
    heldKeys.clear();
  }

  // --- frames -----------------------------------------------------------------

  function drawLatest() {
    if (drawing || !nextImage) return;
    drawing = true;
    const blob = nextImage;
    nextImage = null;
    createImageBitmap(blob).then((bitmap) => {
      if (canvas.width !== width || canvas.height !== height) { canvas.width = width; canvas.height = height; }
      context.drawImage(bitmap, 0, 0, width, height);
      bitmap.close();
      canvas.dataset.frames = String((Number(canvas.dataset.frames) || 0) + 1);
    }).catch(() => {}).finally(() => { drawing = false; drawLatest(); });
  }

  function onMessage(c, event) {
    if (typeof event.data !== "string") {
      if (!c.pendingFrame) { end("The screen sent an image without its description."); return; }
      if (event.data.byteLength > 2000000) { end("A frame exceeded the limit."); return; }
      c.pendingFrame = null;
      if (c !== conn) return;
      nextImage = new Blob([event.data], { type: "image/jpeg" });   // latest wins
      drawLatest();
      return;
    }
    let message;
    try { message = JSON.parse(event.data); } catch (error) { end("The screen sent an unreadable message."); return; }
    if (message.type === "hello") {
      width = message.viewport.width; height = message.viewport.height;
    } else if (message.type === "frame") {
      if (typeof message.generation !== "string" || message.mime_type !== "image/jpeg" ||
          (c.generation && c.generation !== message.generation)) {
        end("The computer restarted."); return;
      }
      c.generation = message.generation;
      c.pendingFrame = message;
      if (c !== conn) return;
      width = message.width; height = message.height;
      c.observed = true;
      control = message.control;
      // The address the computer shows, unless the person is typing a new one.
      if (typeof message.url === "string" && urlField.value !== message.url && !editingUrl()) urlField.value = message.url;
      if (message.controlling !== true && controlling) { controlling = false; heldKeys.clear(); heldButtons.clear(); gesture = null; }
      render();
    } else if (message.type === "state") {
      if (c !== conn) return;
      if (message.control === "human" && message.controlling === true) {
        if (transition !== "takeover") { end("Unexpected grant."); return; }
        clearDeadline();
        transition = null; controlling = true; control = "human"; sequence = 0; uncertain = false;
        answering = null;
        if (shownDialog !== null) {
          render();   // the dialog's buttons are usable now: the focus goes to it
          dialogFocus().focus({ preventScroll: true });
        } else focusKeys();
      } else if (message.control === "released") {
        clearDeadline();
        controlling = false; transition = null; queue = []; heldKeys.clear(); heldButtons.clear(); gesture = null;
        control = "available";   // released: nobody holds it until the agent is explicitly continued
        hideKeyboard();
      } else if (message.control === "unavailable") {
        unavailable = true; controlling = false;
        hideKeyboard();
      } else if (message.control === "transition") {
        control = "transition";
      }
      render();
    } else if (message.type === "tabs") {
      c.tabs = message.tabs;
      if (c === conn) showTabs(message.tabs);
    } else if (message.type === "dialogs") {
      c.dialogs = message.dialogs;
      if (c === conn) showDialogs(message.dialogs);
    } else if (message.type === "notice") {
      if (c === conn) showNotice(message);
    } else if (message.type === "ack") {
      if (c === conn && message.sequence === pending) { clearDeadline(); pending = null; pump(); }
    } else if (message.type === "error") {
      end(String(message.message || "The session ended."));
    }
  }

  // --- notices and the address --------------------------------------------------

  let slowLink = false;
  function showNotice(message) {
    if (message.code === "slow_link") slowLink = true;
    else if (message.code === "link_ok") slowLink = false;
    if (message.code === "navigation_failed") noticeText.textContent = `The page did not load: ${message.message} You still have control.`;
    else noticeText.textContent = slowLink ? "The link is too slow for this page: the screen updates only every few seconds." : "";
  }

  function editingUrl() {
    return controlling && document.activeElement === urlField;
  }

  function navigateTo(text) {
    let url;
    try { url = new URL(text.trim()); } catch (error) { url = null; }
    if (!url && /^[^\s/:]+\.[^\s]+$/.test(text.trim())) {
      try { url = new URL("https://" + text.trim()); } catch (error) { url = null; }   // "example.com"
    }
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.username || url.password || url.href.length > MAX_URL) {
      noticeText.textContent = "Type a whole web address (https://…), with no user name or password in it.";
      return;
    }
    noticeText.textContent = slowLink ? noticeText.textContent : "";
    enqueue({ type: "navigate", url: url.href });
    urlField.value = url.href;
    focusKeys();
  }

  urlForm.addEventListener("submit", (event) => {
    event.preventDefault();
    if (controlling && transition === null && !releasing) navigateTo(urlField.value);
  });

  // --- tabs ----------------------------------------------------------------------

  function tabName(tab) {
    return tab.title || tab.url || "Untitled page";
  }

  function showTabs(list) {
    const previous = activeTab;
    const known = new Set(tabs.map((tab) => tab.id));
    tabs = Array.isArray(list) ? list : [];
    const active = tabs.find((tab) => tab.active);
    activeTab = active ? active.id : null;
    tabList.replaceChildren();
    for (const tab of tabs) {
      const item = document.createElement("li");
      item.className = tab.active ? "active" : "";
      item.dataset.tab = tab.id;
      const open = document.createElement("button");
      open.type = "button";
      open.className = "tab-switch";
      open.textContent = tabName(tab);
      open.title = tab.url;
      if (tab.active) open.setAttribute("aria-current", "page");
      open.addEventListener("click", () => { if (!tab.active) enqueue({ type: "tab", action: "switch", tab: tab.id }); });
      const close = document.createElement("button");
      close.type = "button";
      close.className = "tab-close";
      close.textContent = "×";
      close.setAttribute("aria-label", `Close the tab ${tabName(tab)}`);
      close.addEventListener("click", () => enqueue({ type: "tab", action: "close", tab: tab.id }));
      item.append(open, close);
      tabList.append(item);
    }
    tabsNav.hidden = tabs.length < 2;  // one page needs no tab strip
    if (previous !== null && active && activeTab !== previous) {
      // The screen follows the page in use: a popup, a new tab, or back to the opener.
      tabNotice.textContent = known.has(active.id)
        ? `The screen now shows the tab “${tabName(active)}”.`
        : `The computer opened a new page; the screen now shows “${tabName(active)}”.`;
    }
    render();
  }

  // --- dialogs ---------------------------------------------------------------------

  function dialogFocus() {
    if (shownDialog !== null && shownDialog.kind === "prompt") return dialogText;
    if (shownDialog !== null && shownDialog.kind === "auth") return dialogUsername;
    return dialogAccept;
  }

  function forgetSignIn() {
    dialogUsername.value = ""; dialogPassword.value = "";   // a password is never kept on the page
  }

  function showDialogs(list) {
    dialogs = Array.isArray(list) ? list : [];
    const first = dialogs.length ? dialogs[0] : null;
    if (first === null) {
      const hadFocus = dialogBox.contains(document.activeElement);
      shownDialog = null; answering = null;
      forgetSignIn();
      dialogBox.hidden = true;
      if (hadFocus && controlling) focusKeys();
      render();
      return;
    }
    if (shownDialog === null || shownDialog.id !== first.id) {
      shownDialog = first;
      const words = DIALOG_WORDS[first.kind] || DIALOG_WORDS.alert;
      dialogTitle.textContent = words[0];
      if (first.kind === "auth") {
        // The origin as the browser reports it; the realm is the site's own text, never markup.
        dialogMessage.textContent = `${first.origin} asks for a username and password.` +
          (first.realm ? ` The site calls it “${first.realm}”.` : "");
      } else dialogMessage.textContent = first.message;   // the page's own text, never markup
      dialogAccept.textContent = words[1];
      dialogDismiss.textContent = words[2] || "";
      dialogDismiss.hidden = words[2] === null;
      dialogTextLabel.hidden = first.kind !== "prompt";
      dialogText.value = first.kind === "prompt" ? first.default_text : "";
      dialogAuth.hidden = first.kind !== "auth";
      forgetSignIn();
      dialogBox.hidden = false;
      const tab = tabs.find((t) => t.id === first.tab);
      const again = first.kind === "auth" && signedIn !== null && signedIn.origin === first.origin &&
        signedIn.tab === first.tab && Date.now() - signedIn.at < ASKED_AGAIN_MS
        ? "The site asked again: the username or password may be wrong. " : "";
      dialogWhere.textContent = again + (tab && !tab.active ? `On the tab “${tabName(tab)}” (not the one on screen).` : "");
      render();   // its buttons are enabled first: a disabled button cannot take the focus
      if (controlling) dialogFocus().focus({ preventScroll: true });
      return;
    }
    render();
  }

  function answerDialog(accept) {
    if (shownDialog === null || !controlling || transition !== null || releasing || answering === shownDialog.id) return;
    const input = { type: "dialog", dialog: shownDialog.id, accept: accept };
    if (shownDialog.kind === "prompt" && accept) {
      let text = dialogText.value;
      if (text.length > MAX_TEXT) {
        let stop = MAX_TEXT;
        const code = text.charCodeAt(stop - 1);
        if (code >= 0xd800 && code <= 0xdbff) stop -= 1;   // never split a surrogate pair
        text = text.slice(0, stop);
      }
      input.text = text;
    }
    if (shownDialog.kind === "auth" && accept) {
      // The person's own sign-in goes to the computer like any input; the page keeps no copy.
      input.username = dialogUsername.value.slice(0, MAX_AUTH);
      input.password = dialogPassword.value.slice(0, MAX_AUTH);
      signedIn = { origin: shownDialog.origin, tab: shownDialog.tab, at: Date.now() };
      forgetSignIn();
    } else if (shownDialog.kind === "auth") signedIn = null;
    answering = shownDialog.id;   // one answer per dialog; the next `dialogs` message shows what is left
    enqueue(input);
  }

  dialogAccept.addEventListener("click", () => answerDialog(true));
  dialogDismiss.addEventListener("click", () => answerDialog(false));
  for (const field of [dialogText, dialogUsername, dialogPassword]) {
    field.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && field === dialogUsername) { event.preventDefault(); dialogPassword.focus(); }
      else if (event.key === "Enter") { event.preventDefault(); answerDialog(true); }
      else if (event.key === "Escape") { event.preventDefault(); answerDialog(false); }
    });
  }

  // --- connections ------------------------------------------------------------

  async function openConnection(mode) {
    const response = await fetch("/api/visual/sessions", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-RAM-Intent": "visual-session" },
      body: JSON.stringify({ computer_id: computerId, mode: mode, transport: "jpeg-websocket-v1" }),
    });
    const data = await response.json().catch(() => ({}));
    if (response.status === 429) {
      throw new Error((data.error || "Too many screens are open.") + " Close another screen of this account " +
        "(another tab, a phone, an app watching the computer), then Reconnect.");
    }
    if (response.status === 409 && !connectedOnce) {
      const notReady = new Error(data.error || "The computer is not ready.");
      notReady.notReady = true;
      throw notReady;
    }
    if (response.status !== 201) throw new Error(data.error || "Could not open the screen.");
    connectedOnce = true;
    const url = new URL(data.websocket_path, window.location.origin);
    if (url.origin !== window.location.origin || url.pathname !== "/api/visual/stream") throw new Error("Invalid endpoint.");
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    // The ticket is used once, not kept; ram-tabs-v1, ram-dialogs-v1 and ram-notices-v1 ask for the additions.
    const ws = new WebSocket(url, [data.subprotocol, TABS_PROTOCOL, DIALOGS_PROTOCOL, NOTICES_PROTOCOL,
      data.ticket_protocol_prefix + data.ticket]);
    ws.binaryType = "arraybuffer";
    const c = { ws: ws, mode: mode, generation: null, pendingFrame: null, observed: false, tabs: null, dialogs: null };
    ws.addEventListener("message", (event) => { if (c === conn) onMessage(c, event); });
    const lost = () => {
      if (c !== conn) return;
      // Refused before any frame (the handshake's answer is not readable here): most often the
      // account's limit of open screens, reached between the POST and the handshake.
      end(c.observed ? "" : "The screen could not be opened. If another screen of this account is open " +
        "(another tab, a phone, an app watching the computer), close it, then Reconnect.");
    };
    ws.addEventListener("close", lost);
    ws.addEventListener("error", lost);
    return c;
  }

  async function connect() {
    ended = false; unavailable = false; uncertain = false; control = null; controlling = false;
    transition = null; pending = null; queue = []; releasing = false;
    render();
    try {
      // One control-mode session from the start: watching sends nothing, and Take control needs
      // no second socket (the account's limit of open screens would refuse it).
      conn = await openConnection("control");
    } catch (error) {
      ended = true;
      if (error.notReady) { offerStart(); return; }
      render();
      // A refusal stays on the page until the person acts (Reconnect).
      show(error.message === "Failed to fetch" ? "Could not reach the server." : error.message, "disconnected");
      return;
    }
    render();
  }

  // --- a stopped computer: Start, then the first connection once it is ready --------------

  function offerStart(message) {
    startOffered = true;
    ended = true;
    startButton.disabled = false;
    render();
    show(message || "The computer is stopped (it stops by itself when nothing uses it; its logins are kept). Start it to watch.", "stopped");
  }

  function stateUrl(path) { return `${path}?computer_id=${encodeURIComponent(computerId)}`; }

  async function startComputer() {
    if (!startOffered) return;
    startButton.disabled = true;
    show("Starting the computer…", "starting");
    const token = root.querySelector("input[name=csrfmiddlewaretoken]");
    const response = await fetch(stateUrl("/view/start"), {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": token ? token.value : "" },
      body: "{}",
    }).catch(() => null);
    if (!response || response.status !== 202) { offerStart("The computer could not be started. Try Start again."); return; }
    const deadline = Date.now() + 180000;
    while (Date.now() < deadline) {
      const polled = await fetch(stateUrl("/view/state"), { credentials: "same-origin" }).catch(() => null);
      const data = polled && polled.ok ? await polled.json().catch(() => ({})) : {};
      if (data.available) { startOffered = false; connect(); return; }
      if (data.state === "failed") { offerStart(data.state_reason || "The computer failed to start. Try Start again."); return; }
      show(data.state === "starting" ? "Starting the computer… it connects by itself once it is ready." : "Waiting for the computer…", "starting");
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    offerStart("The computer did not become ready in time. Try Start again.");
  }

  function takeControl() {
    if (!canTakeControl()) return;
    transition = "takeover";
    armDeadline();
    render();
    try { send(conn, { type: "takeover" }); } catch (error) { end("Taking control is uncertain."); }
  }

  function release() {
    if (!controlling || transition !== null || releasing) return;
    // Releases of held keys and buttons go first, each with its ack; then the hand-back.
    releaseEverything();
    releasing = true;
    pump();
  }

  function sendRelease() {
    releasing = false;
    controlling = false;
    transition = "release";
    armDeadline();
    try { send(conn, { type: "release" }); } catch (error) { end("Releasing is uncertain."); return; }
    render();
  }

  // --- pointer ------------------------------------------------------------------

  let lastPoint = { x: 0, y: 0 };
  // The gesture under way (a button held): the image box measured at its pointerdown, where it
  // went down and whether it has left the tap slop. A tap (no move beyond the slop) sends its up
  // at the down's coordinates, so the page under the finger gets one click at one place.
  let gesture = null;
  const TAP_SLOP_PX = { mouse: 3, pen: 8, touch: 12 };
  function imageBox() {
    const rect = canvas.getBoundingClientRect();
    const scale = Math.min(rect.width / width, rect.height / height);
    const shownWidth = width * scale, shownHeight = height * scale;
    return { left: rect.left + (rect.width - shownWidth) / 2, top: rect.top + (rect.height - shownHeight) / 2,
      width: shownWidth, height: shownHeight };
  }
  function point(event, clamp) {
    // The image is fitted inside the canvas box (object-fit: contain):
    // x = (position − left margin) × width / displayed width; y likewise. Outside the image: ignored,
    // unless a button is held (the release then happens at the nearest edge).
    const box = gesture ? gesture.box : imageBox();
    let x = (event.clientX - box.left) * width / box.width;
    let y = (event.clientY - box.top) * height / box.height;
    if (!(x >= 0 && y >= 0 && x <= width - 1 && y <= height - 1)) {
      if (!clamp) return null;
      x = Math.max(0, Math.min(width - 1, x || 0)); y = Math.max(0, Math.min(height - 1, y || 0));
    }
    lastPoint = { x: Math.round(x * 100) / 100, y: Math.round(y * 100) / 100 };
    return lastPoint;
  }
  function beyondSlop(event) {
    if (!gesture || gesture.moved) return true;
    const slop = TAP_SLOP_PX[event.pointerType] || TAP_SLOP_PX.touch;
    gesture.moved = Math.hypot(event.clientX - gesture.clientX, event.clientY - gesture.clientY) > slop;
    return gesture.moved;
  }

  const BUTTONS = ["left", "middle", "right"];
  canvas.addEventListener("pointerdown", (event) => {
    if (!controlling || transition !== null || !visible()) return;
    const box = gesture ? gesture.box : imageBox();
    const started = gesture === null;
    if (started) gesture = { box: box, clientX: event.clientX, clientY: event.clientY, at: null, moved: false };
    const at = point(event, false);
    if (!at) { if (started) gesture = null; return; }
    if (started) gesture.at = at;
    event.preventDefault();
    focusKeys();
    const button = BUTTONS[event.button] || "left";
    if (heldButtons.size === 0) { try { canvas.setPointerCapture(event.pointerId); } catch (error) { /* not capturable */ } }
    heldButtons.set(`${event.pointerId}:${button}`, button);
    enqueue({ type: "pointer", phase: "down", x: at.x, y: at.y, button: button });
  });
  function pointerUp(event) {
    const button = BUTTONS[event.button] || "left";
    const id = `${event.pointerId}:${button}`;
    if (!heldButtons.has(id)) return;
    heldButtons.delete(id);
    let at = point(event, true);
    if (gesture && !beyondSlop(event)) at = gesture.at;   // a tap: up where it went down
    if (heldButtons.size === 0) gesture = null;
    event.preventDefault();
    enqueue({ type: "pointer", phase: "up", x: at.x, y: at.y, button: button });
  }
  canvas.addEventListener("pointerup", pointerUp);
  canvas.addEventListener("pointercancel", pointerUp);
  canvas.addEventListener("pointermove", (event) => {
    if (!controlling || transition !== null) return;
    if (gesture && !beyondSlop(event)) return;   // still a tap: the finger's jitter is not a drag
    const at = point(event, heldButtons.size > 0);
    if (at) enqueue({ type: "pointer", phase: "move", x: at.x, y: at.y });
  });
  canvas.addEventListener("contextmenu", (event) => { if (controlling) event.preventDefault(); });
  canvas.addEventListener("wheel", (event) => {
    if (!controlling) return;
    event.preventDefault();
    const clamp = (v) => Math.max(-2000, Math.min(2000, Math.round(v)));
    enqueue({ type: "wheel", delta_x: clamp(event.deltaX), delta_y: clamp(event.deltaY) });
  }, { passive: false });

  // --- keyboard and text ------------------------------------------------------------

  function focusKeys() {
    if (document.activeElement !== keys) keys.focus({ preventScroll: true });
  }
  function hideKeyboard() {
    keys.classList.remove("shown");
    keysLabel.classList.remove("shown");
    if (document.activeElement === keys) keys.blur();
  }
  function isPrintable(key) {
    // One character (a code point, so an emoji counts), not a named key such as "Dead" or "Process".
    return typeof key === "string" && key.length > 0 && Array.from(key).length === 1 && !NAMED_KEYS.has(key);
  }

  keys.addEventListener("keydown", (event) => {
    if (!controlling) return;
    if (event.isComposing || event.keyCode === 229) return;        // an IME is composing: its text comes at the end
    if (event.ctrlKey && event.altKey && event.shiftKey && (event.key === "Control" || event.key === "Alt" || event.key === "Shift")) {
      // The escape chord: the keyboard comes back to this page, at Release.
      event.preventDefault();
      releaseEverything();
      pump();
      releaseButton.focus();
      return;
    }
    const shortcut = event.ctrlKey || event.metaKey;
    if (shortcut && !event.altKey && (event.key === "v" || event.key === "V")) return;  // paste: the clipboard event sends it
    if (NAMED_KEYS.has(event.key)) {
      event.preventDefault();
      heldKeys.set(event.code || event.key, event.key);
      enqueue({ type: "key", phase: "down", key: event.key });
      return;
    }
    if (!isPrintable(event.key)) return;
    event.preventDefault();
    if (shortcut && !event.getModifierState("AltGraph") && event.key.length === 1) {
      heldKeys.set(event.code || event.key, event.key);            // Ctrl+A, Ctrl+C… as keys
      enqueue({ type: "key", phase: "down", key: event.key });
    } else {
      enqueueText(event.key);                                       // printable: as text, in bursts
    }
  });
  keys.addEventListener("keyup", (event) => {
    const id = event.code || event.key;
    const key = heldKeys.get(id);
    if (key === undefined) return;
    event.preventDefault();
    heldKeys.delete(id);
    enqueue({ type: "key", phase: "up", key: key });
  });
  keys.addEventListener("compositionend", (event) => {
    if (controlling && event.data) enqueueText(event.data);
    keys.value = "";
  });
  keys.addEventListener("input", (event) => {
    if (event.isComposing || event.inputType === "insertCompositionText") return;
    if (!controlling) { keys.value = ""; return; }
    if (event.inputType && event.inputType.startsWith("delete")) {
      const key = event.inputType === "deleteContentForward" ? "Delete" : "Backspace";
      enqueue({ type: "key", phase: "down", key: key });
      enqueue({ type: "key", phase: "up", key: key });
    } else if (keys.value) {
      enqueueText(keys.value);    // a phone's keyboard, autofill or dictation
    }
    keys.value = "";
  });
  keys.addEventListener("paste", (event) => {
    event.preventDefault();       // the person's clipboard, not the computer's
    if (!controlling) return;
    const text = event.clipboardData ? event.clipboardData.getData("text/plain") : "";
    enqueueText(text);
  });
  keys.addEventListener("blur", () => {
    // Keys held while the focus leaves would never see their key-up here: release them now.
    if (heldKeys.size) { for (const [, key] of Array.from(heldKeys).reverse()) enqueue({ type: "key", phase: "up", key: key }); heldKeys.clear(); }
  });

  // --- buttons ------------------------------------------------------------------------

  takeButton.addEventListener("click", () => { takeControl(); });
  releaseButton.addEventListener("click", () => { release(); });
  reconnectButton.addEventListener("click", () => { connect(); });
  startButton.addEventListener("click", () => { startComputer(); });
  keyboardButton.addEventListener("click", () => {
    keys.classList.add("shown");
    keysLabel.classList.add("shown");
    keys.focus();
  });
  function setZoom(step) {
    zoom = Math.max(0, Math.min(ZOOMS.length - 1, step));
    const factor = ZOOMS[zoom];
    canvas.style.width = `${factor * 100}%`;
    stage.classList.toggle("zoomed", factor > 1);
    zoomLevel.textContent = `${Math.round(factor * 100)}%`;
    zoomOut.disabled = zoom === 0;
    zoomIn.disabled = zoom === ZOOMS.length - 1;
  }
  zoomIn.addEventListener("click", () => setZoom(zoom + 1));
  zoomOut.addEventListener("click", () => setZoom(zoom - 1));
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden" && controlling) { releaseEverything(); pump(); }
  });
  window.addEventListener("pagehide", () => {
    if (controlling) { releaseEverything(); pump(); }
    closeSocket(conn);
  });

  if (framed && "IntersectionObserver" in window && "isVisible" in IntersectionObserverEntry.prototype) {
    const watcher = new IntersectionObserver((entries) => {
      for (const entry of entries) {
        if (entry.isVisible) unseen.delete(entry.target.id); else unseen.add(entry.target.id);
      }
      render();
    }, { trackVisibility: true, delay: 100, threshold: [0, 1] });
    watcher.observe(canvas);
    watcher.observe(takeButton);
  }

  if (root.dataset.ready === "false") offerStart(); else connect();
})();
