"""Implementation of ``esra.core.prompts``; import from that module, not from here."""
