"""The release binary's layout (docs/architecture.md, "The binary"): its relocations are packed
(RELR), it needs neither libpq nor libcurl, and the functions build/lib/text-order.txt lists
(those a server runs) are placed ahead of band-edge's other functions."""

import re
import statistics
import subprocess

from edge import ROOT, binary

OWN_MODULES = ("4Edge", "5Store", "8Accounts", "9ClientAPI", "7Gateway", "10Deployment", "5Shell", "9LinkAssoc")


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args, str(binary())], capture_output=True, text=True, check=True).stdout


def test_relocations_are_packed_and_small():
    sections = {fields[1]: int(fields[5], 16) for fields in
                (re.sub(r"^\s*\[\s*\d+\]", "[]", line).split() for line in readelf("-S").splitlines())
                if len(fields) > 5 and fields[0] == "[]"}
    assert ".relr.dyn" in sections, sorted(sections)
    assert sections.get(".rela.dyn", 0) < 64 * 1024, sections.get(".rela.dyn")


def test_neither_libpq_nor_libcurl_is_needed():
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("-d"))
    assert needed and not [name for name in needed if name.startswith(("libpq", "libcurl"))], needed


def test_the_functions_a_server_runs_come_first():
    listed = set((ROOT / "build" / "lib" / "text-order.txt").read_text().split())
    assert len(listed) > 1000
    symbols = subprocess.run(["nm", "--defined-only", str(binary())], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    first, rest = [], []
    for line in symbols:
        address, kind, name = line.split(maxsplit=2)
        if kind not in "tT" or not name.startswith(tuple("$s" + module for module in OWN_MODULES)):
            continue
        (first if name in listed else rest).append(int(address, 16))
    assert len(first) > 300 and len(rest) > 300, (len(first), len(rest))
    # Not every listed function can lead (some share a section with unlisted ones), but most do.
    assert statistics.median(first) < sorted(rest)[len(rest) // 10], "listed functions are not placed first"
