"""The history checker (tests/lockhistory/checker.py) on hand-made histories.

Each violation it exists for must be reported, and the legitimate interleavings that look
close to one (readers together, a re-entry, a downgrade, a holder told of its loss, a holder
stopped past its TTL, a stale write that was refused) must not be.
"""

from __future__ import annotations

from typing import Any

from .lockhistory.checker import MARGIN, check


def hold(op: str, ok: float, end: float, fence: int, **kw: Any) -> dict[str, Any]:
    """A hold believed from ``ok`` to ``end`` (released then, deadline well after)."""
    rec = {"ev": "hold", "worker": kw.pop("worker", op), "op": op, "name": "n", "mode": "x"}
    rec.update(fence=fence, invoke=ok - 0.001, ok=ok, until=ok + 10, released=end)
    rec.update(kw)
    return rec


def write(fence: int, invoke: float, done: float, accepted: bool) -> dict[str, Any]:
    return {"ev": "write", "worker": "w", "name": "n", "fence": fence, "invoke": invoke} | {
        "done": done,
        "accepted": accepted,
    }


def types(records: list[dict[str, Any]]) -> list[str]:
    return sorted(v.type for v in check(records).violations)


def test_a_clean_history_passes() -> None:
    records = [
        hold("a", 1.0, 2.0, 1),
        hold("b", 2.0, 3.0, 2),
        write(1, 1.1, 1.2, True),
        write(2, 2.1, 2.2, True),
        {"ev": "final", "rows": {"n": 2}, "leftover": []},
    ]
    assert types(records) == []


def test_an_overlap_is_found() -> None:
    assert types([hold("a", 1.0, 2.0, 1), hold("b", 1.5, 3.0, 2)]) == ["overlap"]


def test_a_writer_overlapping_a_reader_is_found_but_readers_share() -> None:
    readers = [hold("a", 1.0, 2.0, 1, mode="r"), hold("b", 1.5, 3.0, 2, mode="r")]
    assert types(readers) == []
    assert types([*readers, hold("c", 2.5, 2.6, 3)]) == ["overlap"]


def test_one_identity_overlapping_itself_is_a_reentry_not_an_overlap() -> None:
    outer = hold("a", 1.0, 3.0, 1, identity="owner-x")
    inner = hold("b", 1.5, 2.0, 1, identity="owner-x", fresh=False)
    assert types([outer, inner]) == []


def test_a_hold_is_believed_only_until_its_deadline_or_its_loss() -> None:
    # b starts after a's deadline (a was stopped past its TTL and released late)
    a = hold("a", 1.0, 5.0, 1, until=2.0)
    assert types([a, hold("b", 2.0, 3.0, 2)]) == []
    # the deadline margin is small: a start 2 margins before the deadline is an overlap
    assert types([a, hold("b", 2.0 - 2 * MARGIN, 3.0, 2)]) == ["overlap"]
    # told of the loss (lock_lost) before b started
    told = hold("a", 1.0, 5.0, 1, lost_at=1.9)
    assert types([told, hold("b", 2.0, 3.0, 2)]) == []


def test_a_hold_told_of_its_loss_only_at_release_still_overlaps() -> None:
    late = hold("a", 1.0, 5.0, 1, lost_at=5.0)
    assert types([late, hold("b", 2.0, 3.0, 2)]) == ["overlap"]


def test_a_fence_going_back_is_found() -> None:
    assert types([hold("a", 1.0, 2.0, 5), hold("b", 2.5, 3.0, 4)]) == ["fence went back"]
    assert types([hold("a", 1.0, 2.0, 5), hold("b", 2.5, 3.0, 5)]) == [
        "fence reused",
        "fence went back",
    ]


def test_a_downgrade_keeps_its_writers_fence() -> None:
    writer = hold("a", 1.0, 1.5, 5, identity="g1")
    reader = hold("b", 1.5, 2.0, 5, identity="g1", mode="r", fresh=False, invoke=1.49)
    later = hold("c", 2.5, 3.0, 6)
    assert types([writer, reader, later]) == []


def test_concurrent_acquires_may_get_fences_in_any_order() -> None:
    # b was sent before a's acquire returned: no order between their fences
    a = hold("a", 1.0, 1.2, 5)
    b = hold("b", 1.3, 1.5, 4, invoke=0.9)
    assert types([a, b]) == []


def test_a_stale_fenced_write_accepted_is_found() -> None:
    records = [write(2, 1.0, 1.1, True), write(1, 1.2, 1.3, True)]
    assert types(records) == ["stale fenced write accepted"]
    refused = [write(2, 1.0, 1.1, True), write(1, 1.2, 1.3, False)]
    assert types(refused) == []


def test_a_stale_write_before_the_newer_fence_was_recorded_is_allowed() -> None:
    # documented: the resource refuses a stale fence only once it has seen a newer one
    records = [write(2, 1.0, 1.5, True), write(1, 1.1, 1.2, True)]
    assert types(records) == []


def test_a_row_value_mismatch_is_found() -> None:
    records = [write(1, 1.0, 1.1, True), write(2, 1.2, 1.3, True)]
    assert types([*records, {"ev": "final", "rows": {"n": 1}}]) == ["row value mismatch"]
    assert types([*records, {"ev": "final", "rows": {"n": 2}}]) == []


def test_a_lost_update_by_a_holder_stopped_past_its_ttl_is_the_fencing_case() -> None:
    # a reads under fence 1 and is stopped past its TTL (believed until 1.5); b takes
    # fence 2 and reads the same value; a's update lands first (fence 1 > the row's 0),
    # then b's: both accepted, one increment lost, with no two holders believing at once
    a = hold("a", 1.0, 3.0, 1, until=1.5)
    b = hold("b", 1.6, 2.5, 2)
    late = [write(1, 1.1, 2.0, True), write(2, 1.7, 2.1, True)]
    assert types([a, b, *late, {"ev": "final", "rows": {"n": 1}}]) == []
    assert check([a, b, *late]).writes["accepted, finished after the hold's believed end"] == 1
    # the same two writes, both finished inside their holds: a lost update, a violation
    inside = hold("a", 1.0, 3.0, 1)
    found = types([inside, b, *late, {"ev": "final", "rows": {"n": 1}}])
    assert found == ["overlap", "row value mismatch"]
    # a late write excuses one missing increment, not two, and only beside another write
    assert types([a, b, *late, {"ev": "final", "rows": {"n": 0}}]) == ["row value mismatch"]
    alone = [a, write(1, 1.1, 2.0, True), {"ev": "final", "rows": {"n": 0}}]
    assert types(alone) == ["row value mismatch"]


def test_a_hold_outliving_its_ttl_is_found() -> None:
    final = {"ev": "final", "rows": {}, "leftover": [{"name": "n", "key": "l:n", "pttl": -1}]}
    assert types([final]) == ["hold outlived its TTL"]


def test_the_table_counts_operations_faults_and_expected_categories() -> None:
    records: list[dict[str, Any]] = [
        {"ev": "op", "what": "acquire", "type": "invoke"},
        {"ev": "op", "what": "acquire", "type": "ok"},
        {"ev": "fault", "type": "drop_reply"},
        {"ev": "expected", "type": "eviction: second holder", "count": 2},
        hold("a", 1.0, 2.0, 1),
        hold("b", 1.5, 3.0, 2),
    ]
    report = check(records)
    assert report.ops == {"acquire invoke": 1, "acquire ok": 1}
    assert report.faults == {"drop_reply": 1}
    table = report.table()
    assert "overlap" in table and "expected without the system check" in table
    assert "eviction: second holder" in table


def test_grants_no_holder_had_are_counted_by_what_may_explain_them() -> None:
    records: list[dict[str, Any]] = [
        hold("a", 1.0, 2.0, 1),
        {"ev": "grant", "name": "n", "fence": 1, "t": 1.5},  # a's: explained
        {"ev": "op", "op": "b", "what": "acquire_async", "type": "invoke", "name": "n"},
        {"ev": "op", "op": "b", "what": "acquire_async", "type": "fail", "error": "cancelled"}
        | {"t": 2.5},
        {"ev": "grant", "name": "n", "fence": 2, "t": 2.4},
        {"ev": "grant", "name": "n", "fence": 2, "t": 2.7},  # the same grant, seen again
        {"ev": "op", "op": "c", "what": "acquire", "type": "invoke", "name": "n"},
        {"ev": "op", "op": "c", "what": "acquire", "type": "unknown", "t": 9.0},
        {"ev": "grant", "name": "n", "fence": 3, "t": 8.5},
        {"ev": "grant", "name": "n", "fence": 3, "t": 9.0},
        {"ev": "grant", "name": "n", "fence": 4, "t": 20.0},
        {"ev": "grant", "name": "n", "fence": 4, "t": 20.3},
        {"ev": "grant", "name": "n", "fence": 5, "t": 30.0},  # seen once: being taken back
    ]
    report = check(records)
    assert report.orphans == {
        "after a cancelled acquire": 1,
        "after an acquire with an unknown outcome": 1,
        "other (e.g. a resent acquire whose first grant expired meanwhile)": 1,
    }
    assert report.violations == []


def test_more_permits_believed_at_once_than_the_semaphore_has_is_found() -> None:
    def permit(op: str, ok: float, end: float, fence: int) -> dict[str, Any]:
        return hold(op, ok, end, fence, mode="p", permits=2, name="s")

    two = [permit("a", 1.0, 3.0, 1), permit("b", 1.5, 2.0, 2)]
    assert types(two) == []  # two of two: no overlap violation either
    handed_on = [*two, permit("c", 2.0, 2.5, 3)]  # starts as b's ends: still two
    assert types(handed_on) == []
    assert types([*two, permit("c", 1.9, 2.5, 3)]) == ["more holders than permits"]
    # a permit believed only until its deadline does not count past it
    late = permit("c", 2.5, 4.0, 3)
    expired = {**permit("a", 1.0, 9.0, 1), "until": 2.4 + MARGIN}
    assert types([expired, permit("b", 1.5, 4.0, 2), late]) == []


# -- the fair lock's order (issue 30) --------------------------------------------------------


def fair(op: str, *tries: tuple[float | int, ...], **kw: Any) -> dict[str, Any]:
    """One fair acquire: its tries ``(send, reply, code, place[, resent])``; granted if one
    has code 1."""
    rec = {"ev": "fair", "worker": op, "op": op, "name": "f", "lease": 2.0}
    rec.update(tries=[list(t) for t in tries], granted=any(t[2] == 1 for t in tries))
    rec.update(kw)
    return rec


def test_grants_in_arrival_order_pass_and_an_overtaking_grant_is_found() -> None:
    a = fair("a", (1.0, 1.01, 0, 1), (1.4, 1.41, 0, 1), (1.8, 1.81, 1, 0))
    b = fair("b", (1.1, 1.11, 0, 2), (1.85, 1.86, 1, 0))
    assert types([a, b]) == []
    overtaken = fair(
        "a", (1.0, 1.01, 0, 1), (1.4, 1.41, 0, 1), (1.6, 1.61, 0, 1), (2.0, 2.01, 1, 0)
    )
    early = fair("b", (1.1, 1.11, 0, 2), (1.5, 1.51, 1, 0))  # granted while a waited
    assert types([overtaken, early]) == ["fair grant out of arrival order"]
    # a caller that never queued (a try that did not wait) may not overtake either
    assert types([overtaken, fair("c", (1.5, 1.51, 1, 0))]) == ["fair grant out of arrival order"]


def test_an_arrival_whose_reply_was_late_is_judged_for_every_moment_it_may_have_happened() -> None:
    # a's queueing try was resent after a lost reply: it took effect between 1.0 and 1.3,
    # possibly after b's first send at 1.2, so b's grant before a's is not a violation
    a = fair("a", (1.0, 1.3, 0, 1), (1.6, 1.61, 0, 1), (2.0, 2.01, 1, 0))
    b = fair("b", (1.2, 1.21, 0, 1), (1.5, 1.51, 1, 0))
    assert types([a, b]) == []
    # the same, a's reply in before b asked: a certainly came first
    a_sure = fair("a", (1.0, 1.1, 0, 1), (1.6, 1.61, 0, 1), (2.0, 2.01, 1, 0))
    assert types([a_sure, b]) == ["fair grant out of arrival order"]
    # b's grant itself uncertain (resent): only a grant certainly before a left counts
    a_left = fair("a", (1.0, 1.1, 0, 1), (1.4, 1.41, 0, 1), leave=1.5)  # timed out at 1.5
    b_late = fair("b", (1.2, 1.21, 0, 2), (1.3, 1.6, 1, 0))  # granted somewhere in 1.3-1.6
    assert types([a_left, b_late]) == []


def test_a_waiter_that_left_or_whose_lease_may_have_lapsed_is_not_live() -> None:
    b = fair("b", (1.2, 1.21, 0, 2), (2.0, 2.01, 1, 0))
    gone = fair("a", (1.0, 1.01, 0, 1), leave=1.5)  # timed out, then b was granted
    assert types([gone, b]) == []
    # a's next try came back after its lease (sent at 1.0, 0.5 s) may have lapsed
    lapsed = fair("a", (1.0, 1.01, 0, 1), (1.6, 1.61, 0, 1), (2.5, 2.51, 1, 0), lease=0.5)
    assert types([lapsed, b]) == []
    # renewed in time, a was live all along: b's grant at 2.0 overtook it
    renewed = fair("a", (1.0, 1.01, 0, 1), (1.3, 1.31, 0, 1), (1.6, 1.61, 0, 1), (1.9, 1.91, 0, 1))
    assert types([{**renewed, "lease": 0.5}, b]) == ["fair grant out of arrival order"]
    # a try with no reply (Redis away, taken back) ends what is certain about a
    cut = fair("a", (1.0, 1.01, 0, 1), (1.5, 1.9, -1, 0))
    assert types([cut, b]) == []


def test_a_waiter_whose_try_was_resent_may_have_had_its_turn() -> None:
    # a's try sent at 1.4 lost its reply and was resent (the fifth field): its first send
    # may have been granted, and the grant may have ended by its TTL while a's process was
    # stopped, so the resend queued a again at the back (place 3). b's grant at 1.6 may be
    # the next waiter's turn after a's: not a violation (seed 101 of session 15's runs).
    a = fair("a", (1.0, 1.01, 0, 1), (1.4, 3.2, 0, 3, 1), leave=3.2)
    b = fair("b", (1.1, 1.11, 0, 2), (1.6, 1.61, 1, 0))
    assert types([a, b]) == []
    # the same try answered without a resend: a was refused and kept its place throughout
    a_sure = fair("a", (1.0, 1.01, 0, 1), (1.4, 1.41, 0, 1), (1.8, 3.2, 0, 3), leave=3.2)
    assert types([a_sure, b]) == ["fair grant out of arrival order"]
