"""Implementation of ``esra.core.docstore``; import from that module, not from here."""
