"""Process helpers for the tests of the forked parse workers (Linux /proc)."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> set[int]:
    """The ids of the processes whose parent is ``pid``."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out
