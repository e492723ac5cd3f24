"""The settings loader refuses a server source's literal password with esra-core's check.

One implementation (``esra.core.config.check_no_literal_password``) serves the loader and
the admin chain, so a template one refuses the other refuses too, in every form.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.postgres._store_factory import POSTGRES_STORE_KIND
from esra.starlette._settings import SettingsError, load_settings
from tests.starlette.test_settings_stores import _settings

PASSWORD = "hunter2-literal-password"


@pytest.mark.parametrize(
    "template",
    [
        f"postgresql://esra_store:{PASSWORD}@db.internal:5432/esra",
        f"postgresql://${{secret:env:LARKSPUR_STORE_USER}}:{PASSWORD}@db.internal:5432/esra",
        f"postgresql://${{secret%3Aenv%3ALARKSPUR_STORE_USER}}:{PASSWORD}@db.internal/esra",
        f"postgresql://esra_store:{PASSWORD}@[db.internal:5432/esra",
        f"postgresql://esra_store:${{secret:env:LARKSPUR_STORE_PW}}@db.internal:5432/esra"
        f"?sslkey=/etc/esra/client.key&sslpassword={PASSWORD}",
    ],
    ids=["plain", "reference-user", "percent-encoded-reference", "malformed", "query-option"],
)
def test_a_literal_password_is_refused_without_echoing_it(tmp_path: Path, template: str) -> None:
    with pytest.raises(SettingsError, match="literal password") as refused:
        load_settings(_settings(tmp_path, (POSTGRES_STORE_KIND, template)))
    assert PASSWORD not in str(refused.value)
    assert "config" in str(refused.value)
