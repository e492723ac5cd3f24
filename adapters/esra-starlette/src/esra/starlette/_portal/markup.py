"""HTML built safely: every value is escaped unless it is already :class:`Markup`.

The portal renders with the standard library only. Page templates are package data under
``templates/`` in :class:`string.Template` syntax (``$name``); fragments are built with
:func:`html`, a ``str.format`` whose arguments are escaped. Nothing reaches a page without
passing through :func:`escape` — document titles, filenames, scanner excerpts and token
claims are all untrusted text.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable
from functools import cache
from importlib.resources import files
from string import Template

__all__ = ["Markup", "escape", "html", "join", "render_template"]


class Markup(str):
    """Text already safe to place in HTML (built by this module, never from input)."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """``value`` as HTML text: escaped (quotes included) unless it is already ``Markup``."""
    if isinstance(value, Markup):
        return value
    return Markup(_html.escape(str(value), quote=True))


def html(template: str, *args: object, **kwargs: object) -> Markup:
    """Fill a trusted ``str.format`` template with escaped arguments."""
    return Markup(
        template.format(
            *(escape(a) for a in args), **{name: escape(v) for name, v in kwargs.items()}
        )
    )


def join(parts: Iterable[Markup], separator: str = "\n") -> Markup:
    """Concatenate fragments (each already ``Markup``)."""
    return Markup(separator.join(escape(part) for part in parts))


@cache
def _template(name: str) -> Template:
    text = files("esra.starlette._portal").joinpath("templates", name).read_text("utf-8")
    return Template(text)


def render_template(name: str, **values: object) -> Markup:
    """Render the packaged template ``name``; every value is escaped unless ``Markup``.

    Raises:
        KeyError: the template names a value that was not given (a programming error).
    """
    return Markup(_template(name).substitute({key: escape(v) for key, v in values.items()}))
