"""A stderr that stops being read must not stall the process (against the real binary).

Every log line goes to stderr, which in a Pod is a pipe the container runtime reads and
elsewhere whatever the parent made it. A reader that stops (a stopped log agent, a parent that
never reads its child's stderr) fills the pipe. The contract asserted here:
- requests keep being answered, each within the scheduling margin, while the pipe is full
  and thousands of access-log lines cannot be written: no thread waits for stderr;
- the lines that could not wait are counted (topogate_log_lines_dropped_total) and, once the
  reader reads again, a line says how many were dropped where they went missing; the counts
  agree;
- SIGTERM ends the process while nothing reads its stderr, within the shutdown's bounds and
  the log's own (2 s for the last lines), with status 0.

Against the binary before the fix (each line written with write(2) by the thread that logged
it), the first request whose line found the pipe full never got its answer."""

import fcntl
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

from conftest import SCHEDULING_MARGIN_S, default_config, sanitizer_report, wait_for
from hostile_support import client_context

F_SETPIPE_SZ = 1031
LOG_EXIT_FLUSH_S = 2.0  # server/log.hpp: log_exit_flush


class StderrPipe:
    """A topogate whose stderr is a pipe this test reads only when it chooses to."""

    def __init__(self, binary, d, config):
        (d / "topogate.yaml").write_text(config)
        self.r, w = os.pipe()
        fcntl.fcntl(w, F_SETPIPE_SZ, 4096)  # one page: full after a dozen lines
        self.proc = subprocess.Popen([binary, "serve", "--config", str(d / "topogate.yaml"), "--port", "0"],
                                     stdout=subprocess.DEVNULL, stderr=w)
        os.close(w)
        self.text = b""
        self.reader = None
        # The listening line (and what comes before it) is read; then nothing until drain().
        deadline = time.monotonic() + 15 * SCHEDULING_MARGIN_S
        while b'"msg":"listening"' not in self.text:
            assert time.monotonic() < deadline, f"no listening line:\n{self.text.decode(errors='replace')}"
            chunk = os.read(self.r, 4096)
            assert chunk, f"topogate exited:\n{self.text.decode(errors='replace')}"
            self.text += chunk
        line = next(l for l in self.text.splitlines() if b'"msg":"listening"' in l)
        self.port = json.loads(line)["port"]

    def drain(self):
        """Reads the pipe from now on, on a thread of its own, until the process closes it."""
        def read():
            while chunk := os.read(self.r, 65536):
                self.text += chunk
        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()

    def lines(self):
        out = []
        for raw in self.text.splitlines():
            try:
                out.append(json.loads(raw))
            except ValueError:
                pass
        return out

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.reader is None:
            self.drain()
        self.reader.join(timeout=10)
        os.close(self.r)
        # Under the sanitizer presets a report goes to stderr: this pipe.
        report = sanitizer_report(self.text.decode(errors="replace"))
        assert not report, "sanitizer report from topogate:\n" + report


def dropped_metric(conn):
    conn.request("GET", "/metrics")
    res = conn.getresponse()
    body = res.read().decode()
    assert res.status == 200, body
    m = re.search(r"^topogate_log_lines_dropped_total (\S+)$", body, re.M)
    assert m, "no topogate_log_lines_dropped_total in /metrics"
    return float(m.group(1))


def test_a_stderr_nobody_reads_stalls_no_request(binary, pki, tmp_path):
    d = tmp_path / "srv"
    d.mkdir()
    srv = StderrPipe(binary, d, default_config(pki, d))
    try:
        conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=client_context(pki),
                                           timeout=10 * SCHEDULING_MARGIN_S)
        assert dropped_metric(conn) == 0
        # Each answer logs an access line (~300 bytes at info): 6,000 of them are 1.8 MB, past
        # the pipe (4 KiB) and the log's queue (1 MiB).
        slowest = 0.0
        for i in range(6000):
            t = time.monotonic()
            conn.request("GET", f"/no-such-path-{i}")
            res = conn.getresponse()
            res.read()
            assert res.status == 404
            slowest = max(slowest, time.monotonic() - t)
        assert slowest < SCHEDULING_MARGIN_S, f"a request waited {slowest:.2f} s"
        dropped = dropped_metric(conn)
        assert dropped > 0, "1.8 MB of lines fit a 4 KiB pipe and a 1 MiB queue?"
        # The reader is back: what was queued comes out, then, with the next line that fits, the
        # note of the lines missing before it. A line pushed before the queue has room again is
        # dropped too, and noted with the next: each try sends one more request.
        srv.drain()

        def noted():
            return [l for l in srv.lines() if l.get("msg") == "log lines dropped: stderr did not take them"]

        def all_noted():
            conn.request("GET", "/no-such-path-after")
            conn.getresponse().read()
            notes = noted()
            return notes and sum(l["dropped"] for l in notes) == dropped_metric(conn)
        # Settled: the reader reads, nothing more is dropped, and the notes count every drop.
        wait_for(all_noted, timeout=10 * SCHEDULING_MARGIN_S, interval=0.2,
                 what="notes that count every dropped line")
        assert dropped_metric(conn) >= dropped
        assert all(l["level"] == "warn" for l in noted())
        conn.close()
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=30 * SCHEDULING_MARGIN_S) == 0
    finally:
        srv.close()


def with_lines_waiting(binary, pki, tmp_path):
    """A topogate with no shutdown delay and a short shutdown timeout (what is left is the log's
    own bound), after 200 requests: 60 KB of lines, the pipe full and most of them queued."""
    d = tmp_path / "srv"
    d.mkdir()
    srv = StderrPipe(binary, d, default_config(
        pki, d, extra="limits: {shutdownDelay: 0s, shutdownTimeout: 2s}"))
    try:
        conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=client_context(pki),
                                           timeout=10 * SCHEDULING_MARGIN_S)
        for i in range(200):
            conn.request("GET", f"/no-such-path-{i}")
            conn.getresponse().read()
        conn.close()
    except BaseException:
        srv.close()
        raise
    return srv


def test_sigterm_ends_the_process_while_nobody_reads_its_stderr(binary, pki, tmp_path):
    srv = with_lines_waiting(binary, pki, tmp_path)
    try:
        t = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=30 * SCHEDULING_MARGIN_S) == 0
        took = time.monotonic() - t
        assert took < 2.0 + LOG_EXIT_FLUSH_S + SCHEDULING_MARGIN_S, f"exit took {took:.2f} s"
    finally:
        srv.close()


def test_lines_queued_at_exit_reach_a_reader_that_comes_back_within_the_flush(binary, pki, tmp_path):
    srv = with_lines_waiting(binary, pki, tmp_path)
    try:
        srv.proc.send_signal(signal.SIGTERM)
        # The process is exiting and waits for its queued lines; the reader comes back within
        # that wait, and every line gets out: the last request's, and the shutdown's own last.
        time.sleep(LOG_EXIT_FLUSH_S / 4)
        srv.drain()
        assert srv.proc.wait(timeout=30 * SCHEDULING_MARGIN_S) == 0
        srv.reader.join(timeout=10)
        requests = [l for l in srv.lines() if l.get("msg") == "request" and l.get("status") == 404]
        assert len(requests) == 200, f"{len(requests)} of 200 request lines written"
        assert srv.lines()[-1]["msg"] == "stopped"
        assert not [l for l in srv.lines() if l.get("msg", "").startswith("log lines dropped")]
    finally:
        srv.close()
