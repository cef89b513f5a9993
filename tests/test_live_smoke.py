"""The live server fixture serves the real app over a loopback socket."""

import json
import urllib.request


def test_live_server_serves_openapi(live_origin: str) -> None:
    with urllib.request.urlopen(f"{live_origin}/api/openapi.json", timeout=10) as response:
        document = json.loads(response.read())
    assert document["openapi"].startswith("3.1")
    assert "/api/runs/{run_id}/intervention-descriptor" in document["paths"]
