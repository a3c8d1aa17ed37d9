"""Writes the bench's shell sources: the repository's Public/ plus a deterministic ~60 KB script
(bundle.js, plausible JavaScript with realistic redundancy), referenced from index.html so that
`band-edge shell build` fingerprints it like any other asset."""

import random
import shutil
import sys
from pathlib import Path

source, target = Path(sys.argv[1]), Path(sys.argv[2])
shutil.copytree(source, target)
rng = random.Random(20261130)
words = ["lesson", "school", "teacher", "pupil", "role", "session", "invoice", "room", "term", "week",
         "instrument", "grade", "exam", "practice", "attendance", "schedule", "account", "member"]
parts = ["\"use strict\";\n"]
n = 0
while sum(map(len, parts)) < 60_000:
    a, b, c = rng.sample(words, 3)
    n += 1
    parts.append(
        f"export function {a}{b.title()}{n}(input, options = {{}}) {{\n"
        f"  const {c}s = (input.{a}s || []).filter((x) => x.{b}Id === options.{b}Id);\n"
        f"  if ({c}s.length === 0) return {{ ok: false, reason: \"no {c} for {a} {rng.randrange(10**6)}\" }};\n"
        f"  return {{ ok: true, total: {c}s.reduce((sum, x) => sum + (x.{c}Count ?? {rng.randrange(100)}), 0) }};\n"
        "}\n")
(target / "bundle.js").write_text("".join(parts))
index = target / "index.html"
index.write_text(index.read_text().replace('<script src="/app.js" defer></script>',
                                           '<script src="/app.js" defer></script>\n  <script src="/bundle.js" defer></script>'))
