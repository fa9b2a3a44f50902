"""Experiments that reproduce a paper's figure end to end (``tiedlm experiment NAME``)."""
