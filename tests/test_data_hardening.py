"""Break-it follow-ups of issue 11 on imports, exports and the command line: importers read
only regular files, export options are honoured or refused, a closed stdout is one line,
ratings JSONL round trips byte for byte, an empty --model-filter is refused, and the real
importers refuse over-long names and conflicting duplicates with FILE:LINE."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rate_helpers import child_env  # noqa: E402

from judgecal.errors import InputError  # noqa: E402
from judgecal.importers import records  # noqa: E402

IMPORTS = [("jsonl", ["--kind", "responses", "--task-family", "f"]), ("csv", ["--kind", "responses", "--task-family", "f"]),
           ("autoj", []), ("pandalm", []), ("judgebench", []), ("alpaca-eval", [])]


# ------------------------------------------------------------------ case 3: only regular files
@pytest.mark.parametrize("command,extra", IMPORTS)
def test_import_of_a_device_is_refused_before_reading(tmp_path, run_cli, command, extra):
    r = run_cli("--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import", command, "/dev/zero", *extra)
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: /dev/zero: is a device, not a regular file: judgecal reads only regular files"


def test_import_of_a_fifo_without_writer_does_not_wait(tmp_path):
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "judgecal", "--database-url", f"sqlite:///{tmp_path / 'x.db'}", "import",
                           "jsonl", str(fifo), "--kind", "responses", "--task-family", "f"],
                          env=child_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {fifo}: is a FIFO (named pipe), not a regular file: judgecal reads only regular files"


def test_socket_symlink_and_size_limit(tmp_path, monkeypatch):
    sock_path = tmp_path / "s.jsonl"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(InputError, match=r"s\.jsonl: is a socket, not a regular file"):
            records.read_text(sock_path)
    link = tmp_path / "link.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputError, match=r"link\.jsonl: is a device, not a regular file"):
        records.read_text(link)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * 101)
    monkeypatch.setattr(records, "MAX_FILE_BYTES", 100)
    with pytest.raises(InputError, match=r"big\.jsonl: the file has 101 bytes; judgecal reads files of at most 100 bytes"):
        records.read_text(big)
    ok = tmp_path / "ok.csv"
    ok.write_bytes("\ufeffa,b\r\n\"x\r\ny\",2\r\n".encode("utf-8"))
    assert records.read_text(ok) == "a,b\r\n\"x\r\ny\",2\r\n"  # BOM dropped, line ends kept
