"""A download that waits for another process's (the same partial file held) says so through its caller's notify
(the run's hooks.notify, reaching models via ref.fetch -> sources.Hub.fetch -> hub.pull_model -> hub_pull.pull ->
temps.hold_partial's on_wait), never by printing: only cli/ and console/ print (ARCHITECTURE.md)."""

from __future__ import annotations

import os
import threading
import time

from test_hub_resume import BODY, SHA, Hub, fake_hub, spec  # noqa: F401  (fake_hub: the fixture)

from abricot_local.models import hub, hub_pull, resume
from abricot_local.models.temps import hold_partial


def test_a_pull_waiting_for_another_tells_notify_and_prints_nothing(fake_hub, capfd):  # noqa: F811
    blob = fake_hub / "blobs" / SHA
    blob.parent.mkdir(parents=True)
    fd, _, _ = hold_partial(blob, resume.key(blob.name), suffix=hub_pull.INCOMPLETE)  # another pull, now
    said, done = [], []
    worker = threading.Thread(target=lambda: done.append(hub.pull_model(spec(), progress=False, notify=said.append)))
    worker.start()
    try:
        deadline = time.monotonic() + 5
        while not any("another process" in line for line in said) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        os.close(fd)  # the other pull stops: this one goes on
    worker.join(5)
    assert done and done[0].read_bytes() == BODY
    waits = [line for line in said if "another process is downloading this file now" in line]
    assert len(waits) == 1 and "waiting for it" in waits[0]
    assert capfd.readouterr().err == ""  # the library printed nothing
