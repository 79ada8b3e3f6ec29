"""Pod uids per PodGroup, small when groups are small.

Volcano gives every pod of its scheduler a PodGroup, one of its own for a pod that
names none, so most groups of a busy cluster have one member. A set per group costs
216 bytes before its first uid (a set's smallest table), 20 MB at 100,000 lone pods
(bench/memory.py); a group of one keeps its uid alone instead, and becomes a set at
its second member.
"""

from __future__ import annotations

from collections.abc import Collection


class GroupMembers:
    """PodGroup key -> uids. Readers get a collection they must not keep or change."""

    __slots__ = ("_by_group",)

    def __init__(self) -> None:
        self._by_group: dict[str, str | set[str]] = {}

    def add(self, group: str, uid: str) -> None:
        held = self._by_group.get(group)
        if held is None:
            self._by_group[group] = uid
        elif isinstance(held, str):
            if held != uid:
                self._by_group[group] = {held, uid}
        else:
            held.add(uid)

    def discard(self, group: str, uid: str) -> None:
        held = self._by_group.get(group)
        if held is None:
            return
        if isinstance(held, str):
            if held == uid:
                del self._by_group[group]
            return
        held.discard(uid)
        if len(held) == 1:
            self._by_group[group] = next(iter(held))
        elif not held:
            del self._by_group[group]

    def uids(self, group: str) -> Collection[str]:
        held = self._by_group.get(group)
        if held is None:
            return ()
        if isinstance(held, str):
            return (held,)
        return held

    def count(self, group: str) -> int:
        held = self._by_group.get(group)
        if held is None:
            return 0
        return 1 if isinstance(held, str) else len(held)

    def __contains__(self, group: object) -> bool:
        return group in self._by_group

    def __len__(self) -> int:
        return len(self._by_group)

    def clear(self) -> None:
        self._by_group.clear()

    def copy_for_reading(self) -> GroupMembers:
        """A copy another thread may read while this one changes (reading_copy)."""
        out = GroupMembers()
        out._by_group = {
            g: held if isinstance(held, str) else held.copy() for g, held in self._by_group.items()
        }
        return out
