"""Configuration text that no state database can store is refused where it is read.

A JSON body (or a configuration file read as JSON) may carry lone surrogates
(``"\\ud800"``), which UTF-8 cannot encode. Accepted, such a source reaches the workspace
store's save, where SQLite and PostgreSQL both fail with an unclassified ``UnicodeEncodeError``
(the admin API's ``ESRA_INTERNAL``, and no audit record of the attempt), while the in-memory
store keeps it. Reading the configuration refuses it instead: ``ConfigurationError``, with the
path of the offending string and without the string itself.
"""

from __future__ import annotations

import pytest

from esra.core.config import Source, dump_snapshot, load_part
from esra.core.exceptions import ConfigurationError
from tests.core.factories import make_snapshot, make_source

LONE = "\ud800"


def _source_document(**changes: object) -> dict[str, object]:
    document: dict[str, object] = dict(dump_snapshot(make_snapshot([make_source()]))["sources"][0])
    document.update(changes)
    return document


@pytest.mark.parametrize("field", ["name", "description", "connection_ref", "id"])
def test_a_source_field_holding_a_lone_surrogate_is_refused(field: str) -> None:
    document = _source_document(**{field: f"Sales{LONE}"})
    with pytest.raises(ConfigurationError) as refused:
        load_part(document, Source, what="source")
    assert field in str(refused.value)
    assert LONE not in str(refused.value)
    assert "Sales" not in str(refused.value)


def test_unicode_text_outside_the_basic_plane_is_still_accepted() -> None:
    document = _source_document(name="Ventes \U0001f4c8 été")
    assert load_part(document, Source, what="source").name == "Ventes \U0001f4c8 été"
