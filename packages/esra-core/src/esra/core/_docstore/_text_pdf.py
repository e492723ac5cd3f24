"""The smallest valid PDF with a line of text per page: the sandbox's warm-up document.

Hand-built so that it needs nothing but the standard library (the sandbox server builds it
before it serves) and parses under pypdf's strict mode: Helvetica, one content stream per
page, an exact cross-reference table.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["pdf_from_objects", "text_pdf"]


def text_pdf(pages: Sequence[str]) -> bytes:
    """A PDF whose page ``i`` shows ``pages[i]`` (Latin-1 text, no parentheses or
    backslashes: it is written into the content stream as it is)."""
    count = len(pages)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count))
        + b"] /Count %d >>" % count,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        stream = b"BT /F1 12 Tf 72 720 Td (" + text.encode("latin-1") + b") Tj ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return pdf_from_objects(objects)


def pdf_from_objects(objects: Sequence[bytes]) -> bytes:
    """A PDF 1.4 file of ``objects`` (object ``i + 1`` is ``objects[i]``; object 1 is the
    catalog) with an exact cross-reference table."""
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
