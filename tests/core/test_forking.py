"""The forked helper process: what it sends arrives in order, its failures and its end are told apart."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from graphcmp.core.forking import Forked, Sender, can_fork_aside

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _send_all(answer: Sender, values: list) -> None:
    for value in values:
        answer.send(value)


def _raise(answer: Sender) -> None:
    answer.send("before")
    raise ValueError("the forked process failed")


def _sleep(answer: Sender) -> None:
    time.sleep(60)


def test_what_the_process_sends_arrives_in_order_then_none():
    big = np.arange(300_000, dtype=np.float64)  # 2.4 MB: more than a pipe holds at once
    forked = Forked(_send_all, [("run",), big, None, {"k": "v"}])
    assert forked.receive() == ("run",)
    np.testing.assert_array_equal(forked.receive(), big)
    assert forked.receive() is None  # a None sent
    assert forked.receive() == {"k": "v"}
    assert forked.receive() is None  # the process ended
    assert forked.join() == 0
    forked.stop()


def test_a_process_that_raises_ends_with_code_1_and_sends_nothing_more(capfd):
    forked = Forked(_raise)
    assert forked.receive() == "before"
    assert forked.receive() is None
    assert forked.join() == 1
    assert "the forked process failed" in capfd.readouterr().err
    forked.stop()


def test_stop_kills_a_running_process_and_has_sent_tells_when_receive_would_not_wait():
    forked = Forked(_sleep)
    assert not forked.has_sent()
    forked.stop()
    assert forked.exitcode == -9


def test_has_sent_once_something_is_in_the_pipe():
    forked = Forked(_send_all, ["x"])
    deadline = time.monotonic() + 120
    while not forked.has_sent() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert forked.has_sent()
    assert forked.receive() == "x"
    forked.stop()


def test_fork_aside_needs_two_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert not can_fork_aside()
