"""A source's connection template names its credentials; it never holds a password.

Configuration holds secret references only (docs/secrets.md): a template's password is a
``${secret:…}`` reference, written plainly (``${secret:env:PGPASSWORD}``) or percent-encoded
(``${secret%3Aenv%3APGPASSWORD}``). One check serves every way a source arrives — the
settings file, the admin API's modelling, publication — so none accepts what another
refuses, and a refusal never quotes the password back.
"""

from __future__ import annotations

import re

from esra.core._config.source import Source
from esra.core.exceptions import ConfigurationError

__all__ = ["check_no_literal_password", "holds_literal_password"]

_SECRET_REFERENCE = re.compile(r"\$\{secret(?::|%3[Aa])[^}]*\}")
# The authority where urllib.parse.urlsplit (and so every provider) finds it: after an
# optional scheme, "//" up to the first "/", "?" or "#". Matched by hand because urlsplit
# validates too, and a malformed template must not slip a password through unjudged.
_AUTHORITY = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?//([^/?#]*)")
# What urlsplit ignores, so the authority is found where a driver would find it.
_LEADING_IGNORED = "".join(chr(code) for code in range(0x21))  # C0 controls and space
_IGNORED_ANYWHERE = str.maketrans("", "", "\t\r\n")


def holds_literal_password(connection_ref: str) -> bool:
    """Whether the template's user information carries a password that is not a reference."""
    text = connection_ref.lstrip(_LEADING_IGNORED).translate(_IGNORED_ANYWHERE)
    # References hold ":" and "/" themselves (``${secret:file:/run/pw}``): judge the
    # template without them, so neither splits the user from the password nor ends the
    # authority, and whatever is left beside them is literal.
    match = _AUTHORITY.match(_SECRET_REFERENCE.sub("", text))
    if match is None:
        return False
    userinfo = match.group(1).rpartition("@")[0]
    return bool(userinfo.partition(":")[2])


def check_no_literal_password(source: Source) -> None:
    """Refuse ``source`` if its connection template holds a literal password.

    Raises:
        ConfigurationError: naming the source, never the password.
    """
    if holds_literal_password(source.connection_ref):
        # Audit records keep this text, so it describes the fix without a reference's syntax.
        msg = (
            f"source {source.id!r}: its connection template holds a literal password; name "
            "the secret instead, as an env or file reference or a stored secret"
        )
        raise ConfigurationError(msg)
