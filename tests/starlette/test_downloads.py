"""Download headers: a sanitised name, never a path, a quote or a control character."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from esra.starlette._downloads import attachment_disposition, download_headers


def test_names_are_given_as_ascii_fallback_and_exact_utf8() -> None:
    """A non-ASCII title keeps its exact name in ``filename*``."""
    assert attachment_disposition("Prüfbericht.pdf") == (
        "attachment; filename=\"Pr_fbericht.pdf\"; filename*=UTF-8''Pr%C3%BCfbericht.pdf"
    )


def test_a_quote_cannot_end_the_filename_parameter() -> None:
    """The quote is replaced by sanitisation before it reaches the header."""
    assert attachment_disposition('a"; filename="evil.html') == (
        'attachment; filename="a_; filename=_evil.html"; '
        "filename*=UTF-8''a_%3B%20filename%3D_evil.html"
    )


@given(st.text(max_size=300))
def test_any_title_yields_one_safe_header_value(title: str) -> None:
    """Whatever the title: printable ASCII, one quoted name, no path separator, no CR/LF."""
    value = attachment_disposition(title)
    assert value.isascii()
    assert value.isprintable()
    fallback = value.split('filename="', 1)[1].split('"; filename*=', 1)[0]
    assert '"' not in fallback
    assert "/" not in fallback
    assert "\\" not in fallback
    assert download_headers(title)["X-Content-Type-Options"] == "nosniff"
