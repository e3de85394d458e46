"""`map_in_flight`: a function over items on threads, as many at once as make it faster, the
number set by `core.in_flight` from the process's CPU share as answers come.

Not a `ThreadPoolExecutor`: its idle threads take queued work in any order, so a narrow
window would still pass each request to another thread. Here worker i takes work only while
i is below the window's size, so one in flight is one thread, with no switching.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, cast

from ..core.in_flight import epoch, next_size

T = TypeVar("T")
R = TypeVar("R")
Clock = Callable[[], float]


class InFlight:
    """How many workers may take work: `size`, from `limit` down to 1 and back, decided
    after every epoch of answers (`core.in_flight.next_size`); and at most `ahead` items per
    worker (`ahead * limit`) taken and not yet read, however narrow the window: a reader that
    reads in bursts (extraction hands pages to its pool in chunks) finds them fetched."""

    def __init__(
        self, limit: int, *, ahead: int, cpu: Clock = time.process_time, clock: Clock = time.monotonic
    ) -> None:
        self.size = self.limit = max(1, limit)
        self._ahead = max(1, ahead)
        self._cpu, self._clock = cpu, clock
        self._answers = self._unread = 0
        self._since = (clock(), cpu())
        self._stopped = False
        lock = threading.Lock()
        self._grown = threading.Condition(lock)  # parked workers: their number is past the size
        self._room = threading.Condition(lock)  # workers in the window, while answers wait unread

    def admit(self, worker: int) -> bool:
        """Wait until `worker` may take an item, and count it taken; False once stopped. A
        worker waits for the others' answers (each within its page deadline) or for the reader."""
        with self._grown:
            self._grown.wait_for(lambda: self._stopped or worker < self.size)
            self._room.wait_for(lambda: self._stopped or self._unread < self._ahead * self.limit)
            self._unread += 1
            return not self._stopped

    def answered(self) -> None:
        with self._grown:
            self._answers += 1
            if self._answers < epoch(self.size):
                return
            wall, cpu = self._clock(), self._cpu()
            size = next_size(self.size, self.limit, cpu - self._since[1], wall - self._since[0])
            if size > self.size:  # a narrower window wakes no one
                self._grown.notify_all()
            self.size, self._answers, self._since = size, 0, (wall, cpu)

    def read(self) -> None:
        """The reader took one answer (or a worker gave its item back)."""
        with self._room:
            self._unread -= 1
            self._room.notify()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        with self._grown:
            self._stopped = True
            self._grown.notify_all()
            self._room.notify_all()


def map_in_flight(fn: Callable[[T], R], items: Sequence[T], window: InFlight) -> Iterator[R]:
    """`fn` over `items` on `window.limit` threads, results in completion order. Closing
    the iterator stops the workers; each ends once its item is done."""
    todo, take = iter(items), threading.Lock()
    results: queue.SimpleQueue[tuple[R | None, BaseException | None]] = queue.SimpleQueue()

    def work(worker: int) -> None:
        while window.admit(worker):
            with take:
                item = next(todo, _END)
            if item is _END or window.stopped:
                window.read()
                return
            try:
                results.put((fn(cast(T, item)), None))
            except BaseException as exc:  # the reader raises it
                results.put((None, exc))
            window.answered()

    workers = [threading.Thread(target=work, args=(i,), name=f"fetch {i}", daemon=True) for i in range(window.limit)]
    for thread in workers:
        thread.start()
    try:
        for _ in range(len(items)):
            value, exc = results.get()
            window.read()
            if exc is not None:
                raise exc
            yield cast(R, value)
    finally:
        window.stop()
        for thread in workers:
            thread.join()


_END = object()
