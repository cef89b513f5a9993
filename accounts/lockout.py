"""The hard sign-in lock (django-axes) with one limit per kind of count.

Failed passwords are counted per username *and* address (``AXES_FAILURE_LIMIT``,
a person's typos) and per address alone (``RAM_SIGN_IN_ADDRESS_FAILURE_LIMIT``,
higher: one address spraying passwords over many usernames). Axes compares a
single figure with a single limit, so ``get_failures`` reports the lock's limit
once the address as a whole reached its own. A correct password resets only that
username's failures at that address, never the address's count of the others'
(a sprayer signing in to an account of its own must not clear its count).
"""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from django.conf import settings
from django.db.models import QuerySet, Sum
from django.http import HttpRequest

# The order of ``AXES_LOCKOUT_PARAMETERS`` in settings: the pair first, the address alone second.
PAIR, ADDRESS = 0, 1


def _sum(attempts: QuerySet[Any]) -> int:
    return int(attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0)


class RamAxesHandler(AxesDatabaseHandler):
    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        counts = [_sum(attempts) for attempts in self.get_user_attempts(request, credentials)]
        if counts[ADDRESS] >= settings.RAM_SIGN_IN_ADDRESS_FAILURE_LIMIT:
            return max(counts[PAIR], settings.AXES_FAILURE_LIMIT)
        return counts[PAIR]

    def reset_user_attempts(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        count, _ = self.filter_user_attempts(request, credentials)[PAIR].delete()
        return int(count)
