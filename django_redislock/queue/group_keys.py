"""The key parts of a queue's concurrency groups (see :mod:`.groups` and the groups fragment)."""

#: the hold zset (held tasks), the groups hash (per group: slots, limits, rate), the wait zset
#: and the tasks hash (per task: its group, its hold member)
GROUP_PARTS = ("ghold", "groups", "gwait", "gtasks")
