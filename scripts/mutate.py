"""``make mutate``: mutation testing of the code that enforces RAM's security and exactly-once rules.

Each target below names the functions that enforce a rule and the tests that must notice when one
line of them changes. For each module, cosmic-ray enumerates its mutants (operators replaced,
conditions negated, constants changed, ...); every mutant outside the named functions is skipped, and
each remaining one is applied to the file in place, the mapped tests run against it, and the file is
restored. A mutant the tests notice is *killed*; one they do not notice *survived*.

The report is one table (module, mutants, killed, survived, equivalent, score) and the list of
survivors with their diffs. ``survived`` counts every mutant the tests did not notice; ``equivalent`` is
the part of them listed in EQUIVALENT below, each with the reason it cannot change behaviour (printed
with it). The score is the standard mutation score, killed / (mutants - equivalent): a mutant that no
test can notice is left out of the denominator, and every other survivor counts against it. The goal
is a score of at least 90 %; the raw killed / mutants is printed too. ``RAM_MUTATE_ONLY=core/logging.py``
runs one module.
Sessions are kept under ``var/mutate/`` (a rerun resumes where it stopped; ``--fresh`` starts over).

Run it in a clean checkout: the files are changed in place while it runs (and restored after each mutant).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "var" / "mutate"
PYTEST = f"{sys.executable} -m pytest -p no:cacheprovider -x -q --reuse-db --no-header"
GOAL = 0.90


@dataclass(frozen=True)
class Target:
    module: str
    functions: tuple[str, ...]  # qualified names: "f" or "Class.method"
    tests: tuple[str, ...]  # pytest arguments
    rule: str


TARGETS: tuple[Target, ...] = (
    Target(
        "core/pages.py",
        ("origin_is_public", "require_public_origin"),
        ("tests/runs/test_views.py", "-k", "origin or refused or open"),
        "a human page's state change needs this server's exact Origin",
    ),
    Target(
        "core/logging.py",
        ("redact", "RedactSecretsFilter.filter"),
        ("tests/test_logging.py",),
        "secrets are redacted from every log record",
    ),
    Target(
        "core/contracts.py",
        ("exactly", "_check_absolute_http_url"),
        ("tests/runs/test_contracts.py", "tests/contracts", "tests/visual/test_transport.py"),
        "contract values are exact: no look-alikes, absolute http(s) links only",
    ),
    Target(
        "runs/contracts.py",
        ("_check_text",),
        ("tests/runs/test_contracts.py",),
        "descriptor texts carry no link, invite, ticket or Bearer",
    ),
    Target(
        "executor/login.py",
        ("normal_origin", "origin_allowed"),
        ("tests/executor/test_origin_match.py",),
        "credentials are typed only on one of the credential's exact origins",
    ),
    Target(
        "executor/egress.py",
        ("denied_address", "EgressPolicy.parse", "EgressPolicy.permits"),
        ("tests/executor/test_egress.py", "-m", "unit"),
        "a browser reaches no loopback or private address unless exactly allowed",
    ),
    Target(
        "executor/control.py",
        (
            "Control.lease_acquire",
            "Control.lease_check",
            "Control.grant_check",
            "Control.grant_renew",
            "Control.grant_release",
            "Control.expire",
        ),
        ("tests/executor/test_control.py",),
        "only the live lease or the person's live grant acts; a grant expires into released",
    ),
    Target(
        "visual/services.py",
        ("visual_session_create", "visual_ticket_consume"),
        (
            "tests/visual/test_api.py",
            "tests/visual/test_admission.py",
            "tests/visual/test_gateway_rules.py",
            "-k",
            "ticket or limit or create or admission",
        ),
        "a screen ticket opens one socket, within 60 s, for its own computer",
    ),
    Target(
        "runs/services.py",
        ("_continue_digest", "run_continue", "_run_continue_once"),
        (
            "tests/runs/test_api.py",
            # The race of one key on two runs: the only way into the retry after an IntegrityError.
            "tests/runs/test_concurrency.py::test_a_key_raced_on_two_runs_continues_one_and_refuses_the_other_as_reused",
            "-k",
            "continu or replay or key",
        ),
        "one continuation per run, and a repeated key answers the same bytes",
    ),
    Target(
        "accounts/services.py",
        ("delegated_sign_in_consume",),
        ("tests/accounts/test_services.py",),
        "a sign-in link is used once, before it expires, never for staff",
    ),
)


# Survivors that cannot change behaviour, by (module, the original line — preceded by the line above
# it and " / " when the line alone is ambiguous — and operator), with the reason.
EQUIVALENT: dict[tuple[str, str, str], str] = {
    ("core/logging.py", "if cleaned != message:", "core/ReplaceComparisonOperator_NotEq_IsNot"): (
        "re.sub returns the very object it was given when nothing matched, and a new one when "
        "something did, so `is not` and `!=` agree on every input"
    ),
    ("core/pages.py", "@wraps(view)", "core/RemoveDecorator"): (
        "functools.wraps only copies the view's name and docstring; nothing resolves or checks them"
    ),
    (
        "executor/egress.py",
        "def permits(self, *, host: str, address: IPAddress, port: int) -> bool:",
        "core/ReplaceBinaryOperator_Mul_Div",
    ): ("keyword-only made positional-or-keyword: every caller passes keywords"),
    # --- executor/egress.py ---
    **{
        ("executor/egress.py", line, operator): (
            "an address is in no network of the other IP version (ipaddress's `__contains__` answers False "
            "when the versions differ), so the version filter only spares work; and the versions 4 and 6 "
            "are cached small ints, so `is` agrees with `==`"
        )
        for line in (
            "if any(address in network for network in DENIED_NETWORKS if network.version == address.version):",
            "if any(a in network for a in candidates for network in self.networks if network.version == a.version):",
        )
        for operator in (
            "core/ReplaceComparisonOperator_Eq_LtE",
            "core/ReplaceComparisonOperator_Eq_GtE",
            "core/ReplaceComparisonOperator_Eq_Is",
        )
    },
    **{
        ("executor/egress.py", line, "core/NumberReplacer"): (
            "the mask 0xFFFFFFFF made 0xFFFFFFFE clears the embedded IPv4 address's last bit, which never "
            "changes its verdict: every range that decides it (DENIED_NETWORKS, Python's non-global ranges) "
            "is a /31 or wider, or a /32 inside a denied wider range (255.255.255.255 in 240.0.0.0/4; "
            "192.0.0.9 and 192.0.0.10 in 192.0.0.0/24). (Mask 0x100000000 and shifts other than 80 are "
            "noticed by the public NAT64 and 6to4 addresses of ALLOWED in the tests)"
        )
        for line in (
            "return denied_address(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))",
            "if address in SIX_TO_FOUR and denied_address(ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF)):",
        )
    },
    # --- executor/control.py ---
    # The state words are the module's constants (interned strings, the only values `state` is ever
    # given), so `is` agrees with `==` on them.
    **{
        ("executor/control.py", line, "core/ReplaceComparisonOperator_Eq_Is"): (
            "`state` only ever holds the module's constant state words (interned strings), so `is` agrees with `==`"
        )
        for line in (
            'raise ControlError("A human has control of this computer.", HUMAN_HAS_CONTROL) / if self.state == UNAVAILABLE:',
            "if self.state == LEASED:",
        )
    },
    (
        "executor/control.py",
        'raise ControlError("A human has control of this computer.", HUMAN_HAS_CONTROL) / if self.state == UNAVAILABLE:',
        "core/ReplaceComparisonOperator_Eq_GtE",
    ): (
        "`unavailable` sorts after every other state word (available, human, leased, released, transition), "
        "so `>=` matches it alone"
    ),
    **{
        (
            "executor/control.py",
            "if self.state == HUMAN and self.grant is not None and self.grant.expires_at <= now:",
            operator,
        ): (
            "the grant is set only as the state becomes human (takeover) and cleared on every way out of human "
            "(grant_release, expire, fail; lease_acquire and takeover refuse in human), so `grant is not None` "
            "already means human: no other comparison of the state can change the outcome, and `is` agrees "
            "with `==` on the interned state words"
        )
        for operator in (
            "core/ReplaceComparisonOperator_Eq_LtE",
            "core/ReplaceComparisonOperator_Eq_GtE",
            "core/ReplaceComparisonOperator_Eq_Is",
        )
    },
    **{
        (
            "executor/control.py",
            "if self.state == LEASED and self.lease is not None and self.lease.expires_at <= now:",
            operator,
        ): (
            "the lease is set only as the state becomes leased (lease_acquire) and cleared on every way out of "
            "leased (lease_release, takeover, expire, fail; lease_acquire refuses in leased), so `lease is not "
            "None` already means leased: no other comparison of the state can change the outcome, and `is` "
            "agrees with `==` on the interned state words"
        )
        for operator in (
            "core/ReplaceComparisonOperator_Eq_LtE",
            "core/ReplaceComparisonOperator_Eq_GtE",
            "core/ReplaceComparisonOperator_Eq_Is",
        )
    },
    **{
        (
            "executor/control.py",
            "if self.state != HUMAN or self.grant is None or not secrets.compare_digest(self.grant.id, grant_id):",
            operator,
        ): (
            "the grant exists only in human (set as takeover enters it, cleared on every way out), so outside "
            "human `grant is None` refuses anyway and in human the grant id decides: `<`, `>` or `is not` "
            "for `!=`, or the first `or` made `and`, cannot change the outcome (the second `or` made `and` "
            "accepts any id in human, and the tests notice)"
        )
        for operator in (
            "core/ReplaceComparisonOperator_NotEq_Lt",
            "core/ReplaceComparisonOperator_NotEq_Gt",
            "core/ReplaceComparisonOperator_NotEq_IsNot",
            "core/ReplaceOrWithAnd",
        )
    },
    **{
        ("core/contracts.py", "if type(value) is not type(expected) or value != expected:", operator): (
            "every use pairs `exactly` with a Literal of the same single value, which refuses any other "
            "value of the right type; and types and the small constants True and 1 are singletons, so "
            "`is not` and `!=` agree on them"
        )
        for operator in (
            "core/ReplaceComparisonOperator_NotEq_Gt",
            "core/ReplaceComparisonOperator_NotEq_Lt",
            "core/ReplaceComparisonOperator_NotEq_IsNot",
            "core/ReplaceComparisonOperator_IsNot_NotEq",
        )
    },
    (
        "executor/login.py",
        "return f\"{scheme}://{host}:{port or (443 if scheme == 'https' else 80)}\"",
        "core/ReplaceComparisonOperator_Eq_GtE",
    ): (
        "normal_origin has already returned None unless the scheme is `http` or `https`, and `http` sorts before "
        "`https`, so `>=` matches `https` alone"
    ),
    # --- single use by a conditional update ---
    ("accounts/services.py", "if claimed != 1:", "core/ReplaceComparisonOperator_NotEq_Lt"): (
        "the update filters on DelegatedSignIn.digest, which is unique, so it changes 0 or 1 rows: "
        "`claimed < 1` and `claimed != 1` agree on both"
    ),
    ("visual/services.py", "if claimed != 1:", "core/ReplaceComparisonOperator_NotEq_Lt"): (
        "the update filters on VisualTicket.digest, which is unique, so it changes 0 or 1 rows: "
        "`claimed < 1` and `claimed != 1` agree on both"
    ),
    # --- runs/services.py ---
    ("runs/services.py", "for _attempt in range(3):", "core/NumberReplacer"): (
        "2 or 4 passes answer as 3 do: a pass raises IntegrityError only when another transaction has "
        "committed a row it collides with (PostgreSQL makes an insert that meets an uncommitted twin wait, "
        "and fail only if the twin commits). The run's row lock rules out a second continuation of one run, "
        "so the collision is the key's record, which the next pass reads (a new transaction, READ COMMITTED) "
        "and answers from: the replay or the 422. A third pass is never reached, and a record is forgotten "
        "only after 24 h. (One pass is noticed by the test that races one key on two runs)"
    ),
    ("runs/services.py", "if run.status == Run.Status.CANCELLED:", "core/ReplaceComparisonOperator_Eq_LtE"): (
        "no status word sorts before `cancelled` (cancelled, continued, failed, queued, running, succeeded, "
        "waiting_for_input), so `<=` matches it alone"
    ),
}


def function_lines(path: Path, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """The line ranges of the named functions (``Class.method`` for methods)."""
    tree = ast.parse(path.read_text())
    found: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found[name] = (child.lineno, child.end_lineno or child.lineno)
                visit(child, f"{name}.")

    visit(tree, "")
    missing = [name for name in names if name not in found]
    if missing:
        raise SystemExit(f"{path}: no function named {', '.join(missing)} (update scripts/mutate.py)")
    return [found[name] for name in names]


def write_config(target: Target, config: Path) -> None:
    command = f"{PYTEST} " + " ".join(shlex.quote(arg) for arg in target.tests)
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(target.module)}\n"
        "timeout = 300.0\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n"
        '\n[cosmic-ray.distributor]\nname = "local"\n'
    )


def cosmic(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "cosmic_ray.cli", *args], cwd=ROOT, check=True)


Span = tuple[tuple[int, int], tuple[int, int]]


def annotation_spans(path: Path) -> list[Span]:
    """Where the module's type annotations are, when it never evaluates them (``from __future__
    import annotations``): a mutant there (``str | None`` made ``str + None``) cannot change what
    the code does, so it is neither killed nor survived."""
    tree = ast.parse(path.read_text())
    lazy = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(a.name == "annotations" for a in node.names)
        for node in tree.body
    )
    if not lazy:
        return []
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0)) for n in found]


def in_annotation(mutation: Any, spans: list[Span]) -> bool:
    start, end = tuple(mutation.start_pos), tuple(mutation.end_pos)
    return any(first <= start and end <= last for first, last in spans)


def skip_outside(session: Path, module: str, ranges: list[tuple[int, int]]) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans = annotation_spans(ROOT / module)
    with use_db(str(session), WorkDB.Mode.open) as db:
        outside = [
            item.job_id
            for item in db.pending_work_items
            for mutation in item.mutations
            if in_annotation(mutation, spans)
            or not any(mutation.start_pos[0] <= end and start <= mutation.end_pos[0] for start, end in ranges)
        ]
        if outside:
            db.set_multiple_results(
                outside,
                WorkResult(output=f"outside the enforcing functions of {module}", worker_outcome=WorkerOutcome.SKIPPED),
            )


def baseline(target: Target) -> None:
    """The mapped tests must pass on the unmutated code, or every mutant would look killed."""
    command = shlex.split(PYTEST) + list(target.tests)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stdout.write(done.stdout[-3000:] + done.stderr[-2000:])
        raise SystemExit(f"the tests of {target.module} fail without any mutation; fix them first")


@dataclass
class Tally:
    mutants: int = 0
    killed: int = 0
    survived: int = 0  # every mutant the tests did not notice, the equivalent ones included
    equivalent: int = 0  # survivors listed in EQUIVALENT
    incompetent: int = 0

    @property
    def score(self) -> float:
        """killed / (mutants - equivalent): the standard mutation score."""
        competent = self.mutants - self.equivalent
        return self.killed / competent if competent else 1.0


def tally(session: Path) -> tuple[Tally, list[str]]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    counts, survivors = Tally(), []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            mutation = item.mutations[0]
            if in_annotation(mutation, annotation_spans(ROOT / mutation.module_path)):
                continue  # a session made before annotations were skipped
            counts.mutants += 1
            if result.worker_outcome != WorkerOutcome.NORMAL or result.test_outcome == TestOutcome.INCOMPETENT:
                counts.incompetent += 1  # the mutant could not even run (a timeout or a crash counts as noticed)
                counts.killed += 1
            elif result.test_outcome == TestOutcome.KILLED:
                counts.killed += 1
            else:
                counts.survived += 1
                lines = (ROOT / mutation.module_path).read_text().splitlines()
                row = mutation.start_pos[0] - 1
                line, above = lines[row].strip(), lines[row - 1].strip() if row else ""
                module, operator = str(mutation.module_path), mutation.operator_name
                why = EQUIVALENT.get((module, line, operator)) or EQUIVALENT.get(
                    (module, f"{above} / {line}", operator)
                )
                if why:
                    counts.equivalent += 1
                survivors.append(
                    f"{mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name} #{mutation.occurrence}"
                    + (f"\nequivalent: {why}" if why else "\nNOT known to be equivalent: add a test that notices it")
                    + "\n"
                    + (result.diff or "")
                )
    return counts, survivors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", action="store_true", help="forget earlier sessions and start over")
    args = parser.parse_args()
    only = os.environ.get("RAM_MUTATE_ONLY", "")
    targets = [t for t in TARGETS if not only or t.module in only.split(",")]
    SESSIONS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rows: list[tuple[str, Tally]] = []
    all_survivors: list[str] = []
    for target in targets:
        stem = target.module.replace("/", "_").removesuffix(".py")
        config, session = SESSIONS / f"{stem}.toml", SESSIONS / f"{stem}.sqlite"
        if args.fresh:
            session.unlink(missing_ok=True)
        ranges = function_lines(ROOT / target.module, target.functions)
        write_config(target, config)
        if not session.exists():
            baseline(target)
            cosmic("init", str(config), str(session))
            skip_outside(session, target.module, ranges)
        print(f"== {target.module}: {target.rule}", flush=True)
        cosmic("exec", str(config), str(session))
        subprocess.run(["git", "checkout", "--", target.module], cwd=ROOT, check=True)  # belt and braces
        counts, survivors = tally(session)
        rows.append((target.module, counts))
        all_survivors += survivors

    total = Tally()
    width = max(len(module) for module, _ in rows) if rows else 10
    print(f"\n{'module':<{width}}  mutants  killed  survived  equivalent  score")
    for module, counts in rows:
        print(
            f"{module:<{width}}  {counts.mutants:>7}  {counts.killed:>6}  {counts.survived:>8}  "
            f"{counts.equivalent:>10}  {counts.score:5.1%}"
        )
        total.mutants += counts.mutants
        total.killed += counts.killed
        total.survived += counts.survived
        total.equivalent += counts.equivalent
    print(
        f"{'total':<{width}}  {total.mutants:>7}  {total.killed:>6}  {total.survived:>8}  "
        f"{total.equivalent:>10}  {total.score:5.1%}"
    )
    raw = total.killed / total.mutants if total.mutants else 1.0
    verdict = "met" if total.score >= GOAL else "NOT met"
    print(
        f"score = killed / (mutants - equivalent); survived includes the {total.equivalent} equivalent mutants "
        f"(listed below with their reasons); raw killed / mutants: {raw:.1%}"
    )
    print(f"goal: a score of at least {GOAL:.0%}: {verdict}; {time.monotonic() - started:.0f} s")
    for survivor in all_survivors:
        print("\n--- survived: " + survivor)
    return 0 if total.score >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
