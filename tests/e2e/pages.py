"""Shared helpers of the person's-pages browser tests: fixed demo data, viewports,
the accessibility check (axe-core from tests/js/node_modules, never the internet)
and the screenshot comparison."""

from __future__ import annotations

import asyncio
import io
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import time_machine
from django.contrib.auth.models import User
from PIL import Image, ImageChops, ImageDraw, ImageFilter
from playwright.async_api import Page

from accounts.models import Account, Membership
from computers.artifacts import artifact_store
from computers.models import Computer, DiagnosticArtifact
from runs import services
from runs.contracts import TakeoverPause
from runs.models import CredentialRequest, Run, RunStep, StoredCredential

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "tests" / "js" / "node_modules" / "axe-core" / "axe.min.js"
DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"
# Set to a folder (make screenshots: docs/screenshots) to write the screenshots instead of comparing them.
WRITE_SCREENSHOTS = os.environ.get("RAM_SCREENSHOTS_DIR", "")

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
# The demo's clock: the server's time stands still here, the browser's a little later.
FROZEN = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
BROWSER_NOW = FROZEN + timedelta(seconds=45)

PASSWORD = "correct horse battery"
UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# A pixel counts as different when a channel differs by more than this (anti-aliasing
# and JPEG noise stay under it); a screenshot is stale when more than this share differs.
PIXEL_TOLERANCE = 40
STALE_SHARE = 0.005


@dataclass
class Demo:
    account: Account
    user: User
    stranger: User
    computer: Computer
    credential_run: Run
    opened_run: Run
    takeover_run: Run
    connection_run: Run
    expired_run: Run
    cancelled_run: Run
    stored: StoredCredential


def _at(minutes_before: float) -> Any:
    return time_machine.travel(FROZEN - timedelta(minutes=minutes_before), tick=False)


def _steps(run: Run, *calls: dict[str, Any]) -> None:
    for index, summary in enumerate(calls):
        RunStep.objects.create(
            run=run,
            index=index,
            tool=summary["tool"],
            state=RunStep.State.SUCCEEDED,
            summary={**summary, "isError": False},
            finished_at=FROZEN,
        )
    Run.objects.filter(pk=run.pk).update(step_count=len(calls), model_calls=len(calls))


def masked_capture() -> bytes:
    """A fixed picture of a portal's sign-in page with its password field blurred, as captures are stored."""
    image = Image.new("RGB", (1280, 720), "#f4f6f8")
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 1280, 64), fill="#1f3a5f")
    draw.text((32, 22), "City permits", fill="white")
    draw.rectangle((440, 160, 840, 560), fill="white", outline="#c8ced6")
    draw.text((480, 190), "Renew a parking permit", fill="#111")
    draw.rectangle((480, 250, 800, 290), outline="#8a949e")
    draw.text((490, 262), "ana@acme.example", fill="#111")
    draw.rectangle((480, 320, 800, 360), outline="#8a949e")
    draw.text((490, 332), "secret-looking text", fill="#111")
    box = (480, 320, 800, 360)
    image.paste(image.crop(box).filter(ImageFilter.GaussianBlur(12)), box[:2])
    draw.rectangle((480, 400, 800, 460), fill="#e8eaed", outline="#8a949e")
    draw.text((560, 422), "I am not a robot  [ ]", fill="#111")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def build_demo() -> Demo:
    """The fixed demo account the screenshots show (call inside ``time_machine.travel(FROZEN)``)."""
    with _at(600):
        account = Account.objects.create(name="Acme")
        user = User.objects.create_user(username="ana", password=PASSWORD)
        Membership.objects.create(user=user, account=account)
        User.objects.create_superuser(username="staff", password=PASSWORD, email="")
        stranger = User.objects.create_user(username="bruno", password=PASSWORD)
        Membership.objects.create(user=stranger, account=Account.objects.create(name="Globex"))
        computer = Computer.objects.create(id="acme-desk", account=account, name="Front desk")
        done = services.run_create(account=account, computer=computer, max_model_calls=20, task={"goal": "Check the status of order PO-1042 on the billing portal."})
        Run.objects.filter(pk=done.pk).update(status=Run.Status.RUNNING)
        done.refresh_from_db()
        services.run_finish(run=done, output={"status": "shipped"})
        cancelled = services.run_create(account=account, computer=computer, max_model_calls=20, task={"goal": "Update the delivery address for the Lisbon office."})
        services.credential_request_pause(run=cancelled, portal_origin="https://shipping.example", label="Shipping portal")
    with _at(500):
        services.run_cancel(run=cancelled)
    with _at(240):
        stored = StoredCredential.objects.create(
            account=account,
            credential_id="billing-portal",
            label="Billing portal",
            origins=["https://billing.example"],
            username_masked="a***a@acme.example",
            saved_at=FROZEN - timedelta(days=3),
            last_used_at=FROZEN - timedelta(hours=4),
            last_used_run=done,
        )
    with _at(95):
        expired = services.run_create(account=account, computer=computer, max_model_calls=20, task={"goal": "Download last month's payslips from the payroll site."})
        services.credential_request_pause(run=expired, portal_origin="https://payroll.example", label="Payroll site", ttl_seconds=900)
    with _at(40):
        takeover = services.run_create(
            account=account, computer=computer, max_model_calls=20, task={"goal": "Renew the parking permit for the delivery van on the city website."}
        )
        _steps(
            takeover,
            {"tool": "navigate", "url": "https://permits.city.example/renew"},
            {"tool": "click", "selector": "#renew-van"},
            {"tool": "type", "selector": "#plate", "characters": 8},
            {"tool": "click", "selector": "button[type=submit]"},
        )
        artifact = DiagnosticArtifact.objects.get(pk=artifact_store(computer_id=computer.id, kind="screenshot", data=masked_capture(), content_type="image/jpeg"))
        services.run_event_append(run=takeover, kind="step_completed", data={"index": 3, "isError": False, "artifact_id": str(artifact.id)})
        services.run_pause(run=takeover, pause=TakeoverPause(kind="takeover", reason="captcha"))
    with _at(25):
        connection = services.run_create(
            account=account, computer=computer, max_model_calls=20, task={"goal": "Summarise this week's unread email from suppliers."}
        )
        services.connection_request_pause(run=connection, capabilities=["gmail.readonly"])
    with _at(12):
        opened = services.run_create(account=account, computer=computer, max_model_calls=20, task={"goal": "File the VAT return on the tax portal."})
        services.credential_request_pause(
            run=opened, portal_origin="https://tax.example", label="Tax portal", credential_id="tax-portal"
        )
    with _at(4):
        credential = services.run_create(
            account=account,
            computer=computer,
            max_model_calls=20,
            task={"goal": "Download the October invoices from the supplier portal and file them in the shared folder."},
        )
        _steps(
            credential,
            {"tool": "navigate", "url": "https://portal.example/login"},
            {"tool": "wait_for", "selector": "#username"},
        )
        services.credential_request_pause(
            run=credential, portal_origin="https://portal.example", label="Supplier portal", credential_id="supplier-portal"
        )
    CredentialRequest.objects.filter(run=expired).update(expires_at=FROZEN - timedelta(minutes=80))
    for run in (credential, opened, takeover, connection, expired, cancelled):
        run.refresh_from_db()
    return Demo(account, user, stranger, computer, credential, opened, takeover, connection, expired, cancelled, stored)


async def check_accessibility(page: Page) -> None:
    """axe-core on the page as it is: no serious or critical violation."""
    source = await asyncio.to_thread(AXE.read_text)
    if not await page.evaluate("() => typeof window.axe === 'object'"):
        # Evaluated through the DevTools protocol: the page's CSP is untouched, nothing comes from the network.
        await page.evaluate(source)
    result = await page.evaluate(
        "() => axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map("
        "v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)})))"
    )
    bad = [v for v in result if v["impact"] in ("serious", "critical")]
    assert bad == [], f"{page.url}: {bad}"


def compare_or_write(name: str, png: bytes) -> str | None:
    """Write the screenshot (make screenshots), or say why the committed one is stale (None when current)."""
    if WRITE_SCREENSHOTS:
        folder = Path(WRITE_SCREENSHOTS)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.png").write_bytes(png)
        return None
    committed = DOCS_SCREENSHOTS / f"{name}.png"
    if not committed.exists():
        return f"{name}: missing"
    with Image.open(committed) as old_image, Image.open(io.BytesIO(png)) as new_image:
        old, new = old_image.convert("RGB"), new_image.convert("RGB")
        if old.size != new.size:
            return f"{name}: size {old.size} is now {new.size}"
        difference = ImageChops.difference(old, new).convert("L").point(lambda v: 255 if v > PIXEL_TOLERANCE else 0)
        changed = difference.histogram()[255] / (old.size[0] * old.size[1])
    return f"{name}: {changed:.2%} of the pixels changed" if changed > STALE_SHARE else None


@dataclass
class Tour:
    """Each page, at every viewport: checked by axe and its screenshot compared (or written)."""

    page: Page
    stale: list[str]
    names: list[str]

    async def station(
        self, name: str, *, axe: bool = True, mask_ids: bool = False, sizes: tuple[str, ...] = tuple(VIEWPORTS)
    ) -> None:
        """``mask_ids`` paints over random ids (run UUIDs) a page shows, so that the picture stays comparable."""
        mask = [self.page.get_by_text(UUID_TEXT)] if mask_ids else []
        for viewport in sizes:
            size = VIEWPORTS[viewport]
            await self.page.set_viewport_size(size)
            await self.page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            if axe:
                await check_accessibility(self.page)
            png = await self.page.screenshot(full_page=True, animations="disabled", caret="hide", mask=mask, mask_color="#c8ced6")
            shot = f"{name}-{viewport}"
            self.names.append(shot)
            problem = await asyncio.to_thread(compare_or_write, shot, png)
            if problem:
                self.stale.append(problem)
        await self.page.set_viewport_size(VIEWPORTS["desktop"])
