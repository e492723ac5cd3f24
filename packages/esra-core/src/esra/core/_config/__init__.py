"""Implementation of ``esra.core.config``; import from that module, not from here."""
