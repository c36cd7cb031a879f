"""The key parts of a queue's concurrency groups (see :mod:`.groups` and the groups fragment)."""

#: the hold zset (held tasks), the groups hash (members, slots, limits) and the wait zset
GROUP_PARTS = ("ghold", "groups", "gwait")
