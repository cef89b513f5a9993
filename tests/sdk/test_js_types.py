"""The TypeScript SDK's committed types are generated from the server's own
schemas: this fails while they are stale (run `make sdk-types`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "js"
STALE = "the TypeScript SDK's types are stale: run `make sdk-types`"


def _generator() -> object:
    spec = importlib.util.spec_from_file_location("sdk_js_schemas", ROOT / "scripts" / "sdk_js_schemas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_schemas_are_the_servers(tmp_path: Path) -> None:
    _generator().write(tmp_path)  # type: ignore[attr-defined]
    for name in ("openapi.json", "visual.json"):
        assert (tmp_path / name).read_text() == (SDK / "schema" / name).read_text(), f"{name}: {STALE}"


@pytest.mark.live  # runs the generator (a Node subprocess)
def test_committed_typescript_types_are_generated_from_the_schemas(tmp_path: Path) -> None:
    generator = SDK / "node_modules" / ".bin" / "openapi-typescript"
    assert generator.exists(), "run `make system-deps` (npm ci in sdk/js)"
    _generator().write(tmp_path)  # type: ignore[attr-defined]
    for schema, target in (("openapi.json", "api.ts"), ("visual.json", "visual.ts")):
        out = tmp_path / target
        subprocess.run(
            [str(generator), str(tmp_path / schema), "--default-non-nullable", "false", "-o", str(out)],
            cwd=SDK, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        assert out.read_text() == (SDK / "src" / "generated" / target).read_text(), f"{target}: {STALE}"


def test_generate_script_matches_this_test() -> None:
    # The package's own `npm run generate` uses the same generator flags as the check above.

    script = json.loads((SDK / "package.json").read_text())["scripts"]["generate"]
    assert script.count("--default-non-nullable false") == 2
    assert "schema/openapi.json" in script and "schema/visual.json" in script


def test_the_package_has_ws_pinned_as_its_only_runtime_dependency() -> None:
    package = json.loads((SDK / "package.json").read_text())
    assert package["dependencies"] == {"ws": "8.22.0"}
    assert package["engines"] == {"node": ">=20"}
    assert package["type"] == "module"
    lock = json.loads((SDK / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/ws"]["version"] == "8.22.0"
    assert all(entry.get("dev") for name, entry in lock["packages"].items() if name and name != "node_modules/ws")


@pytest.mark.live  # runs npm
def test_the_package_ships_the_built_modules_and_declarations_only() -> None:
    result = subprocess.run(
        ["npm", "pack", "--dry-run", "--json", "--ignore-scripts"], cwd=SDK, check=True, capture_output=True, text=True, timeout=120
    )
    files = {f["path"] for f in json.loads(result.stdout)[0]["files"]}
    assert {"package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/browser.js", "dist/browser.d.ts"} <= files
    assert all(name in {"package.json", "README.md"} or name.startswith("dist/") for name in files)
