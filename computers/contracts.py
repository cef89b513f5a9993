"""Wire contracts of the computers REST API (``computers/api.py``): closed models; every answer is
built through one of these and validated before it leaves."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from executor.contracts import (
    BROWSER_BACKENDS,
    Backend,
    Locale,
    Provider,
    ProxyServer,
    TimeZone,
    UserAgent,
    ViewportSize,
    browser_options,
)


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ComputerBrowserOut(Closed):
    """The computer's browser backend (docs/browsers.md); secrets are never shown."""

    backend: Backend
    # The spec's provider name a run's ``agent.browser.provider`` must match (or omit).
    provider: Provider
    options: dict[str, Any]
    # The last executor start's time to a ready browser (a vendor session's cold start), in ms.
    ready_ms: int | None


class ComputerProxyOut(Closed):
    """The computer's upstream proxy: its address and whether Vault holds credentials (never shown)."""

    server: str
    credentials: bool


class ComputerSettingsOut(Closed):
    """The computer's browser settings; ``null``: the browser's default (``viewport`` 1280 × 720)."""

    locale: str | None
    timezone: str | None
    user_agent: str | None
    viewport: ViewportSize | None
    proxy: ComputerProxyOut | None


# What the computer is doing now (``computers.selectors.computer_state``): ``starting`` once a start
# was asked for (explicitly, or by a run that needs it) until its executor is ready, ``stopping`` once
# it is no longer wanted (idle, evicted) until its executor host reports it gone (computers.placement).
ComputerState = Literal["stopped", "starting", "ready", "busy", "stopping", "failed"]


class ComputerOut(Closed):
    id: str
    name: str
    # Exactly "a visual session can be created now" (what the contract's clients check).
    available: bool
    status: Literal["ready", "offline", "failed"]
    state: ComputerState
    # Why the computer is ``failed``, for a person to read; ``null`` in every other state.
    state_reason: str | None
    browser: ComputerBrowserOut
    settings: ComputerSettingsOut


Secret = Annotated[str, Field(strict=True), StringConstraints(min_length=1, max_length=1024)]


class ComputerProxyIn(Closed):
    """An HTTP proxy ``http://host:port`` every connection of the browser leaves through, behind
    the egress policy. ``username`` and ``password`` (together) go to Vault and are never shown
    again; omit both to keep the stored ones (same server) or to use none."""

    server: ProxyServer
    username: Secret | None = Field(default=None, repr=False)
    password: Secret | None = Field(default=None, repr=False)

    @model_validator(mode="after")
    def _together(self) -> ComputerProxyIn:
        if (self.username is None) != (self.password is None):
            raise ValueError("give username and password together, or neither")
        if self.username is not None and ":" in self.username:
            raise ValueError("a proxy username cannot contain ':'")
        return self


class ComputerSettingsIn(Closed):
    """Replace the computer's browser settings (an absent field: the browser's default). They apply
    when the computer's browser next starts (its executor's start, or a profile reset)."""

    locale: Locale | None = None
    timezone: TimeZone | None = None
    user_agent: UserAgent | None = None
    viewport: ViewportSize | None = None
    proxy: ComputerProxyIn | None = None


class ComputerBrowserIn(Closed):
    """Choose the computer's browser backend; a change applies at once (a new generation).

    ``secret`` (the Steel or Browserbase API key, a CDP endpoint's token) is written to Vault
    under the account and never shown again; omit it to keep the stored one.
    """

    backend: Backend
    options: dict[str, Any] = Field(default_factory=dict)
    secret: Annotated[str, Field(strict=True), StringConstraints(min_length=1, max_length=4096)] | None = Field(
        default=None, repr=False
    )

    @model_validator(mode="after")
    def _options_fit(self) -> ComputerBrowserIn:
        browser_options(self.backend, self.options)
        if not BROWSER_BACKENDS[self.backend].vault_secret and self.secret is not None:
            raise ValueError(f"the {self.backend} backend takes no secret")
        return self


# The contract's computer_id: 1 to 128 characters, a letter or digit and then letters, digits, _ or -.
ComputerIdIn = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")]


class ComputerCreateIn(Closed):
    """``POST /api/computers``: the new computer's id within the account, and an optional display name.
    Its browser backend and settings are set afterwards (``PUT .../browser``, ``PUT .../settings``)."""

    id: ComputerIdIn
    name: Annotated[str, StringConstraints(max_length=200)] = ""


class ComputerDeletedOut(Closed):
    """The MCP ``computer_delete`` result (the REST operation answers 204 without a body)."""

    id: str
    deleted: Literal[True] = True


class ComputerStartIn(Closed):
    """An empty object: starting a computer takes no options."""


class ProfileResetIn(Closed):
    """An empty object: resetting a profile takes no options."""


class ProfileResetOut(Closed):
    """The computer after its profile reset: offline until its executor registers the new generation."""

    computer: ComputerOut
    profile_reset: Literal[True] = True


class ComputerList(Closed):
    """The account's computers and whether each can be viewed now."""

    computers: list[ComputerOut]
