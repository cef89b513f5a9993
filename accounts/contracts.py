"""Wire contracts of accounts: delegated sign-in links."""

from typing import Annotated

from pydantic import StringConstraints

from core.contracts import AbsoluteUrl, Closed


class DelegateIn(Closed):
    username: Annotated[str, StringConstraints(min_length=1, max_length=150)]


class DelegateOut(Closed):
    """A one-time sign-in link; the session it opens is marked delegated."""

    url: AbsoluteUrl
    expires_in_seconds: int
