"""esra-starlette: the example host and the ``esra`` command line."""

__version__ = "0.1.0"

__all__ = ["__version__"]
