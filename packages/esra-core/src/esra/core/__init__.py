"""esra-core: the retrieval pipeline, validator and ports, with no I/O of its own."""

__version__ = "0.1.0"

__all__ = ["__version__"]
