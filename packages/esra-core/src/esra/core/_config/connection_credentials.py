"""A source's connection template names its credentials; it never holds a password.

Configuration holds secret references only (docs/secrets.md): a template's password is a
``${secret:…}`` reference, written plainly (``${secret:env:PGPASSWORD}``) or percent-encoded
(``${secret%3Aenv%3APGPASSWORD}``). One check serves every way a source arrives — the
settings file, the admin API's modelling, publication — so none accepts what another
refuses, and a refusal never quotes the password back.

The query string is judged too: a driver takes credentials from it as well (libpq's
``sslpassword``, a client key's passphrase). An option is a credential when its name —
percent-decoded, case and separators aside — contains ``password``, ``passwd``, ``pwd``,
``passphrase``, ``secret`` or ``token``; its value must then be empty or one whole reference.
The rule goes by the name rather than a list of each driver's options, so an option a
provider comes to accept later, or one a provider refuses anyway, is judged all the same: a
name caught by mistake costs only writing its value as a reference, while one missed would
put a secret into configuration, its history and the audit trail.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote

from esra.core._config.source import Source
from esra.core.exceptions import ConfigurationError

__all__ = ["check_no_literal_password", "holds_literal_password"]

# A reference's name is at most 200 characters (the providers' resolver), 600 percent-encoded:
# bounded, so each "${secret:" without its "}" costs a bounded look-ahead, never a scan to the
# template's end (a megabyte of them took minutes). A longer one is judged as literal text.
_SECRET_REFERENCE = re.compile(r"\$\{secret(?::|%3[Aa])[^}]{0,1024}\}")
# The authority where urllib.parse.urlsplit (and so every provider) finds it: after an
# optional scheme, "//" up to the first "/", "?" or "#". Matched by hand because urlsplit
# validates too, and a malformed template must not slip a password through unjudged.
_AUTHORITY = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?//([^/?#]*)")
# What urlsplit ignores, so the authority is found where a driver would find it.
_LEADING_IGNORED = "".join(chr(code) for code in range(0x21))  # C0 controls and space
_IGNORED_ANYWHERE = str.maketrans("", "", "\t\r\n")
_CREDENTIAL_NAME = re.compile("password|passwd|pwd|passphrase|secret|token")
_NOT_ALPHANUMERIC = re.compile("[^a-z0-9]")
# One ``name = value`` of a keyword/value string: a value quoted ('…', libpq), braced ({…},
# ODBC; a reference inside, ``{${secret:…}}``, ends at its second brace) or running to the
# next blank or ";". A name starts only where no name character
# precedes it and is read possessively, so the search stays linear in the template's length.
_PAIR = re.compile(
    r"(?<![\w.-])([A-Za-z_][\w.-]*+)\s*=\s*"
    r"('(?:[^'\\]|\\.)*+'|\{[^}]*+\}\}?|[^\s;]*)"
)


def holds_literal_password(connection_ref: str) -> bool:
    """Whether the template carries a credential that is not a reference: a password in its
    user information, or a credential option (see the module's docstring) in its query —
    or, in a template that is no URL, in any of its ``name=value`` pairs."""
    text = connection_ref.lstrip(_LEADING_IGNORED).translate(_IGNORED_ANYWHERE)
    if _AUTHORITY.match(_SECRET_REFERENCE.sub("", text)) is None:
        return _pairs_hold_credential(text) or _query_holds_credential(text)
    return _userinfo_holds_password(text) or _query_holds_credential(text)


def _pairs_hold_credential(text: str) -> bool:
    # A keyword/value string (libpq's "host=db password=x", ODBC's "Server=db;Password=x")
    # is no template any provider connects with, but it is kept in configuration, its
    # history and the audit trail all the same: its credentials are judged as a query's.
    return any(
        value and _SECRET_REFERENCE.fullmatch(value) is None
        for name, value in ((name, _unquoted(value)) for name, value in _PAIR.findall(text))
        if _CREDENTIAL_NAME.search(_NOT_ALPHANUMERIC.sub("", name.casefold()))
    )


def _unquoted(value: str) -> str:
    quoted = len(value) > 1 and (value[0], value[-1]) in (("'", "'"), ("{", "}"))
    return value[1:-1] if quoted else value


def _userinfo_holds_password(text: str) -> bool:
    # References hold ":" and "/" themselves (``${secret:file:/run/pw}``): judge the
    # template without them, so neither splits the user from the password nor ends the
    # authority, and whatever is left beside them is literal.
    match = _AUTHORITY.match(_SECRET_REFERENCE.sub("", text))
    if match is None:
        return False
    userinfo = match.group(1).rpartition("@")[0]
    return bool(userinfo.partition(":")[2])


def _query_holds_credential(text: str) -> bool:
    # Found where urlsplit finds it, by hand like the authority: after the first "?" of what
    # comes before the first "#". Each reference is percent-encoded whole first, so nothing
    # inside one ("#", "&", "+", "/") splits the query, and the decoding parse_qsl does (as
    # every provider's parser does) gives it back as written.
    encoded = _SECRET_REFERENCE.sub(lambda ref: quote(ref.group(0), safe=""), text)
    query = encoded.partition("#")[0].partition("?")[2]
    return any(
        value and _SECRET_REFERENCE.fullmatch(value) is None
        for name, value in parse_qsl(query, keep_blank_values=True)
        if _CREDENTIAL_NAME.search(_NOT_ALPHANUMERIC.sub("", name.casefold()))
    )


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
