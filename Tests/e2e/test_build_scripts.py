"""The build scripts fail loudly: a failed build never serves or tests the binary an earlier build left."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from edge import ROOT


def test_a_failed_release_build_stops_the_script_even_with_an_old_binary_present():
    sandbox = Path(tempfile.mkdtemp(prefix="band-edge-e2e-"))
    try:
        tools = sandbox / "bin"
        tools.mkdir()
        # A swift that fails the way a compile error does: some output, then a non-zero exit.
        fake = tools / "swift"
        fake.write_text("#!/bin/sh\necho 'error: no such module' >&2\nexit 1\n")
        fake.chmod(0o755)
        old = sandbox / ".build" / "release" / "band-edge"
        old.parent.mkdir(parents=True)
        old.write_text("#!/bin/sh\necho stale\n")
        old.chmod(0o755)
        script = (f"cd {sandbox}; source {ROOT}/build/lib/common.sh; export PATH={tools}:$PATH; "
                  "ensure_build_packages() { :; }; build_release; echo served-the-old-binary")
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                                env={"PATH": os.environ["PATH"]})
        assert result.returncode != 0
        assert "served-the-old-binary" not in result.stdout
        assert "the release build failed" in result.stderr
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)
