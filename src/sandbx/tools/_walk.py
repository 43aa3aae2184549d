"""A bounded walk of a tree that never follows a symlink: what grep and find share."""

from __future__ import annotations

import os
from collections.abc import Iterator

from sandbx._value import value


@value
class WalkBounds:
    entries: int


class BoundedWalk:
    """Regular files and directories under a root, depth first, sorted, symlinks skipped."""

    def __init__(self, root: str, bounds: WalkBounds) -> None:
        self._root = root
        self._bounds = bounds
        self.visited = 0
        self.cut = False
        self.unreadable = 0

    def files(self) -> Iterator[str]:
        for path, is_dir in self.entries():
            if not is_dir:
                yield path

    def entries(self) -> Iterator[tuple[str, bool]]:
        stack = [self._root]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as found:
                    listing = sorted(found, key=lambda entry: entry.name, reverse=True)
            except OSError:
                self.unreadable += 1
                continue
            for entry in listing:
                if self.visited >= self._bounds.entries:
                    self.cut = True
                    return
                self.visited += 1
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    yield entry.path, True
                elif entry.is_file(follow_symlinks=False):
                    yield entry.path, False
