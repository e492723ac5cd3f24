"""``POST /admin/v1/explain`` withholds a record key no caller would see, and says so.

The test world's mapping holds its key column (``col_id``: ``a1``, ``a2``, ``a3``) behind no
field, so no response ever shows it: the explanation's ranking names each result by a
stand-in instead, marked ``keyWithheld``, distinct per result.
"""

from __future__ import annotations

import re
from pathlib import Path

from esra.core._explain import WITHHELD_KEY_PREFIX
from tests.starlette.admin._host import ADMIN, open_admin_host, token

OPERATOR = token("ESRA_EXPOSURE_MANAGE", subject="tuner")
BODY = {
    "exposure": "hr_search",
    "arguments": {"prompt": "leave policy"},
    "caller": {"subject": "alice", "clientApp": "app-1", "claims": {}},
}
RAW_KEYS = {"a1", "a2", "a3"}


async def test_a_key_no_caller_sees_is_withheld_from_the_explanation(tmp_path: Path) -> None:
    async with open_admin_host(tmp_path) as host, host.client(OPERATOR) as client:
        response = await client.post(f"{ADMIN}/explain", json=BODY)

    assert response.status_code == 200
    ranking = response.json()["ranking"]
    assert ranking
    keys = [r["key"] for r in ranking]
    assert all(r["keyWithheld"] is True for r in ranking)
    assert all(re.fullmatch(rf"{WITHHELD_KEY_PREFIX}[0-9a-f]{{16}}", key) for key in keys)
    assert RAW_KEYS.isdisjoint(keys)
    assert len(set(keys)) == len(keys)
