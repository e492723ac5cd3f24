"""Implementation of ``esra.core.fetch``; import from that module, not from here."""
