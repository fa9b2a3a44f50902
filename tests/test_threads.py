"""The default thread count takes the cores that other processes leave free (a busy machine must not make
training collapse: OpenMP threads sharing a core with another busy process wait for each other)."""

import os
import subprocess
import sys
import time

import pytest
import torch

from tiedlm import runtime


@pytest.mark.parametrize("busy, expected", [(0.0, 2), (0.3, 2), (0.8, 1), (1.4, 1), (3.0, 1)])
def test_default_threads_leaves_the_busy_cores(monkeypatch, busy, expected):
    monkeypatch.delenv("TIEDLM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(runtime, "busy_cores", lambda interval=0.2: busy)
    said = []
    assert runtime.default_threads(said.append) == expected
    assert bool(said) == (expected < 2)  # a warning exactly when other processes hold a core
    if said:
        assert "busy with other processes" in said[0] and "--threads" in said[0]


def test_tiedlm_threads_fixes_the_default_whatever_the_load(monkeypatch):
    """TIEDLM_THREADS (which the test suite sets) fixes ``threads = 0``: the free-core probe is not read."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(runtime, "busy_cores", lambda interval=0.2: 2.0)  # a fully busy machine
    monkeypatch.setenv("TIEDLM_THREADS", "2")
    assert runtime.default_threads() == 2
    monkeypatch.setenv("TIEDLM_THREADS", "junk")  # not a count: the probe decides again
    assert runtime.default_threads() == 1


def test_threads_default_where_the_os_has_no_affinity(monkeypatch):
    """macOS and Windows have no os.sched_getaffinity (nor /proc/stat): ``threads = 0`` takes every core there,
    and the commands that print the machine do not fail."""
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.delenv("TIEDLM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    monkeypatch.setattr(runtime, "_cpu_times", lambda cpus: (0.0, 0.0))  # what a host without /proc/stat reads
    assert runtime.usable_cpus() == {0, 1, 2} and runtime.busy_cores(0.01) == 0.0
    assert runtime.default_threads() == 3
    from tiedlm.selfcheck import describe_device

    assert ", 3 cores, " in describe_device(torch.device("cpu"))


def test_busy_cores_sees_a_spinning_process():
    """Measured, not assumed: a process spinning on this process's cores shows up as about one busy core."""
    cores = os.sched_getaffinity(0)
    idle_before = runtime.busy_cores(0.3)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = runtime.busy_cores(0.5)
    finally:
        spinner.kill()
    assert 0.0 <= idle_before <= len(cores) + 0.01
    assert busy >= min(idle_before + 0.5, len(cores) - 0.2)  # one more busy core, or all of them already


def test_other_load_leaves_out_this_process_own_work():
    """What ``reproduce --dry-run`` says of a busy machine is other processes' load while it timed its steps: this
    process working a core meanwhile is not another process (a load average counts it, and what ran before)."""
    idle_before = runtime.busy_cores(0.3)
    others = runtime.OtherLoad()
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:  # this process keeps one core busy
        pass
    measured = others.cores()
    idle_after = runtime.busy_cores(0.3)  # the others' load on both sides: a background that changes is not this
    assert measured <= max(idle_before, idle_after) + 0.5  # counting its own core would add about one
