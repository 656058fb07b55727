"""``leasefence run`` under ``mpiexec`` never alters a file that is not a journal (issue 17)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi

BIN = Path(sys.executable).parent
USERS = b"alice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\n"


def test_run_refuses_a_journal_path_holding_another_file_and_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    # issue 17: `mpiexec -n 2 leasefence run --work 3 --worker trivial --journal users.txt`
    (tmp_path / "users.txt").write_bytes(USERS)
    cmd = [str(BIN / "mpiexec"), "-n", "2", str(BIN / "leasefence"), "run"]
    cmd += ["--work", "3", "--worker", "trivial", "--journal", "users.txt"]
    proc = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False
    )
    assert proc.returncode != 0
    assert "users.txt is not a work lease journal" in proc.stdout + proc.stderr
    assert (tmp_path / "users.txt").read_bytes() == USERS
