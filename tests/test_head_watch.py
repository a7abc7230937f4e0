"""The driver's watch on its Ray head (mtc.sweep.head_watch), against a listener that answers as
a gRPC server does (the HTTP/2 preface answered with a SETTINGS frame) and then goes away. The
watch on a real head lost mid-study: tests/test_netns_cluster.py."""

from __future__ import annotations

import socket
import threading
import time

from mtc.store.preflight import HTTP2_EMPTY_SETTINGS, HTTP2_PREFACE
from mtc.sweep.head_watch import head_answers, head_lost_line, watching_head


class FakeHead:
    """A loopback listener that answers each connection's HTTP/2 preface with an empty SETTINGS
    frame (``grpc=True``) or with nothing (closes it), until ``close``."""

    def __init__(self, grpc: bool = True):
        self.grpc = grpc
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed
                return
            with connection:
                received = b""
                while len(received) < len(HTTP2_PREFACE) + len(HTTP2_EMPTY_SETTINGS):
                    chunk = connection.recv(64)
                    if not chunk:
                        break
                    received += chunk
                if self.grpc:
                    connection.sendall(HTTP2_EMPTY_SETTINGS)

    def close(self):
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
        self.listener.close()
        self.thread.join(timeout=5)


def test_a_head_that_answers_then_goes_away_is_reported_lost_once_after_the_set_time():
    head = FakeHead()
    assert head_answers(head.address, timeout=1.0)
    lost, at = [], []
    with watching_head(head.address, lost_after=1.0, probe_every=0.1, on_lost=lambda line: (lost.append(line),
                                                                                            at.append(time.monotonic()))):
        time.sleep(1.5)  # longer than lost_after: the head answered every probe
        assert lost == []
        head.close()
        gone = time.monotonic()
        while not lost and time.monotonic() - gone < 10:
            time.sleep(0.05)
        time.sleep(0.5)  # no second call
    assert len(lost) == 1, lost
    assert 0.9 <= at[0] - gone <= 3.0, at[0] - gone
    assert lost[0].startswith(f"error: the Ray head at {head.address} has not answered for ")
    assert "run the same command to resume" in lost[0] and "\n" not in lost[0]


def test_a_port_that_listens_but_is_not_a_gcs_does_not_count_as_the_head_answering():
    other = FakeHead(grpc=False)
    try:
        assert not head_answers(other.address, timeout=1.0)
        lost = []
        with watching_head(other.address, lost_after=0.5, probe_every=0.1, on_lost=lost.append):
            deadline = time.monotonic() + 10
            while not lost and time.monotonic() < deadline:
                time.sleep(0.05)
        assert len(lost) == 1
    finally:
        other.close()


def test_a_head_that_keeps_answering_is_never_reported_and_the_watch_ends_with_its_block():
    head = FakeHead()
    try:
        lost = []
        with watching_head(head.address, lost_after=0.3, probe_every=0.05, on_lost=lost.append):
            time.sleep(1.0)
        ended = time.monotonic()
        assert lost == []
        assert not any(t.name == "mtc-head-watch" for t in threading.enumerate())
        assert time.monotonic() - ended < 1.0
    finally:
        head.close()


def test_the_line_is_one_line_naming_the_address_and_the_time():
    line = head_lost_line("10.0.0.1:6379", 30.4)
    assert line == ("error: the Ray head at 10.0.0.1:6379 has not answered for 30 s (its host lost, or its Ray "
                    "stopped); the driver stopped and left its runs as they were; once the head is back and the "
                    "workers have joined it again (ray start), run the same command to resume: finished trials are "
                    "kept, the others run again")
