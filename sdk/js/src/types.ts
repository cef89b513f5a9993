/**
 * Names for the generated types: `generated/api.ts` comes from the server's
 * `/api/openapi.json`, `generated/visual.ts` from the pydantic JSON Schemas of the
 * `jpeg-websocket-v1` messages (`make sdk-types` regenerates both).
 */
import type { components as Api, operations } from './generated/api.js';
import type { components as Visual } from './generated/visual.js';

type S = Api['schemas'];
type V = Visual['schemas'];

export type { operations };
export type Run = S['RunOut'];
export type RunList = S['RunList'];
export type RunCreate = S['RunCreateIn'];
export type RunStatus = Run['status'];
export type RequiredAction = NonNullable<Run['required_action']>;
export type ContinueResult = S['ContinueOut'];
export type InterventionDescriptor = S['InterventionDescriptor'];
export type LegacyIntervention = S['LegacyInterventionOut'];
export type ComputerList = S['ComputerList'];
export type Computer = S['ComputerOut'];
export type ComputerBrowser = S['ComputerBrowserIn'];
export type ComputerCreate = S['ComputerCreateIn'];
export type Viewer = S['ViewerOut'];
export type VisualSession = S['VisualSessionOut'];
export type VisualMode = S['VisualSessionIn']['mode'];
export type Step = S['StepOut'];
export type StepList = S['StepList'];
export type StepState = Step['state'];
export type RunEvent = S['EventOut'];
export type EventList = S['EventList'];
export type Action = S['ActionIn'];
export type ActionStep = S['ActionOut'];
export type ToolResult = S['ToolResult'];
export type Download = S['DownloadOut'];
export type Artifact = S['ArtifactOut'];
export type Observation = S['ObservationOut'];
export type RecordingTimeline = S['RecordingTimeline'];
export type Recording = S['RecordingOut'];
export type TimelineEntry = S['TimelineEntry'];

export type Hello = V['Hello'];
export type FrameMessage = V['FrameMessage'];
export type StateMessage = V['StateTransition'] | V['StateHuman'] | V['StateReleased'] | V['StateUnavailable'];
export type AckMessage = V['Ack'];
export type ErrorMessage = V['ErrorMessage'];
export type ServerMessage = V['ServerMessage'];
export type ClientMessage = V['ClientMessage'];
export type InputEnvelope = V['InputMessage'];
export type HumanInput = InputEnvelope['input'];

/** Returns the API key when a request is made; the SDK never stores, logs or repeats it in an error. */
export type Credential = () => string | Promise<string>;
