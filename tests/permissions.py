"""Running a command where file permissions hold, even for root.

Root reads and writes files whatever their mode, so a test of a mode-000 input or a read-only
directory proves nothing as root -- unless the command runs without the two capabilities that
override permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): ``setpriv`` drops them from the
bounding set before it runs the command.  Where even that cannot be done the test skips, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TRACEQ = [sys.executable, "-c", "from traceq.cli import main; main()"]
"""The ``traceq`` command of this interpreter."""


def without_permission_override(scratch: Path) -> list[str]:
    """A command prefix under which file permissions hold (empty for a normal user); skips the test
    where they cannot be made to hold.  ``scratch`` is a folder for the probe file."""
    if sys.platform == "win32":
        pytest.skip("POSIX file permissions")
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root, and without setpriv file permissions cannot be enforced")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    probe = scratch / ".permission-probe"
    probe.write_text("x")
    probe.chmod(0)
    try:
        if subprocess.run([*prefix, "cat", str(probe)], capture_output=True, check=False).returncode == 0:
            pytest.skip("file permissions are not enforced here, even without the override capabilities")
    finally:
        probe.unlink()
    return prefix


def run_unprivileged(command: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` (e.g. ``[*TRACEQ, "info", "t.json"]``) run in ``cwd`` where permissions hold."""
    prefix = without_permission_override(cwd)
    return subprocess.run([*prefix, *command], capture_output=True, text=True, cwd=cwd, check=False)
