"""The served OpenAPI document describes exactly the routes the admin API serves."""

from __future__ import annotations

from pathlib import Path

from starlette.routing import Mount, Route

from esra.starlette._admin import ADMIN_PATH
from tests.starlette.admin._host import ADMIN, open_admin_host


async def test_openapi_document_matches_the_served_routes(tmp_path: Path) -> None:
    """Every served (path, method) is documented, every documented one served."""
    async with open_admin_host(tmp_path) as host, host.client(None) as anonymous:
        response = await anonymous.get(f"{ADMIN}/openapi.json")
        assert response.status_code == 200
        document = response.json()
        (mount,) = [r for r in host.app.routes if isinstance(r, Mount) and r.path == ADMIN_PATH]
        served = {
            (ADMIN_PATH + route.path, method.lower())
            for route in mount.routes
            if isinstance(route, Route) and route.path != "/openapi.json"
            for method in route.methods or ()
            if method != "HEAD"
        }
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert served == documented
    assert document["openapi"].startswith("3.1")
    for item in document["paths"].values():
        for operation in item.values():
            assert operation["x-esra-role"]
            assert "500" in operation["responses"]
            for status, answer in operation["responses"].items():
                if int(status) >= 400:
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}
    refs = {ref.rsplit("/", 1)[1] for ref in _refs(document["paths"])}
    assert refs <= set(document["components"]["schemas"])


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if "$ref" in node else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []
