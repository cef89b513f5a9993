"""Write the schemas the TypeScript SDK's types are generated from.

    .venv/bin/python scripts/sdk_js_schemas.py [DIR]     # default sdk/js/schema

``openapi.json`` is the document served at ``/api/openapi.json``. ``visual.json``
holds the ``jpeg-websocket-v1`` messages, which OpenAPI does not describe: the
JSON Schema of each pydantic model in ``visual.contracts`` (server -> client and
client -> server), wrapped as the components of an OpenAPI document so one
generator (``openapi-typescript``) reads both. ``make sdk-types`` runs this and
the generator; a test fails while the committed types are stale.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGET = ROOT / "sdk" / "js" / "schema"


def _setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ramsite.settings")
    import django

    django.setup()


def visual_document() -> dict[str, Any]:
    """The WebSocket messages as an OpenAPI 3.1 document with only components."""
    from pydantic import BaseModel

    from visual import contracts as c

    schemas: dict[str, Any] = {}

    def add(model: type[BaseModel], *, sent_by_server: bool) -> None:
        schema = model.model_json_schema(
            ref_template="#/components/schemas/{model}", mode="serialization" if sent_by_server else "validation"
        )
        for name, sub in schema.pop("$defs", {}).items():
            schemas[name] = sub
        if sent_by_server:
            # The server dumps every field (defaults included): each one is always present.
            schema["required"] = list(schema.get("properties", {}))
        schemas[model.__name__] = schema

    server = [c.Hello, c.FrameMessage, c.StateTransition, c.StateHuman, c.StateReleased, c.StateUnavailable, c.Ack, c.ErrorMessage]
    client = [c.Takeover, c.Release, c.InputMessage]
    for model in server:
        add(model, sent_by_server=True)
    for model in client:
        add(model, sent_by_server=False)
    schemas["ServerMessage"] = {"oneOf": [{"$ref": f"#/components/schemas/{m.__name__}"} for m in server]}
    schemas["ClientMessage"] = {"oneOf": [{"$ref": f"#/components/schemas/{m.__name__}"} for m in client]}
    # The ram-tabs-v1 addition (only for a client that offers that subprotocol): its own
    # schemas, outside the spec's ServerMessage and ClientMessage.
    add(c.TabsMessage, sent_by_server=True)
    add(c.InputMessageWithTabs, sent_by_server=False)
    # The ram-dialogs-v1 addition, likewise.
    add(c.DialogsMessage, sent_by_server=True)
    add(c.InputMessageWithAdditions, sent_by_server=False)
    # The ram-notices-v1 addition (notices that end nothing), likewise.
    add(c.NoticeMessage, sent_by_server=True)
    return {
        "openapi": "3.1.0",
        "info": {"title": "RAM jpeg-websocket-v1 messages", "version": "1"},
        "paths": {},
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def documents() -> dict[str, dict[str, Any]]:
    _setup()
    import ramsite.urls  # noqa: F401  (registers every route)
    from core.api import openapi_document

    return {"openapi.json": openapi_document(), "visual.json": visual_document()}


def write(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name, document in documents().items():
        (target / name).write_text(json.dumps(document, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TARGET)
