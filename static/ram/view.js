// The clean screen: watch the computer through jpeg-websocket-v1, take control
// only on a click, send one input at a time and wait for its ack, never replay.
(function () {
  "use strict";
  const root = document.getElementById("screen");
  if (!root) return;
  const computerId = root.dataset.computerId;
  const canvas = document.getElementById("screen-canvas");
  const context = canvas.getContext("2d");
  const stateText = document.getElementById("screen-state");
  const takeButton = document.getElementById("take-control");
  const releaseButton = document.getElementById("release");
  const reconnectButton = document.getElementById("reconnect");
  const NAMED_KEYS = new Set(["Backspace", "Tab", "Enter", "Escape", "Delete", "Home", "End", "ArrowUp",
    "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown", "Shift", "Control", "Alt", "Meta",
    "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12"]);
  const MAX_WAITING = 32;
  const WAIT_MS = 30000;

  let socket = null;
  let generation = null;
  let pendingFrame = null;
  let width = Number(root.dataset.width) || 1280;
  let height = Number(root.dataset.height) || 720;
  let controlling = false;
  let transition = null;     // "takeover" | "release" while waiting for its state
  let pending = null;        // sequence of the input awaiting its ack
  let sequence = 0;
  let waiting = [];          // gestures not yet sent (only one input is in flight)
  let uncertain = false;
  let observed = false;
  let deadline = null;
  let drawing = false;
  let nextImage = null;

  function show(text, kind) {
    stateText.textContent = text;
    stateText.dataset.state = kind;
    root.dataset.state = kind;
  }

  function render() {
    takeButton.hidden = controlling || transition === "release";
    takeButton.disabled = !socket || !observed || controlling || transition !== null;
    releaseButton.hidden = !controlling;
    releaseButton.disabled = pending !== null || waiting.length > 0 || transition !== null;
    canvas.classList.toggle("controlling", controlling);
    if (!socket) return;
    if (transition === "takeover") show("Taking control…", "transition");
    else if (transition === "release") show("Releasing control…", "transition");
    else if (controlling) show("You have control. Clicks, keys and scrolling go to the computer.", "controlling");
    else if (observed) show("Observing. Nothing you do here reaches the computer.", "observing");
  }

  function armDeadline() {
    clearTimeout(deadline);
    deadline = setTimeout(() => end("No answer in time; the result is uncertain. Check the screen after reconnecting."), WAIT_MS);
  }

  function clearDeadline() { clearTimeout(deadline); deadline = null; }

  function end(message) {
    clearDeadline();
    const wasUncertain = uncertain || pending !== null || transition !== null;
    const current = socket;
    socket = null;
    controlling = false;
    transition = null;
    pending = null;
    waiting = [];
    if (current && current.readyState <= 1) current.close();
    reconnectButton.hidden = false;
    render();
    if (wasUncertain) {
      show((message ? message + " " : "") + "Uncertain: the last action may or may not have happened. Reconnect and check before acting again.", "uncertain");
    } else {
      show((message ? message + " " : "") + "Disconnected. Reconnect to watch again.", "disconnected");
    }
  }

  function send(value) {
    if (!socket || socket.readyState !== 1) throw new Error("closed");
    socket.send(JSON.stringify(value));
  }

  function pump() {
    if (!controlling || pending !== null || waiting.length === 0) { render(); return; }
    const input = waiting.shift();
    sequence += 1;
    pending = sequence;
    armDeadline();
    try { send({ type: "input", sequence: sequence, input: input }); }
    catch (error) { uncertain = true; end("The connection closed while sending."); return; }
    render();
  }

  function enqueue(input) {
    if (!controlling || transition !== null) return;
    if (input.type === "pointer" && input.phase === "move") {
      // Moves are only hints: keep the latest one while something waits.
      const last = waiting[waiting.length - 1];
      if (last && last.type === "pointer" && last.phase === "move") { waiting[waiting.length - 1] = input; pump(); return; }
      if (pending !== null && waiting.length > 0) return;
    }
    if (waiting.length >= MAX_WAITING) return;
    waiting.push(input);
    pump();
  }

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

  function onMessage(event) {
    if (typeof event.data !== "string") {
      if (!pendingFrame) { end("The screen sent an image without its description."); return; }
      if (event.data.byteLength > 2000000) { end("A frame exceeded the limit."); return; }
      nextImage = new Blob([event.data], { type: "image/jpeg" });   // latest wins
      pendingFrame = null;
      drawLatest();
      return;
    }
    let message;
    try { message = JSON.parse(event.data); } catch (error) { end("The screen sent an unreadable message."); return; }
    if (message.type === "hello") {
      width = message.viewport.width; height = message.viewport.height;
    } else if (message.type === "frame") {
      if (typeof message.generation !== "string" || message.mime_type !== "image/jpeg" ||
          (generation && generation !== message.generation)) {
        end("The computer restarted."); return;
      }
      generation = message.generation;
      width = message.width; height = message.height;
      pendingFrame = message;
      if (!observed) { observed = true; render(); }
      if (message.controlling !== true && controlling) { controlling = false; render(); }
    } else if (message.type === "state") {
      if (message.control === "human" && message.controlling === true) {
        if (transition !== "takeover") { end("Unexpected grant."); return; }
        clearDeadline();
        transition = null; controlling = true; sequence = 0; uncertain = false;
        canvas.focus();
      } else if (message.control === "released") {
        clearDeadline();
        controlling = false; transition = null; waiting = [];
      } else if (message.control === "unavailable") {
        controlling = false;
        show("The computer's screen is unavailable.", "disconnected");
      }
      render();
    } else if (message.type === "ack") {
      if (message.sequence === pending) { clearDeadline(); pending = null; pump(); }
    } else if (message.type === "error") {
      end(String(message.message || "The session ended."));
    }
  }

  async function connect() {
    reconnectButton.hidden = true;
    observed = false; generation = null; pendingFrame = null; uncertain = false;
    show("Connecting…", "connecting");
    let session;
    try {
      const response = await fetch("/api/visual/sessions", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-RAM-Intent": "visual-session" },
        body: JSON.stringify({ computer_id: computerId, mode: "control", transport: "jpeg-websocket-v1" }),
      });
      const data = await response.json().catch(() => ({}));
      if (response.status !== 201) {
        show(data.error || "Could not open the screen.", "disconnected");
        reconnectButton.hidden = false;
        return;
      }
      session = data;
    } catch (error) {
      show("Could not reach the server.", "disconnected");
      reconnectButton.hidden = false;
      return;
    }
    const url = new URL(session.websocket_path, window.location.origin);
    if (url.origin !== window.location.origin || url.pathname !== "/api/visual/stream") { show("Invalid endpoint.", "disconnected"); return; }
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(url, [session.subprotocol, session.ticket_protocol_prefix + session.ticket]);
    session = null;  // the ticket is used once and not kept
    ws.binaryType = "arraybuffer";
    socket = ws;
    ws.addEventListener("message", (event) => { if (socket === ws) onMessage(event); });
    ws.addEventListener("close", () => { if (socket === ws) end(""); });
    ws.addEventListener("error", () => { if (socket === ws) end(""); });
    render();
  }

  function point(event) {
    // The image is fitted inside the canvas box (object-fit: contain):
    // x = (position − left margin) × width / displayed width; y likewise. Outside the image: ignored.
    const rect = canvas.getBoundingClientRect();
    const scale = Math.min(rect.width / width, rect.height / height);
    const shownWidth = width * scale, shownHeight = height * scale;
    const left = rect.left + (rect.width - shownWidth) / 2;
    const top = rect.top + (rect.height - shownHeight) / 2;
    const x = (event.clientX - left) * width / shownWidth;
    const y = (event.clientY - top) * height / shownHeight;
    if (!(x >= 0 && y >= 0 && x <= width - 1 && y <= height - 1)) return null;
    return { x: Math.round(x * 100) / 100, y: Math.round(y * 100) / 100 };
  }

  const BUTTONS = ["left", "middle", "right"];
  canvas.addEventListener("pointerdown", (event) => {
    if (!controlling) return;
    const at = point(event);
    if (!at) return;
    event.preventDefault();
    canvas.focus();
    enqueue({ type: "pointer", phase: "down", x: at.x, y: at.y, button: BUTTONS[event.button] || "left" });
  });
  canvas.addEventListener("pointerup", (event) => {
    if (!controlling) return;
    const at = point(event);
    if (!at) return;
    event.preventDefault();
    enqueue({ type: "pointer", phase: "up", x: at.x, y: at.y, button: BUTTONS[event.button] || "left" });
  });
  canvas.addEventListener("pointermove", (event) => {
    if (!controlling) return;
    const at = point(event);
    if (at) enqueue({ type: "pointer", phase: "move", x: at.x, y: at.y });
  });
  canvas.addEventListener("contextmenu", (event) => { if (controlling) event.preventDefault(); });
  canvas.addEventListener("wheel", (event) => {
    if (!controlling) return;
    event.preventDefault();
    const clamp = (v) => Math.max(-2000, Math.min(2000, Math.round(v)));
    enqueue({ type: "wheel", delta_x: clamp(event.deltaX), delta_y: clamp(event.deltaY) });
  }, { passive: false });

  function keyOf(event) {
    if (NAMED_KEYS.has(event.key)) return event.key;
    if (event.key.length === 1) return event.key;
    return null;
  }
  canvas.addEventListener("keydown", (event) => {
    if (!controlling || event.isComposing) return;
    const key = keyOf(event);
    if (!key) return;
    event.preventDefault();
    enqueue({ type: "key", phase: "down", key: key });
  });
  canvas.addEventListener("keyup", (event) => {
    if (!controlling || event.isComposing) return;
    const key = keyOf(event);
    if (!key) return;
    event.preventDefault();
    enqueue({ type: "key", phase: "up", key: key });
  });

  takeButton.addEventListener("click", () => {
    if (!socket || !observed || controlling || transition || pending !== null) return;
    transition = "takeover";
    armDeadline();
    try { send({ type: "takeover" }); } catch (error) { end("Taking control is uncertain."); return; }
    render();
  });
  releaseButton.addEventListener("click", () => {
    if (!controlling || pending !== null || waiting.length) return;
    controlling = false;
    transition = "release";
    armDeadline();
    try { send({ type: "release" }); } catch (error) { end("Releasing is uncertain."); return; }
    render();
  });
  reconnectButton.addEventListener("click", () => { connect(); });
  window.addEventListener("pagehide", () => { if (socket) socket.close(); });

  connect();
})();
