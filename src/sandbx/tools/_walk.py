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
        """Depth first: a directory, then everything under it, then its next sibling."""
        stack: list[Iterator[os.DirEntry[str]]] = [self._listing(self._root)]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
                continue
            if self.visited >= self._bounds.entries:
                self.cut = True
                return
            self.visited += 1
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                yield entry.path, True
                stack.append(self._listing(entry.path))
            elif entry.is_file(follow_symlinks=False):
                yield entry.path, False

    def _listing(self, directory: str) -> Iterator[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as found:
                return iter(sorted(found, key=lambda entry: entry.name))
        except OSError:
            self.unreadable += 1
            return iter(())
