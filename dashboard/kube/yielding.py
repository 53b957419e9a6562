"""Long work on the expensive lane (a list or Table of thousands of objects) lets the fast lane
go first: every ROWS rows it calls `pause()`, which the server installs (server/lanes.py:
a short sleep, the GIL free, while renewals keep coming). kube knows no lane: this is the seam;
without a server (tests, commands) `pause` does nothing."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, TypeVar

ROWS = 256
T = TypeVar("T")

pause: Callable[[], None] = lambda: None


def install(fn: Callable[[], None]) -> None:
    global pause
    pause = fn


def every(i: int) -> None:
    """Row i of a long loop: a pause point every ROWS rows."""
    if i and not i % ROWS:
        pause()


def paced(items: Iterable[T]) -> Iterator[T]:
    """items, with a pause point every ROWS of them."""
    for i, item in enumerate(items):
        every(i)
        yield item


class Paced(list):
    """A list with a pause point every ROWS items of each pass over it: a page's rows, which
    a template's {% for %} renders by iterating the list it is given (a page of 1,000 rows is
    most of the page's time: docs/BENCHMARKS.md, "Time travel under load")."""

    def __iter__(self):
        return paced(super().__iter__())
