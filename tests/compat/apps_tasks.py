"""Job functions for the real-application tests (test_resp_apps.py): they must be
importable by name, as the workers look them up."""

from __future__ import annotations


def add(a: int, b: int) -> int:
    return a + b


def shout(text: str) -> str:
    return text.upper()


def fail() -> None:
    raise ValueError("this job fails on purpose")
