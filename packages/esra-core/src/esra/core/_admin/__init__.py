"""Implementation of ``esra.core.admin``; import from that module, not from here."""
