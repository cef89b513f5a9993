"""Wire shapes the executor accepts: the human inputs of ``jpeg-websocket-v1``
(every bound of the spec) and the arguments of the agent's actions.

The gateway validates a client's input with these models before it forwards
it, and the executor validates again on arrival: one definition, two checks.
The argument model of each agent action is also the argument model of its
agent tool (``runs/tools.py`` refers to it): a run is validated at creation
with exactly the rules the executor applies when the step runs.
"""

from __future__ import annotations

import functools
import uuid
import zoneinfo
from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, ConfigDict, Field, PrivateAttr, StringConstraints, TypeAdapter, model_validator

from core.clock import SYSTEM_CLOCK
from core.contracts import Closed as Closed
from core.contracts import CredentialId, json_integer, utf16_length
from core.contracts import strict_number as _num

VIEWPORT_WIDTH = 1280
VIEWPORT_HEIGHT = 720
MAX_TEXT_UTF16_UNITS = 4000
MAX_URL_LENGTH = 4096
NAMED_KEYS = frozenset(
    [
        "Backspace", "Tab", "Enter", "Escape", "Delete", "Home", "End",
        "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown",
        "Shift", "Control", "Alt", "Meta",
        *(f"F{n}" for n in range(1, 13)),
    ]
)  # fmt: skip


def _text_bound(text: str) -> str:
    if utf16_length(text) > MAX_TEXT_UTF16_UNITS:
        raise ValueError(f"must be at most {MAX_TEXT_UTF16_UNITS} UTF-16 units")
    return text


def _key_name(key: str) -> str:
    if utf16_length(key) != 1 and key not in NAMED_KEYS:
        raise ValueError("must be one UTF-16 unit or a named key such as Enter, ArrowUp or F1")
    return key


def _http_url(url: str) -> str:
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"must be at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a malformed port
    except ValueError:
        raise ValueError("must be an absolute http or https URL") from None
    del port
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http or https URL")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError("must not embed a username or password")
    if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise ValueError("must not contain spaces or control characters")
    return url


# What the validator accepts, as a JSON Schema can say it (a client or a fuzzer reads the schema).
HTTP_URL_PATTERN = r"^https?://[^\s/?#@\[\]:\x00-\x1f]+(:[0-9]{1,4})?([/?#][^\s\x00-\x1f]*)?$"
HttpUrl = Annotated[
    str,
    Field(strict=True, json_schema_extra={"pattern": HTTP_URL_PATTERN, "maxLength": MAX_URL_LENGTH}),
    AfterValidator(_http_url),
]


class PointerInput(Closed):
    type: Literal["pointer"]
    phase: Literal["move", "down", "up"]
    x: Annotated[float, _num(0, VIEWPORT_WIDTH - 1)]
    y: Annotated[float, _num(0, VIEWPORT_HEIGHT - 1)]
    button: Literal["left", "middle", "right"] = "left"


class TextInput(Closed):
    type: Literal["text"]
    text: Annotated[str, Field(strict=True), AfterValidator(_text_bound)]


class KeyInput(Closed):
    type: Literal["key"]
    phase: Literal["down", "up"]
    key: Annotated[str, Field(strict=True), AfterValidator(_key_name)]


class WheelInput(Closed):
    type: Literal["wheel"]
    delta_x: Annotated[float, _num(-2000, 2000)]
    delta_y: Annotated[float, _num(-2000, 2000)]


class NavigateInput(Closed):
    type: Literal["navigate"]
    url: HttpUrl


HumanInput = Annotated[PointerInput | TextInput | KeyInput | WheelInput | NavigateInput, Field(discriminator="type")]
HUMAN_INPUT: TypeAdapter[PointerInput | TextInput | KeyInput | WheelInput | NavigateInput] = TypeAdapter(HumanInput)

# --- Tabs: a documented addition to jpeg-websocket-v1 -------------------------
# Sent only by clients that asked for tab notices (the ``ram-tabs-v1`` subprotocol);
# for every other client the input types stay exactly the spec's five.

TabId = Annotated[str, Field(strict=True), StringConstraints(pattern=r"^t[1-9][0-9]{0,8}$")]


class TabInput(Closed):
    """Show another open page (``switch``) or close one (``close``)."""

    type: Literal["tab"]
    action: Literal["switch", "close"]
    tab: TabId


# --- Dialogs: a documented addition to jpeg-websocket-v1 ----------------------
# Sent only by clients that asked for dialog notices (the ``ram-dialogs-v1`` subprotocol).

DialogId = Annotated[str, Field(strict=True), StringConstraints(pattern=r"^d[1-9][0-9]{0,8}$")]
DialogText = Annotated[str, Field(strict=True), AfterValidator(_text_bound)]


MAX_AUTH_CHARS = 1000
AuthText = Annotated[str, Field(strict=True), StringConstraints(max_length=MAX_AUTH_CHARS)]


class DialogInput(Closed):
    """Answer a page's dialog: ``accept`` (OK, Leave, Sign in) or not (Cancel, Stay); ``text`` is a
    prompt's answer; ``username`` and ``password`` (together) answer an HTTP sign-in prompt (``auth``).

    The password is the person's own secret on its way to the browser: it is left out of the
    model's ``repr`` and never logged, recorded or echoed."""

    type: Literal["dialog"]
    dialog: DialogId
    accept: Annotated[bool, Field(strict=True)]
    text: DialogText | None = None
    username: AuthText | None = Field(default=None, repr=False)
    password: AuthText | None = Field(default=None, repr=False)

    @model_validator(mode="after")
    def _one_kind_of_answer(self) -> DialogInput:
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password come together")
        if self.username is not None and (self.text is not None or not self.accept):
            raise ValueError("username and password only sign in (accept true, no text)")
        return self

    def credentials(self) -> tuple[str, str] | None:
        """The sign-in answer (username, password), if this is one."""
        if self.username is None or self.password is None:
            return None
        return self.username, self.password


PersonInput = Annotated[
    PointerInput | TextInput | KeyInput | WheelInput | NavigateInput | TabInput | DialogInput,
    Field(discriminator="type"),
]
# What the executor accepts from the gateway: the spec's inputs and the tab and dialog additions.
PERSON_INPUT: TypeAdapter[
    PointerInput | TextInput | KeyInput | WheelInput | NavigateInput | TabInput | DialogInput
] = TypeAdapter(PersonInput)


# --- The agent's actions (the run loop drives these under a lease) ------------
# Each model is the one argument model of its agent tool.

MAX_SELECTOR_LENGTH = 1000
MAX_SCROLL_DELTA = 2000
# The rule of executor/taint.py, in every selector's schema: the agent reads it where it writes one.
SELECTOR_RULE = (
    "A Playwright selector. While the page holds a secret (a password field with a value, a one-time code, "
    "or a field browser_login or a person filled), only value-blind CSS is accepted: tag, #id, .class, "
    "[attr], [attr=\"whole value\"] or [attr~=word] (never on value), combinators, :nth-child() and the "
    "structural and state pseudo-classes, :not/:is/:where/:has of the same. role=, text=, internal:*, xpath, "
    ":has-text(), [value...], ^= $= *= and :placeholder-shown, :valid, :invalid, :in-range, :out-of-range, "
    ":empty are then refused (browser.selector_value_dependent). browser_login's own selectors follow the same rule."
)
Selector = Annotated[
    str,
    Field(strict=True, description=SELECTOR_RULE),
    StringConstraints(min_length=1, max_length=MAX_SELECTOR_LENGTH),
]


class NavigateArgs(Closed):
    url: HttpUrl


class ClickArgs(Closed):
    # Either a selector or a point: the schema says what ``target`` accepts.
    model_config = ConfigDict(
        **Closed.model_config,
        json_schema_extra={
            "anyOf": [
                {"required": ["selector"], "properties": {"selector": {"type": "string"}, "x": {"type": "null"}, "y": {"type": "null"}}},
                {"required": ["x", "y"], "properties": {"selector": {"type": "null"}, "x": {"type": "number"}, "y": {"type": "number"}}},
            ]
        },
    )

    selector: Selector | None = None
    x: Annotated[float, _num(0, VIEWPORT_WIDTH - 1)] | None = None
    y: Annotated[float, _num(0, VIEWPORT_HEIGHT - 1)] | None = None

    @model_validator(mode="after")
    def _one_target(self) -> ClickArgs:
        self.target()
        return self

    def target(self) -> str | tuple[float, float]:
        if self.selector is not None and self.x is None and self.y is None:
            return self.selector
        if self.selector is None and self.x is not None and self.y is not None:
            return (self.x, self.y)
        raise ValueError("give either selector, or both x and y")


class TypeArgs(Closed):
    selector: Selector
    text: Annotated[str, Field(strict=True), AfterValidator(_text_bound)]


# One UTF-16 unit (a character of the Basic Multilingual Plane, no lone surrogate) or a named key.
KEY_SCHEMA = {"anyOf": [{"pattern": "^[\u0000-\ud7ff\ue000-\uffff]$"}, {"enum": sorted(NAMED_KEYS)}]}


class PressArgs(Closed):
    key: Annotated[str, Field(strict=True, json_schema_extra=KEY_SCHEMA), AfterValidator(_key_name)]


class WaitForArgs(Closed):
    selector: Selector
    timeout_ms: Annotated[int, *json_integer(1, 20_000)] = 10_000


class ExtractTextArgs(Closed):
    selector: Selector | None = None


class ScrollArgs(Closed):
    delta_x: Annotated[float, _num(-MAX_SCROLL_DELTA, MAX_SCROLL_DELTA)] = 0
    delta_y: Annotated[float, _num(-MAX_SCROLL_DELTA, MAX_SCROLL_DELTA)] = 0


class ScreenshotArgs(Closed):
    pass


class TabsListArgs(Closed):
    pass


class UploadArgs(Closed):
    # The file input (<input type=file>) to set.
    selector: Selector
    # A file the harness uploaded (POST /api/artifacts) to the run's account.
    artifact_id: uuid.UUID


class TabArgs(Closed):
    tab: TabId


class DialogAnswerArgs(Closed):
    """Answer the dialog a page opened: ``accept`` true (OK, Leave page) or false (Cancel, Stay);
    ``text`` answers a ``prompt``; ``dialog`` names one (default: the active tab's)."""

    accept: Annotated[bool, Field(strict=True)]
    text: DialogText | None = None
    dialog: DialogId | None = None


class AuthAnswerArgs(Closed):
    """Answer an HTTP sign-in prompt (basic auth) a site asked for: ``accept`` true signs in with a
    stored credential (``credentialId``, whose ``origins`` must include the prompt's origin exactly;
    its username and password never reach the agent), false cancels (the site's 401 page);
    ``dialog`` names the prompt (default: the active tab's)."""

    # A credential to sign in with, none to cancel: the schema says what the validator below accepts.
    model_config = ConfigDict(
        **Closed.model_config,
        json_schema_extra={
            "anyOf": [
                {"required": ["accept", "credentialId"], "properties": {"accept": {"const": True}, "credentialId": {"type": "string"}}},
                {"required": ["accept"], "properties": {"accept": {"const": False}, "credentialId": {"type": "null"}}},
            ]
        },
    )

    accept: Annotated[bool, Field(strict=True)]
    credentialId: CredentialId | None = None  # noqa: N815
    dialog: DialogId | None = None

    @model_validator(mode="after")
    def _credential_only_to_sign_in(self) -> AuthAnswerArgs:
        if self.accept and self.credentialId is None:
            raise ValueError("accept true needs credentialId (a stored credential); the password is never typed")
        if not self.accept and self.credentialId is not None:
            raise ValueError("credentialId only with accept true")
        return self


class BrowserLoginArgs(Closed):
    credentialId: CredentialId  # noqa: N815
    usernameSelector: Selector | None = None  # noqa: N815
    passwordSelector: Selector | None = None  # noqa: N815
    submitSelector: Selector | None = None  # noqa: N815


Provider = Literal["self_hosted", "steel_cloud", "browserbase"]


class BrowserSettings(Closed):
    """The run's browser provider (it must be its computer's; see ``PROVIDER_OF_BACKEND``) and
    whether browser_login waits for the managed browser's captcha solver.

    ``solveCaptcha`` is a strict boolean, or absent: with ``browserbase``, whose solver is on by
    default, absent means waiting; with ``steel_cloud`` only ``true`` waits.
    """

    provider: Provider | None = None
    solveCaptcha: Annotated[bool, Field(strict=True)] | None = None  # noqa: N815


MAX_ENDPOINT_LENGTH = 2000


def _endpoint(schemes: tuple[str, ...]) -> AfterValidator:
    """An absolute URL with one of ``schemes`` and no userinfo, query or fragment: a secret
    (a token, a key) goes to Vault, never into a computer's options."""

    def check(url: str) -> str:
        if len(url) > MAX_ENDPOINT_LENGTH:
            raise ValueError(f"must be at most {MAX_ENDPOINT_LENGTH} characters")
        try:
            parts = urlsplit(url)
            port = parts.port  # raises on a malformed port
        except ValueError:
            raise ValueError(f"must be an absolute {' or '.join(schemes)} URL") from None
        del port
        if parts.scheme not in schemes or not parts.hostname:
            raise ValueError(f"must be an absolute {' or '.join(schemes)} URL")
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise ValueError("must not embed a username or password (put secrets in Vault)")
        if parts.query or parts.fragment or "?" in url or "#" in url:
            raise ValueError("must not carry a query or fragment (put tokens in Vault)")
        if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
            raise ValueError("must not contain spaces or control characters")
        return url

    return AfterValidator(check)


ApiUrl = Annotated[str, Field(strict=True), _endpoint(("https", "http"))]
CdpEndpoint = Annotated[str, Field(strict=True), _endpoint(("ws", "wss", "http", "https"))]
StrictBool = Annotated[bool, Field(strict=True)]


class LocalOptions(Closed):
    pass


class CdpOptions(Closed):
    """A Chromium DevTools endpoint: ``ws(s)://…/devtools/browser/<id>``, or ``http(s)://host:port``
    (its ``/json/version`` names the WebSocket). A token, if the endpoint needs one (Browserless),
    is the account's ``cdp`` secret in Vault and goes on the URL as ``?token=``."""

    endpoint: CdpEndpoint


class SteelOptions(Closed):
    """Steel Cloud (``https://api.steel.dev``) or a self-hosted steel-browser API."""

    api_url: ApiUrl = "https://api.steel.dev"
    solve_captcha: StrictBool = False
    # Steel's ``timeout`` (ms) for the session; a generation renews it by creating a new session.
    session_timeout_ms: Annotated[int, Field(strict=True, ge=60_000, le=86_400_000)] = 3_600_000


class BrowserbaseOptions(Closed):
    api_url: ApiUrl = "https://api.browserbase.com"
    project_id: Annotated[str, Field(strict=True), StringConstraints(min_length=1, max_length=200)] | None = None
    # Browserbase's ``browserSettings.solveCaptchas`` (its default is on).
    solve_captchas: StrictBool = True
    # Browserbase's ``timeout`` (s, 60 to 21600).
    session_timeout_s: Annotated[int, Field(strict=True, ge=60, le=21_600)] = 3600


@dataclass(frozen=True)
class BrowserBackendKind:
    """Every fact about one browser backend, in one record: its name (a computer's ``backend``), the
    spec's provider name for it (``agent.browser.provider``), its options model, whether the
    account's secret for it (an API key, an endpoint's token) is kept in Vault under its name, and
    what the API's documents say about it. Its driver is in ``executor/backends/`` (``DRIVERS``)."""

    name: str
    provider: Provider
    options: type[Closed]
    vault_secret: bool
    description: str


BROWSER_BACKENDS: dict[str, BrowserBackendKind] = {
    kind.name: kind
    for kind in (
        BrowserBackendKind(
            "local", "self_hosted", LocalOptions, False, "a Chromium the executor launches, behind RAM's egress proxy"
        ),
        BrowserBackendKind("cdp", "self_hosted", CdpOptions, True, "any Chromium DevTools WebSocket endpoint"),
        BrowserBackendKind(
            "steel", "steel_cloud", SteelOptions, True, "a session created through Steel's REST API (Cloud or self-hosted)"
        ),
        BrowserBackendKind(
            "browserbase", "browserbase", BrowserbaseOptions, True, "a session created through Browserbase's REST API"
        ),
    )
}
BACKENDS: tuple[str, ...] = tuple(BROWSER_BACKENDS)
# The spec's provider names for each backend (``agent.browser.provider``).
PROVIDER_OF_BACKEND: dict[str, Provider] = {kind.name: kind.provider for kind in BROWSER_BACKENDS.values()}


def _known_backend(name: str) -> str:
    if name not in BROWSER_BACKENDS:
        raise ValueError(f"must be one of {', '.join(BACKENDS)}")
    return name


# A computer's backend on the wire: one of the registry's names (the schema lists them).
Backend = Annotated[str, Field(strict=True, json_schema_extra={"enum": list(BACKENDS)}), AfterValidator(_known_backend)]


def browser_options(backend: str, options: dict[str, object] | None) -> Closed:
    """The computer's options checked against its backend's model (raises ValueError/ValidationError)."""
    kind = BROWSER_BACKENDS.get(backend)
    if kind is None:
        raise ValueError(f"unknown browser backend {backend!r}")
    return kind.options.model_validate(options or {})


class CaptureContext(Closed):
    """What the worker sends with a screenshot besides the agent's (empty) arguments: the fields
    the run typed into, blurred like password fields (never from the model)."""

    mask_selectors: list[Selector] = Field(default_factory=list, max_length=60)


class UploadContext(Closed):
    """What the worker sends with ``upload`` besides the agent's arguments (never from the model):
    the run's account (the artifact is read for it only) and its binding, re-checked before."""

    account_id: str = ""
    computer_binding: str = ""


class LoginContext(Closed):
    """What the worker sends with browser_login and auth_answer besides the agent's arguments (never
    from the model): the run's browser settings, its binding (re-checked before the credential is
    read) and the read grant for the run's account."""

    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    account_id: str = ""
    computer_binding: str = ""
    # A one-use Vault token reading only the run's account's portal credentials (never logged).
    vault_grant: str = Field(default="", repr=False)
    # What is left of the login's end-to-end budget when the worker sends the call: the budget
    # started when the tool call started in the worker (its lease, the account's grant, the call).
    # The executor counts it from the request's arrival, so its wait for the browser is inside it.
    budget_seconds: float | None = Field(default=None, gt=0, le=3600)
    _received_at: float = PrivateAttr(default_factory=SYSTEM_CLOCK.monotonic)

    @property
    def received_at(self) -> float:
        """When the executor validated the request (its arrival, before any lock was waited for)."""
        return self._received_at


# --- Per-computer settings (applied when the computer's browser starts) ---------------------

# The spec's screen contract limits the viewport to 1280 × 720: a computer may use a smaller one
# (its frames stay 1280 × 720, the page at their top-left corner), never a larger one.
MIN_VIEWPORT_WIDTH = 320
MIN_VIEWPORT_HEIGHT = 240
MAX_USER_AGENT_LENGTH = 512
# BCP 47 as browsers take it: a language, then an optional script, region and variants.
LOCALE_RE = r"^[A-Za-z]{2,3}(?:-[A-Za-z]{4})?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?(?:-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*$"


@functools.cache
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def _time_zone(name: str) -> str:
    if len(name) > 64 or name not in _time_zones():
        raise ValueError("must be an IANA time zone name such as Europe/Lisbon or America/Sao_Paulo")
    return name


def _user_agent(text: str) -> str:
    if not text.strip() or any(not 0x20 <= ord(ch) <= 0x7E for ch in text):
        raise ValueError("must be printable ASCII without line breaks")
    return text


def _proxy_server(url: str) -> str:
    """``http://host:port``: the upstream proxy, without credentials (they go to Vault)."""
    if len(url) > 300:
        raise ValueError("must be at most 300 characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("must be an http://host:port URL") from None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise ValueError("must be an http://host:port URL (an HTTP proxy with its port)")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError("must not embed a username or password (give them as username and password)")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in url or "#" in url:
        raise ValueError("must be only scheme, host and port")
    if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise ValueError("must not contain spaces or control characters")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"http://{host.lower()}:{port}"


Locale = Annotated[str, Field(strict=True), StringConstraints(min_length=2, max_length=35, pattern=LOCALE_RE)]
TimeZone = Annotated[str, Field(strict=True), AfterValidator(_time_zone)]
UserAgent = Annotated[
    str, Field(strict=True), StringConstraints(min_length=1, max_length=MAX_USER_AGENT_LENGTH), AfterValidator(_user_agent)
]
ProxyServer = Annotated[str, Field(strict=True), AfterValidator(_proxy_server)]


class ViewportSize(Closed):
    width: Annotated[int, Field(strict=True, ge=MIN_VIEWPORT_WIDTH, le=VIEWPORT_WIDTH)]
    height: Annotated[int, Field(strict=True, ge=MIN_VIEWPORT_HEIGHT, le=VIEWPORT_HEIGHT)]


class ProxySettings(Closed):
    """The computer's upstream proxy as stored: its address, and whether Vault holds credentials."""

    server: ProxyServer
    credentials: StrictBool = False


class ComputerSettings(Closed):
    """A computer's browser settings (absent: the browser's default), applied when its browser starts.

    The proxy's username and password are never here: they are in Vault under the account.
    """

    locale: Locale | None = None
    timezone: TimeZone | None = None
    user_agent: UserAgent | None = None
    viewport: ViewportSize | None = None
    proxy: ProxySettings | None = None

    @property
    def viewport_size(self) -> tuple[int, int]:
        """The page's viewport (width, height): the computer's own, or the contract's 1280 × 720."""
        if self.viewport is None:
            return VIEWPORT_WIDTH, VIEWPORT_HEIGHT
        return self.viewport.width, self.viewport.height

    def context_options(self) -> dict[str, object]:
        """Playwright's context options for these settings (the proxy is the egress proxy's business)."""
        width, height = self.viewport_size
        options: dict[str, object] = {"viewport": {"width": width, "height": height}}
        if self.locale is not None:
            options["locale"] = self.locale
        if self.timezone is not None:
            options["timezone_id"] = self.timezone
        if self.user_agent is not None:
            options["user_agent"] = self.user_agent
        return options


def computer_settings(value: dict[str, object] | None) -> ComputerSettings:
    """A computer's stored settings, checked (raises ValueError/ValidationError)."""
    return ComputerSettings.model_validate(value or {})
