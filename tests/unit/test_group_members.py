"""GroupMembers: a group of one keeps its uid alone; every sequence of adds and
removals reads like a dict of sets."""

from __future__ import annotations

import random

from pyextender.cache.members import GroupMembers


def test_one_member_is_held_alone_and_a_set_from_the_second() -> None:
    m = GroupMembers()
    m.add("ns/g", "u1")
    assert m._by_group["ns/g"] == "u1"
    assert list(m.uids("ns/g")) == ["u1"] and m.count("ns/g") == 1
    m.add("ns/g", "u1")  # the same pod again (a MODIFIED event)
    assert m.count("ns/g") == 1
    m.add("ns/g", "u2")
    assert m._by_group["ns/g"] == {"u1", "u2"}
    m.discard("ns/g", "u1")
    assert m._by_group["ns/g"] == "u2"  # back to one
    m.discard("ns/g", "u-other")  # not a member: nothing changes
    assert m.count("ns/g") == 1
    m.discard("ns/g", "u2")
    assert "ns/g" not in m and m.uids("ns/g") == () and m.count("ns/g") == 0
    m.discard("ns/none", "u1")  # no such group


def test_random_sequences_read_like_a_dict_of_sets() -> None:
    rng = random.Random(4)
    m = GroupMembers()
    ref: dict[str, set[str]] = {}
    for _ in range(3000):
        group, uid = f"g{rng.randrange(6)}", f"u{rng.randrange(5)}"
        if rng.random() < 0.55:
            m.add(group, uid)
            ref.setdefault(group, set()).add(uid)
        else:
            m.discard(group, uid)
            if group in ref:
                ref[group].discard(uid)
                if not ref[group]:
                    del ref[group]
        assert len(m) == len(ref)
        for g in (f"g{i}" for i in range(6)):
            assert set(m.uids(g)) == ref.get(g, set())
            assert m.count(g) == len(ref.get(g, ())) and (g in m) == (g in ref)


def test_a_reading_copy_does_not_see_later_changes() -> None:
    m = GroupMembers()
    for uid in ("a", "b"):
        m.add("ns/two", uid)
    m.add("ns/one", "c")
    copy = m.copy_for_reading()
    m.add("ns/two", "d")
    m.discard("ns/one", "c")
    m.add("ns/new", "e")
    assert set(copy.uids("ns/two")) == {"a", "b"}
    assert list(copy.uids("ns/one")) == ["c"] and "ns/new" not in copy


def test_the_cache_snapshot_copies_succeeded() -> None:
    from pyextender.cache.cluster import ClusterCache

    cache = ClusterCache()
    cache.succeeded.add("ns/g", "u1")
    snap = cache.snapshot()
    cache.succeeded.add("ns/g", "u2")
    assert snap.succeeded is not cache.succeeded
    assert snap.succeeded.count("ns/g") == 1 and cache.succeeded.count("ns/g") == 2
