"""Implementation of ``esra.core.audit``; import from that module, not from here."""
