"""``credits``: the account's balance does not cover the next model call; top up, then continue."""

from __future__ import annotations

from accounts.models import Account
from runs.contracts import Credits, CreditsAction, CreditsPause, HumanAction
from runs.errors import CreditsShort
from runs.models import Run
from runs.pauses.base import DemoPlan, PauseKind


class CreditsKind(PauseKind):
    name = "credits"
    model = CreditsPause
    own_reason_words = {"insufficient_credits": "the account ran out of credits"}
    no_page_message = "A credits pause needs no intervention page: top up the account, then continue the run."

    def required_action(self, *, run: Run, pause: CreditsPause, human_action: HumanAction) -> CreditsAction:
        required, available = pause.required_microcredits, run.account.microcredit_balance
        return CreditsAction(
            version=1,
            resume="explicit_continue",
            kind="credits",
            reason=pause.reason,
            credits=Credits(
                required_microcredits=str(required),
                available_microcredits=str(available),
                missing_microcredits=str(max(0, required - available)),
            ),
        )

    def continue_check(self, *, account: Account, pause: CreditsPause) -> None:
        balance = Account.objects.select_for_update().get(pk=account.pk).microcredit_balance
        if balance < pause.required_microcredits:
            missing = pause.required_microcredits - balance
            raise CreditsShort(
                f"Insufficient credits: {missing} more microcredits are needed before continuing.",
                missing_microcredits=str(missing),
            )

    def demo(self, *, origin: str, account: Account) -> DemoPlan:
        # A model call priced above the demo balance: 12 credits against 3.5 available (or whatever is there).
        balance = account.microcredit_balance
        price = 12_000_000 if balance < 12_000_000 else balance + 8_500_000
        return DemoPlan([{"tool": "finish", "arguments": {"output": "never reached"}}], microcredits_per_model_call=price)


KIND = CreditsKind()
