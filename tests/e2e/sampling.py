"""Watching a cluster while something happens to it: `Sampler.sample()` runs every `every`
seconds on a thread for as long as the `with` block, so a test can assert on every observation
(a floor never broken, a group never split), not only on the end state."""

from __future__ import annotations

import threading


class Sampler:
    every = 0.2

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self):  # noqa: ANN204 (the subclass)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
