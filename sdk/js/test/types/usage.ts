// Compiled (never run) by `npm run typecheck`: the declarations a TypeScript project sees.
// Each @ts-expect-error line must be a type error, or the check fails.
import { bindHumanGestures, RamClient, RamError, TERMINAL_STATUSES, type InterventionDescriptor, type Run } from '@ram/sdk';
import { openScreen } from '@ram/sdk/browser';

declare const ram: RamClient;

export async function usage(): Promise<void> {
  const run: Run = await ram.runs.create({ task: { goal: 'Read the page' }, computer_id: 'pc-1' });
  const status: 'queued' | 'running' | 'waiting_for_input' | 'succeeded' | 'failed' | 'cancelled' | 'continued' =
    run.status;
  const over: boolean = TERMINAL_STATUSES.includes(status);
  void over;
  await ram.runs.list({ status: 'continued' });
  // @ts-expect-error: not a run status
  await ram.runs.list({ status: 'paused' });
  if (run.required_action?.kind === 'credits') {
    const missing: string = run.required_action.credits.missing_microcredits;
    void missing;
  }
  const intervention: InterventionDescriptor = await ram.interventionDescriptor(run.id);
  const kind: 'human_control' | 'credential' | 'google_connection' = intervention.kind;
  const requiresLogin: true = intervention.human_action.requires_login;
  await ram.runs.continue(run.id, { idempotencyKey: `continue-${run.id}` });
  // @ts-expect-error: the idempotency key is required
  await ram.runs.continue(run.id);
  // @ts-expect-error: the task's goal is required
  await ram.runs.create({ task: {}, computer_id: 'pc-1' });
  // @ts-expect-error: the mode is observe or control
  await ram.visualSessions.create({ computerId: 'pc-1', mode: 'watch' });
  const stream = await ram.visualSessions.open({ computerId: 'pc-1', mode: 'control', renderJpeg: (jpeg, frame) => void frame.generation });
  const gestures = bindHumanGestures(stream, () => {}, 10_000);
  await gestures.input({ type: 'pointer', phase: 'down', x: 1, y: 2 });
  // @ts-expect-error: there is no click input
  await gestures.input({ type: 'click', x: 1, y: 2 });
  // @ts-expect-error: a browser takes a session, never an API key
  await openScreen({ origin: 'https://ram.example', apiKey: 'x', renderJpeg: () => {} });
  const steps = await ram.runs.steps(run.id, { after: 0, limit: 10 });
  const state: 'started' | 'succeeded' | 'failed' | 'uncertain' = steps.steps[0].state;
  const artifactIds: string[] = steps.steps[0].artifact_ids;
  const events = await ram.runs.events(run.id, { after: steps.next_after ?? undefined });
  const eventKind: string = events.events[0].kind;
  const acted = await ram.runs.act(run.id, { tool: 'screenshot', idempotencyKey: 'shot-0001' });
  const shotId: string | null | undefined = acted.result?.artifact_id;
  // @ts-expect-error: an action needs its idempotency key
  await ram.runs.act(run.id, { tool: 'screenshot' });
  const png: Uint8Array = await ram.artifacts.get(shotId ?? '');
  const seen = await ram.runs.observe(run.id);
  const handle = ram.run(run.id);
  const settled = await handle.act('screenshot', { arguments: {}, settleMs: 60_000 });
  const settledStep: number = settled.step_id;
  const observedUrl: string = (await handle.observe()).url;
  void [settledStep, observedUrl];
  // @ts-expect-error: the tool is named first, its arguments in the options
  await handle.act({ tool: 'screenshot' });
  const latest: string | null | undefined = seen.screenshot_artifact_id;
  const uploaded = await ram.artifacts.upload(png, { filename: 'shot.png', contentType: 'image/png' });
  const sha256: string = uploaded.sha256;
  const downloaded: string | null | undefined = acted.result?.downloads?.[0]?.artifact_id;
  // @ts-expect-error: an upload names its file and type
  await ram.artifacts.upload(png);
  void [sha256, downloaded];
  void [state, artifactIds, eventKind, png, latest, await ram.runs.action(run.id, acted.step_id, { wait: 5 })];
  try {
    await ram.computers.list();
  } catch (error) {
    if (error instanceof RamError) void [error.status, error.error];
  }
  void [status, kind, requiresLogin];
}
