"""What Oracle Text accepts, stated to the validator and measured with execution's own code.

Every term of a query travels in one bind, the CONTAINS expression
(``esra.oracle._fulltext``): each token braced, every ``}`` doubled, terms joined by
operators, so the expression is longer than its terms and grows with their number. A
CONTAINS query is a ``VARCHAR2``, which in SQL holds 4,000 bytes under the default
``MAX_STRING_SIZE = STANDARD``; a longer bind fails the statement on every attempt, with an
error whose number depends on the driver's bind type and the server's settings.
``OracleTextRendering`` counts the expression in UTF-8 bytes — no database character set
needs more bytes for a character it can hold — so the validator refuses a plan whose
expression is over the limit, as ``TERM_LIMIT_EXCEEDED``, before anything is sent.
"""

from __future__ import annotations

from esra.core.ports import RenderedLengths
from esra.core.providers import ValidatedQuery
from esra.oracle._fulltext import OracleTextFullText
from esra.sql import SearchTerms, StatementBuilder, utf8_bindable

__all__ = ["MAX_TEXT_QUERY_BYTES", "OracleTextRendering"]

# A VARCHAR2 in SQL under MAX_STRING_SIZE = STANDARD (the default; EXTENDED allows more).
MAX_TEXT_QUERY_BYTES = 4000


class OracleTextRendering:
    """The ``TextRendering`` Oracle's capabilities state, over the provider's builder."""

    def __init__(self, builder: StatementBuilder) -> None:
        self._builder = builder
        self._fulltext = OracleTextFullText()

    def renders_empty(self, term: str) -> bool:
        """Never: a term without tokens is still one escaped token (``{ }``)."""
        del term
        return False

    def rendered_lengths(self, query: ValidatedQuery) -> RenderedLengths | None:
        """The UTF-8 length of ``query``'s CONTAINS expression, and of its statement.

        ``None`` when the statement cannot be built; execution then refuses it as it always
        has.
        """
        terms = SearchTerms(
            required=query.required_terms,
            optional=query.optional_terms,
            excluded=query.excluded_terms,
            phrases=query.phrases,
        )
        conditions = tuple(
            len(str(utf8_bindable(value)).encode())
            for value in self._fulltext.bind_values(terms).values()
        )
        try:
            built = self._builder.build(query)
        except Exception:
            # Whatever stops the build here stops it at execution, which classifies it.
            return None
        return RenderedLengths(text_conditions=conditions, command=len(built.sql.encode()))
