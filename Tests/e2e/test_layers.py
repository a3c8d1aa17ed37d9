"""build/check-layers holds Package.swift's layering: a file importing a module its target does not
declare fails the check; declaring it passes."""

import subprocess
from pathlib import Path

CHECK = Path(__file__).resolve().parents[2] / "build" / "check-layers"

PACKAGE = """// swift-tools-version:6.0
import PackageDescription
let package = Package(
  name: "probe",
  targets: [
    .target(name: "Engine"),
    .target(name: "App", dependencies: [%s]),
  ]
)
"""


def probe(tmp_path: Path, app_dependencies: str) -> subprocess.CompletedProcess:
    (tmp_path / "Package.swift").write_text(PACKAGE % app_dependencies)
    for name, text in [("Engine", "import App\npublic let x = 1\n"), ("App", "import Engine\n")]:
        (tmp_path / "Sources" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "Sources" / name / f"{name}.swift").write_text(text)
    return subprocess.run([str(CHECK), str(tmp_path)], capture_output=True, text=True, timeout=120)


def test_an_undeclared_import_fails_and_names_the_file(tmp_path):
    result = probe(tmp_path, '"Engine"')
    assert result.returncode == 1
    assert "Sources/Engine/Engine.swift: imports App, which Engine does not depend on" in result.stdout
    assert "App.swift" not in result.stdout  # App declares Engine


def test_declared_imports_pass(tmp_path):
    probe(tmp_path, '"Engine"')
    (tmp_path / "Sources" / "Engine" / "Engine.swift").write_text("public let x = 1\n")  # no import of App
    result = subprocess.run([str(CHECK), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_this_repository_holds_its_layering():
    result = subprocess.run([str(CHECK)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
