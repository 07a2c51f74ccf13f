"""The package's version, one place for every edge that prints it."""

__version__ = "0.1.0.dev0"
