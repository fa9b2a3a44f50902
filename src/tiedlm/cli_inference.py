"""CLI commands that use a trained run: evaluate, predict, generate, info (filled in below)."""


def register(add) -> None:
    pass
