"""The ``tiedlm`` command line (one module per command group; :mod:`.main` assembles the parser)."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
