"""Implementation of ``esra.core.secrets``; import from that module, not from here."""
