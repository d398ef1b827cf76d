"""Background work of the open logs: Kafka's ``KafkaScheduler``, one daemon thread per log
running delayed tasks (segment file deletion after ``file.delete.delay.ms``, the flush after a
roll) in due order."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

_log = logging.getLogger(__name__)


class Scheduler:
    """One daemon thread running delayed tasks in due order (Kafka's ``KafkaScheduler``)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def schedule(self, delay_s: float, task: Callable[[], None]) -> None:
        """Run ``task`` in ``delay_s`` seconds (the thread starts with the first task); after
        :meth:`shutdown`, run it now."""
        with self._cond:
            stopped = self._stopped
            if not stopped:
                heapq.heappush(self._tasks, (time.monotonic() + delay_s, next(self._seq), task))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
                self._cond.notify()
        if stopped:  # closing: do it now
            run_logged(task)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._tasks or self._tasks[0][0] > time.monotonic()):
                    timeout = None if not self._tasks else self._tasks[0][0] - time.monotonic()
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                _, _, task = heapq.heappop(self._tasks)
            run_logged(task)

    def shutdown(self) -> None:
        """Stop the thread and run every pending task now, in due order."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        while self._tasks:
            _, _, task = heapq.heappop(self._tasks)
            run_logged(task)


def run_logged(task: Callable[[], None]) -> None:
    """Run ``task``, logging (not raising) what it raises."""
    try:
        task()
    except Exception:  # a background task must not kill the thread; it is logged instead
        _log.exception("background log task failed")
