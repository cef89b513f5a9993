// The spec's observation example (visual_stream.md), unchanged.
import { WebSocket } from 'ws';

export async function observeComputer({ baseUrl, computerId, credential, renderJpeg, onDisconnect }) {
  if (!computerId) throw new Error('Selecione um computador da sua conta');
  const origin = new URL(baseUrl);
  if (origin.username || origin.password || origin.search || origin.hash ||
      origin.pathname !== '/' || (origin.protocol !== 'https:' &&
      !(origin.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(origin.hostname)))) {
    throw new Error('Use uma origem HTTPS ou loopback local');
  }
  const response = await fetch(new URL('/api/visual/sessions', origin), {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${await credential()}`,
      'Content-Type': 'application/json',
      'X-RAM-Intent': 'visual-session',
    },
    body: JSON.stringify({ computer_id: computerId,
      mode: 'observe', transport: 'jpeg-websocket-v1' }),
  });
  if (response.status !== 201) throw new Error('Não foi possível criar a sessão');
  const session = await response.json();
  const url = new URL(session.websocket_path, origin);
  if (url.origin !== origin.origin || url.search || url.hash ||
      url.pathname !== '/api/visual/stream') throw new Error('Endpoint inválido');
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  const socket = new WebSocket(url, [
    session.subprotocol,
    session.ticket_protocol_prefix + session.ticket,
  ]);
  socket.binaryType = 'arraybuffer';
  let generation;
  let pendingFrame;
  socket.on('message', (data, binary) => {
    try {
      if (binary) {
        if (!pendingFrame) throw new Error('JPEG sem metadados');
        const jpeg = new Uint8Array(data);
        if (jpeg.byteLength > 2_000_000) throw new Error('Frame excede o limite');
        renderJpeg(jpeg, pendingFrame); // substituir a imagem anterior
        pendingFrame = undefined;
        return;
      }
      const event = JSON.parse(data.toString());
      if (event.type === 'frame') {
        if (typeof event.generation !== 'string' || event.mime_type !== 'image/jpeg' ||
            (generation && generation !== event.generation)) {
          throw new Error('Observe novamente a geração atual');
        }
        generation = event.generation;
        pendingFrame = event;
      }
      if (event.type === 'error') socket.close();
    } catch { socket.close(); }
  });
  socket.on('error', () => socket.close());
  socket.on('close', () => onDisconnect?.());
  // ws responde a Ping com Pong automaticamente; não são mensagens JSON.
  // A UI mostra close/error e oferece reconexão explícita com ticket novo.
  return { close: () => socket.close() };
}
