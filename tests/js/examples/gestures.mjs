// The spec's gesture adapter (visual_stream.md), unchanged; only the export is added.
function bindHumanGestures(socket, onState, waitMs) {
  if (!Number.isInteger(waitMs) || waitMs < 1 || waitMs > 2147483647) throw new Error("Escolha waitMs entre 1 e 2147483647");
  let timer;
  const clearDeadline = () => { clearTimeout(timer); timer = undefined; };
  let observed = false, controlling = false;
  let sequence = 0, pending, transition;
  const send = value => {
    if (socket.readyState !== 1) throw new Error("Socket fechado");
    socket.send(JSON.stringify(value));
  };
  const stop = () => {
    clearDeadline(); controlling = false;
    // Se pending existe, o resultado dessa entrada é incerto.
    onState({ controlling: false, uncertain: pending !== undefined || Boolean(transition) });
  };
  const armDeadline = () => {
    clearDeadline();
    timer = setTimeout(() => { stop(); socket.close(); }, waitMs);
  };
  socket.on("message", (data, binary) => {
    if (binary) return; // JPEG tratado pelo renderizador separado.
    try {
      const event = JSON.parse(data.toString());
      if (event.type === "frame") {
        observed = true;
        if (event.controlling !== true) controlling = false;
      }
      if (event.type === "state") {
        if (event.controlling === true && event.control === "human") {
          if (transition === "takeover" && pending === undefined) {
            clearDeadline();
            sequence = 0; controlling = true; transition = undefined;
          } else if (!controlling) throw new Error("Concessão inesperada");
        } else {
          controlling = false;
          if (event.control === "released" && transition === "release") {
            clearDeadline(); transition = undefined;
          }
        }
      }
      if (event.type === "ack" && event.sequence === pending) {
        clearDeadline(); pending = undefined;
      }
      if (event.type === "error") { stop(); socket.close(); return; }
      onState({ controlling, awaitingAck: pending !== undefined });
    } catch { stop(); socket.close(); }
  });
  socket.on("error", () => { stop(); socket.close(); });
  socket.on("close", stop);
  return {
    takeover() {
      if (!observed || controlling || transition || pending !== undefined) throw new Error("Observe primeiro");
      transition = "takeover"; armDeadline();
      try { send({ type: "takeover" }); }
      catch { stop(); socket.close(); throw new Error("Takeover incerto; confira"); }
    },
    input(value) {
      if (!controlling || pending !== undefined) throw new Error("Aguarde controle e ack");
      pending = ++sequence; armDeadline(); // Sem replay após timeout.
      try { send({ type: "input", sequence, input: value }); }
      catch { stop(); socket.close(); throw new Error("Resultado incerto; confira"); }
    },
    release() {
      if (!controlling || pending !== undefined) throw new Error("Aguarde o ack");
      controlling = false; transition = "release"; armDeadline();
      try { send({ type: "release" }); }
      catch { stop(); socket.close(); throw new Error("Liberação incerta; confira"); }
      // Aguarde state released antes de trocar de cliente.
    }
  };
}

export { bindHumanGestures };
