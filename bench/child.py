"""A child process, measured: wall seconds, peak RSS, and CPU seconds in all and from the moment
a start marker shows (scoring begins: a file appears, a log line is written).

CPU seconds are what stays meaningful on a machine shared with other jobs: there, wall time
counts the time other processes had the cores. (With several threads, llama.cpp's threads
also spin while they wait for each other, which counts as CPU time: CPU seconds / threads is
then an upper bound on the wall time the work takes on idle cores.)
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Child:
    returncode: int
    wall_s: float
    cpu_s: float  # user + system, the whole process
    cpu_after_start_s: float | None  # from the first poll that saw the start marker; None if never seen
    peak_rss: int  # bytes (ru_maxrss)
    stdout: str
    stderr: str


def proc_cpu(pid: int) -> float | None:
    """user + system seconds of a running process (all its threads), from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def run_child(cmd: list[str], started: Callable[[str], bool], env: dict | None = None, poll: float = 0.1) -> Child:
    """Run ``cmd``; ``started(stderr so far)`` is polled every ``poll`` seconds until it holds,
    and the child's CPU seconds at that moment are subtracted from its total."""
    with tempfile.TemporaryFile("w+") as out, tempfile.NamedTemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True)
        at_start = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if at_start is None and started(Path(err.name).read_text(errors="replace")):
                at_start = proc_cpu(proc.pid)
            time.sleep(poll)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        return Child(proc.returncode, wall, cpu, None if at_start is None else cpu - at_start,
                     usage.ru_maxrss * 1024, out.read(), err.read())
