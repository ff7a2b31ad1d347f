"""constraints.txt as the lock of an environment: every package hf_cse and its extras install, pinned.

Usage (in a venv where ``pip install -e ".[EVERY EXTRA]"`` ran and the suite passed, as ``.ci/newest_versions.sh
--lock`` does):

    python .ci/lock_constraints.py            # write constraints.txt
    python .ci/lock_constraints.py --check    # exit 1, naming each difference, if the installed set is not the lock

The packages are found by following hf_cse's requirements (with the extras asked for) through each installed
package's own metadata, markers evaluated for this Python and platform: what pip installed for them, not whatever
else the venv holds. A version's local label is left out (``torch==2.13.0``, not ``+cpu``), so that the pin also
takes a CUDA build of the same release.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO_ROOT / "constraints.txt"
HEADER = """\
# The lock of the environment CI last tested green: every package `pip install -e ".[EXTRAS]"` installs, for every
# extra, direct and transitive (Python 3.11, Linux x86_64). Written by `bash .ci/newest_versions.sh --lock` (the newest
# releases setup.cfg allows, the suite run on them, then `python .ci/lock_constraints.py`): do not edit by hand.
# torch is the CPU wheel on the team's machines; to keep the torch you have, leave out `-c constraints.txt`.
"""


def locked_versions(extras: list[str]) -> dict[str, str]:
    """``{canonical name: installed public version}`` of every package ``hf_cse[extras]`` requires, transitively.

    Raises ``SystemExit`` naming a required package that is not installed (the lock would miss it)."""
    pending = [(Requirement(f"hf_cse[{','.join(extras)}]"), "the command line")]
    versions: dict[str, str] = {}
    followed: set[tuple[str, frozenset[str]]] = set()
    while pending:
        requirement, needed_by = pending.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in followed:
            continue
        followed.add((name, frozenset(requirement.extras)))
        try:
            distribution = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            sys.exit(f"{requirement.name} (needed by {needed_by}) is not installed: install every extra first.")
        if name != "hf-cse":
            versions[name] = Version(distribution.version).public
        for line in distribution.requires or []:
            nested = Requirement(line)
            wanted = [{"extra": extra} for extra in ("", *requirement.extras)]
            if nested.marker is None or any(nested.marker.evaluate(environment) for environment in wanted):
                pending.append((nested, name))
    return versions


def every_extra() -> list[str]:
    """The extras hf_cse declares (setup.cfg's ``extras_require``), as installed metadata lists them."""
    return sorted(importlib.metadata.metadata("hf_cse").get_all("Provides-Extra") or [])


def read_pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    """``{canonical name: version}`` of the ``name==version`` lines of a constraints file (comments skipped)."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def differences(installed: dict[str, str], pins: dict[str, str]) -> list[str]:
    """One line for each installed package that the pins lack or pin at another version."""
    return [
        f"{name} {version} is installed, constraints.txt pins {pins[name]}"
        if name in pins
        else f"{name} {version} is installed, constraints.txt does not pin it"
        for name, version in sorted(installed.items())
        if pins.get(name) != version
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare the installed set with constraints.txt")
    parser.add_argument("--extras", nargs="*", help="the extras to follow (default: every extra)")
    args = parser.parse_args(argv)
    installed = locked_versions(every_extra() if args.extras is None else args.extras)
    if args.check:
        lines = differences(installed, read_pins())
        print("\n".join(lines) or f"constraints.txt pins all {len(installed)} installed packages.")
        return 1 if lines else 0
    body = "".join(f"{name}=={version}\n" for name, version in sorted(installed.items()))
    CONSTRAINTS.write_text(HEADER + body, encoding="utf-8")
    print(f"constraints.txt: {len(installed)} packages pinned.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
