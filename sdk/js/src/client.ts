/**
 * `RamClient`: the REST API of a RAM server with a runner (or `task_observer`) key.
 * For trusted hosts only: a browser never holds an API key (see `@ram/sdk/browser`).
 */
import { RamError, RequestFailed } from './errors.js';
import { checkedOrigin } from './origin.js';
import { checkIntervention, UUID } from './descriptor.js';
import { apiKey, errorFrom } from './http.js';
import { finiteMs, type StreamHandlers, type VisualStream } from './screen.js';
import { connectVisualSession, createVisualSession } from './node-screen.js';
import type {
  ActionStep, Artifact, Computer, ComputerBrowser, ComputerCreate, ComputerList, ContinueResult, Credential, EventList, InterventionDescriptor,
  LegacyIntervention, Observation, RecordingTimeline, Run, RunCreate, RunList, RunStatus, StepList, Viewer, VisualMode, VisualSession,
} from './types.js';

const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{8,200}$/;

export interface RamClientOptions {
  /** The server's origin: HTTPS, or plain HTTP on local loopback; no path, query, fragment or credentials. */
  baseUrl: string | URL;
  /** Returns the API key when a request is made; the client never stores it. */
  credential: Credential;
  /** This client's finite deadline for each request, in milliseconds (default 30,000). */
  timeoutMs?: number;
}

/** Statuses a run never leaves; `continued`: a harness continued the paused run (see `continued_run_id`). */
export const TERMINAL_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled', 'continued'];

export interface RunsListFilter {
  /** queued, running, waiting_for_input, succeeded, failed, cancelled or continued. */
  status?: RunStatus;
  /** Open pause kind: takeover, credential, connection, continue or credits. */
  kind?: 'takeover' | 'credential' | 'connection' | 'continue' | 'credits';
  computer_id?: string;
  /** 1 to 100 (default 20). */
  limit?: number;
  offset?: number;
}

export interface Page {
  /** Only what comes after this cursor: a step's `index`, an event's `id` (the last one already read). */
  after?: number;
  limit?: number;
}

export interface ActOptions {
  /** A tool of the registry (the tool table of docs/agents.md lists them). */
  tool: string;
  arguments?: Record<string, unknown>;
  /** 8–200 of `A-Za-z0-9._:-`, one per action: after a lost answer, retry with the *same* key (never a second effect). */
  idempotencyKey: string;
}

/** `RunHandle.act`: one tool call; the key is optional there (a fresh one per call unless you pass yours). */
export interface RunActOptions {
  arguments?: Record<string, unknown>;
  /** Pass your own to retry after a lost answer with the *same* key (never a second effect). */
  idempotencyKey?: string;
  /** How long `act` reads a running step before answering it still `started` (default 180,000 ms). */
  settleMs?: number;
}

/** The long-poll's wait per request (the server waits at most 25 s). */
const POLL_SECONDS = 20;

/**
 * One run as a harness drives it (`ram.run(runId)`): `act` sends one tool call and answers its
 * *settled* step — after a `202` (a long action such as `browser_login`) it reads the step with
 * the bounded long-poll, never sending the action again — and `observe` reads the page.
 */
export class RunHandle {
  readonly id: string;
  readonly #client: RamClient;

  constructor(client: RamClient, runId: string) {
    runPath(runId);
    this.#client = client;
    this.id = runId.toLowerCase();
  }

  /** The run now (status, `required_action` while paused, `queue_position` while queued). */
  get(): Promise<Run> {
    return this.#client.runs.get(this.id);
  }

  /** What the page shows now: `url` (without its query), `title`, bounded `text`, `control`, tabs, dialogs, the latest screenshot's id. */
  observe(): Promise<Observation> {
    return this.#client.runs.observe(this.id);
  }

  /** One tool call; answers its step once settled (succeeded, failed or uncertain), or still `started` after `settleMs`. */
  async act(tool: string, { arguments: args = {}, idempotencyKey, settleMs = 180_000 }: RunActOptions = {}): Promise<ActionStep> {
    const key = idempotencyKey ?? `${String(tool).slice(0, 40)}-${crypto.randomUUID()}`;
    const deadline = Date.now() + finiteMs(settleMs, 'settleMs');
    let step = await this.#client.runs.act(this.id, { tool, arguments: args, idempotencyKey: key });
    while (step.state === 'started' && Date.now() < deadline) {
      const wait = Math.max(1, Math.min(POLL_SECONDS, Math.ceil((deadline - Date.now()) / 1000)));
      step = await this.#client.runs.action(this.id, step.step_id, { wait });
    }
    return step;
  }

  toString(): string {
    return `RunHandle(${this.id})`;
  }
}

function checkedKey(idempotencyKey: unknown): string {
  if (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey)) {
    throw new TypeError('idempotencyKey is required: 8 to 200 of A-Z a-z 0-9 . _ : -');
  }
  return idempotencyKey;
}

function pageQuery({ after, limit }: Page): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries({ after, limit })) {
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`${name} is a non-negative integer.`);
    query.set(name, String(value));
  }
  return query.size ? `?${query}` : '';
}

function runPath(runId: string, suffix = ''): string {
  if (typeof runId !== 'string' || !UUID.test(runId)) throw new TypeError('runId is a UUID.');
  return `/api/runs/${runId.toLowerCase()}${suffix}`;
}

export class RamClient {
  readonly origin: string;
  readonly timeoutMs: number;
  readonly #credential: Credential;

  /** Runs: list, read, create, continue (idempotency key required), cancel. */
  readonly runs = {
    /** A page `{runs, count, next_offset}` of the account's runs, newest first. */
    list: async (filter: RunsListFilter = {}): Promise<RunList> => {
      const query = new URLSearchParams();
      for (const [name, value] of Object.entries(filter)) if (value !== undefined) query.set(name, String(value));
      const search = query.size ? `?${query}` : '';
      return this.#request('GET', `/api/runs${search}`);
    },
    /** A run, with `required_action` while its pause has not been continued. */
    get: async (runId: string): Promise<Run> => this.#request('GET', runPath(runId)),
    /** `POST /api/runs`: a run on one of the account's computers (201, `running`, or `queued` with `queue_position` while its computer is busy). */
    create: async (body: RunCreate): Promise<Run> => this.#request('POST', '/api/runs', body),
    /**
     * Continue a paused run exactly once. `idempotencyKey` (8–200 of `A-Za-z0-9._:-`) is
     * required: keep it with the decision, and after a lost answer retry with the *same* key.
     */
    continue: async (runId: string, { idempotencyKey }: { idempotencyKey: string }): Promise<ContinueResult> =>
      this.#request('POST', runPath(runId, '/continue'), { idempotency_key: checkedKey(idempotencyKey) }),
    /** Cancel a run that has not finished; its intervention link becomes unavailable. */
    cancel: async (runId: string): Promise<Run> => this.#request('POST', runPath(runId, '/cancel'), {}),
    /**
     * A page `{steps, next_after}` of the run's steps in order: `tool`, secret-free `arguments` (typed
     * text only as its length), `state` (started, succeeded, failed, uncertain), `result`, times, `artifact_ids`.
     */
    steps: async (runId: string, page: Page = {}): Promise<StepList> =>
      this.#request('GET', runPath(runId, `/steps${pageQuery(page)}`)),
    /** A page `{events, next_after}` of the run's secret-free events, oldest first; `after` the last `id` read. */
    events: async (runId: string, page: Page = {}): Promise<EventList> =>
      this.#request('GET', runPath(runId, `/events${pageQuery(page)}`)),
    /**
     * Bring your own agent (a run created with `agent: {type: 'external'}`, runner key): one tool call,
     * run with the loop's guarantees, once per `idempotencyKey`. `state: 'started'` means it still runs:
     * read it with `action(runId, step_id, {wait})`. A `request_*` tool pauses the run (`required_action`).
     */
    act: async (runId: string, { tool, arguments: args = {}, idempotencyKey }: ActOptions): Promise<ActionStep> =>
      this.#request('POST', runPath(runId, '/actions'), { tool, arguments: args, idempotency_key: checkedKey(idempotencyKey) }),
    /** An action's step, waiting up to `wait` seconds (0–25) while it still runs; never runs anything. */
    action: async (runId: string, stepId: number, { wait = 20 }: { wait?: number } = {}): Promise<ActionStep> => {
      if (!Number.isSafeInteger(stepId) || stepId < 1) throw new TypeError('stepId is the positive integer an action answered.');
      if (!Number.isSafeInteger(wait) || wait < 0 || wait > 25) throw new TypeError('wait is 0 to 25 seconds.');
      return this.#request('GET', runPath(runId, `/actions/${stepId}?wait=${wait}`));
    },
    /**
     * One segment of the run's recording (runner key): a complete WebM/VP9 file, masked at the source.
     * `recordingTimeline` lists the segments (`offset_ms`, `duration_ms`).
     */
    recording: async (runId: string, { segment = 0 }: { segment?: number } = {}): Promise<Uint8Array> => {
      if (!Number.isSafeInteger(segment) || segment < 0) throw new TypeError('segment is a segment index (0 or more).');
      const response = await this.#fetch('GET', runPath(runId, `/recording?segment=${segment}`), undefined, 'video/webm');
      return new Uint8Array(await response.arrayBuffer());
    },
    /**
     * `{recording, entries}`: the recording's segments and its timeline — steps, pauses, continuations and
     * a person's control periods (who, how many inputs) at `offset_ms` into the video (404 while none).
     */
    recordingTimeline: async (runId: string): Promise<RecordingTimeline> =>
      this.#request('GET', runPath(runId, '/recording/timeline')),
    /** What the run's page shows now (url, title, bounded text, the latest masked screenshot's id); takes no screenshot. */
    observe: async (runId: string): Promise<Observation> => this.#request('GET', runPath(runId, '/observation')),
  };

  /** Stored files of the account: masked screenshots, downloads, uploads (runner key only). */
  readonly artifacts = {
    /**
     * The bytes of a stored artifact: a masked screenshot (PNG; password fields and typed-into fields
     * blurred), a file the computer downloaded (a step's `result.downloads`) or an upload.
     */
    get: async (artifactId: string): Promise<Uint8Array> => {
      if (typeof artifactId !== 'string' || !UUID.test(artifactId)) throw new TypeError('artifactId is a UUID.');
      const response = await this.#fetch('GET', `/api/artifacts/${artifactId.toLowerCase()}`, undefined, '*/*');
      return new Uint8Array(await response.arrayBuffer());
    },
    /**
     * Upload a file for the `upload` tool: `{id, kind, filename, content_type, size, sha256, created_at}`;
     * pass `id` as the tool's `artifact_id`. At most `RAM_UPLOAD_MAX_BYTES` of one of
     * `RAM_UPLOAD_CONTENT_TYPES` (else a `RamError` with status 413 or 415).
     */
    upload: async (data: Uint8Array, { filename, contentType }: { filename: string; contentType: string }): Promise<Artifact> => {
      if (!(data instanceof Uint8Array) || data.length === 0) throw new TypeError('data is the file\'s bytes (not empty).');
      if (typeof filename !== 'string' || !filename || /[\\/]/.test(filename)) throw new TypeError('filename is a plain file name, without a path.');
      if (typeof contentType !== 'string' || !/^[\w.+-]+\/[\w.+-]+$/.test(contentType)) throw new TypeError('contentType is a media type such as application/pdf.');
      const path = `/api/artifacts?filename=${encodeURIComponent(filename)}`;
      // A copy in a plain ArrayBuffer (the one fetch sends as a body).
      const response = await this.#fetch('POST', path, new Uint8Array(data), 'application/json', contentType);
      return (await response.json()) as Artifact;
    },
  };

  /** The account's computers. */
  readonly computers = {
    /** `{computers: [{id, name, available, status, state, state_reason, browser, settings}]}`. */
    list: (): Promise<ComputerList> => this.#request('GET', '/api/computers'),
    /** One computer: `available` (a visual session can be created now) and `state` (`stopped`, `ready`, `busy`, `failed` with `state_reason`). */
    get: (computerId: string): Promise<Computer> => {
      if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(computerId)) throw new TypeError('computerId is 1-128 of A-Z a-z 0-9 _ -');
      return this.#request('GET', `/api/computers/${computerId}`);
    },
    /**
     * Choose a computer's browser backend (`local`, `cdp`, `steel`, `browserbase`). A change ends
     * the computer's generation: a running executor serves from the new backend within its
     * heartbeat, signed out everywhere. `secret` (a vendor API key) is stored in Vault only.
     */
    setBrowser: (computerId: string, body: ComputerBrowser): Promise<Computer> => {
      if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(computerId)) throw new TypeError('computerId is 1-128 of A-Z a-z 0-9 _ -');
      return this.#request('PUT', `/api/computers/${computerId}/browser`, body);
    },
    /**
     * `POST /api/computers`: a computer named `id` in the account (ids are per account, an id once
     * used is never given again there; 409 for one the account has or had, 429 above its cap).
     */
    create: (body: ComputerCreate): Promise<Computer> => {
      if (typeof body?.id !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(body.id)) throw new TypeError('id is 1-128 of A-Z a-z 0-9 _ -');
      return this.#request('POST', '/api/computers', body);
    },
    /**
     * `POST /api/computers/{id}/start` (202, the computer `starting`): its executor starts on a free
     * computer slot and it reads `ready` once it can be used. A run on a stopped computer starts it
     * too; an idle one stops by itself, its profile kept.
     */
    start: (computerId: string): Promise<Computer> => {
      if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(computerId)) throw new TypeError('computerId is 1-128 of A-Z a-z 0-9 _ -');
      return this.#request('POST', `/api/computers/${computerId}/start`, {});
    },
    /** `DELETE /api/computers/{id}` (204): its open runs are cancelled, its generation ends, its profile is wiped; its id then answers 404. */
    delete: async (computerId: string): Promise<void> => {
      if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(computerId)) throw new TypeError('computerId is 1-128 of A-Z a-z 0-9 _ -');
      await this.#fetch('DELETE', `/api/computers/${computerId}`, undefined, 'application/json');
    },
  };

  /** Visual sessions of `jpeg-websocket-v1` (runner key). */
  readonly visualSessions = {
    /**
     * `POST /api/visual/sessions`. The answer holds a single-use ticket: hand it to the one
     * client that connects (e.g. a browser through `@ram/sdk/browser`), never to a log or a model.
     */
    create: ({ computerId, mode }: { computerId: string; mode: VisualMode }): Promise<VisualSession> =>
      createVisualSession({ baseUrl: this.origin, computerId, credential: this.#credential, mode, timeoutMs: this.timeoutMs }),
    /** Create a session and open its socket (Node). Nothing reconnects by itself. */
    open: async ({ computerId, mode = 'observe', ...handlers }: { computerId: string; mode?: VisualMode } & StreamHandlers): Promise<VisualStream> => {
      const session = await this.visualSessions.create({ computerId, mode });
      return connectVisualSession(this.origin, session, handlers, this.timeoutMs);
    },
  };

  constructor({ baseUrl, credential, timeoutMs = 30_000 }: RamClientOptions) {
    if (typeof credential !== 'function') throw new TypeError('credential is a function that returns the API key.');
    this.origin = checkedOrigin(baseUrl);
    this.timeoutMs = finiteMs(timeoutMs, 'timeoutMs');
    this.#credential = credential;
  }

  /**
   * The checked intervention descriptor of a paused run (runner key): present
   * `progress`, `user_action`, `next_step` and `human_action.url` to the person.
   * Throws `RamError` when no intervention is available, `InvalidDescriptor` when
   * the answer fails the contract or the binding checks.
   */
  async interventionDescriptor(runId: string): Promise<InterventionDescriptor> {
    const path = runPath(runId, '/intervention-descriptor');
    return checkIntervention(await this.#request('GET', path), { runId: runId.toLowerCase(), origin: this.origin });
  }

  /**
   * @deprecated Legacy `GET /api/runs/{id}/intervention`, kept for existing trusted interfaces.
   * Its answer may hold a Vault invite: never pass it to a model, a transcript or a log.
   * Harnesses use `interventionDescriptor(runId)`.
   */
  async intervention(runId: string): Promise<LegacyIntervention> {
    return this.#request('GET', runPath(runId, '/intervention'));
  }

  /** The authenticated clean-screen link of the run's computer: show its `url` only when the person wants to watch. */
  async viewer(runId: string): Promise<Viewer> {
    return this.#request('GET', runPath(runId, '/viewer'));
  }

  /** A handle on one run: `await run.act(tool, {arguments})` (its settled step) and `await run.observe()`. */
  run(runId: string): RunHandle {
    return new RunHandle(this, runId);
  }

  /** Observe `computerId` (the spec's `observeComputer` with this client's origin, key and deadline). */
  observeComputer({ computerId, ...handlers }: { computerId: string } & StreamHandlers): Promise<VisualStream> {
    return this.visualSessions.open({ computerId, mode: 'observe', ...handlers });
  }

  toString(): string {
    return `RamClient(${this.origin})`;
  }

  async #request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await this.#fetch(method, path, body, 'application/json');
    try {
      return (await response.json()) as T;
    } catch {
      throw new RamError(response.status, "The server's answer is not JSON.");
    }
  }

  async #fetch(method: string, path: string, body: unknown, accept: string, fileType?: string): Promise<Response> {
    const key = await apiKey(this.#credential);
    const headers: Record<string, string> = { Authorization: `Bearer ${key}`, Accept: accept };
    // A file's bytes go as they are, with their own type; anything else as JSON.
    if (body !== undefined) headers['Content-Type'] = fileType ?? 'application/json';
    let response: Response;
    try {
      response = await fetch(new URL(path, this.origin), {
        method,
        headers,
        body: body === undefined ? undefined : fileType !== undefined ? (body as Uint8Array<ArrayBuffer>) : JSON.stringify(body),
        redirect: 'manual',
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      // No answer: the request may still have had its effect. Retry only what is idempotent, with the same key.
      throw new RequestFailed(`No answer from the server: ${(error as Error).name}.`);
    }
    if (!response.ok) throw await errorFrom(response);
    return response;
  }
}
