"""The embedded demo: Larkspur Cycles in SQLite, searched with the offline LocalModel."""
