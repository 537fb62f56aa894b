"""The wheel's build step for report.html's JavaScript.

report.html carries plotly.js inline so that it opens offline.  plotly's cartesian partial
bundle (every trace type clusterbench draws, 1.5 MB) keeps the page near 0.7 MB, where the full
bundle that the plotly package ships (4.8 MB) makes it 2 MB.  The partial bundle comes from the
npm registry, pinned with its checksum in package-lock.json; this hook installs it with
``npm ci`` when it is not installed yet and copies it, with its license, into
``clusterbench/report/assets/``, which the wheel (and an editable install) then holds.

Without npm, or offline, the build goes on with a warning: the page then carries the full
bundle (see ``clusterbench.report.html_assets.plotly_source``).  CLUSTERBENCH_NO_NPM=1 skips
npm on purpose.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "plotly.js-cartesian-dist-min"
BUNDLE = "plotly-cartesian.min.js"
ASSETS = Path("src", "clusterbench", "report", "assets")


def _wanted(root: Path) -> str:
    return str(json.loads((root / "package.json").read_text())["dependencies"][PACKAGE])


def _installed(root: Path) -> str | None:
    manifest = root / "node_modules" / PACKAGE / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


class ReportAssetsHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        if not (root / "package.json").is_file():
            return  # a build from a tree without it (nothing to install)
        wanted = _wanted(root)
        if _installed(root) != wanted and not os.environ.get("CLUSTERBENCH_NO_NPM"):
            npm = shutil.which("npm")
            if npm:
                try:
                    subprocess.run(
                        [
                            npm,
                            "ci",
                            "--ignore-scripts",
                            "--no-audit",
                            "--no-fund",
                            "--loglevel",
                            "error",
                        ],
                        cwd=root,
                        check=False,
                        timeout=300,
                    )
                except (OSError, subprocess.TimeoutExpired) as exc:
                    self.app.display_warning(f"npm ci failed: {exc}")
        source = root / "node_modules" / PACKAGE
        if _installed(root) != wanted:
            self.app.display_warning(
                f"{PACKAGE} {wanted} is not installed (npm ci): report.html will carry the full "
                "plotly.js bundle that the plotly package ships (2 MB pages, not 0.7 MB)"
            )
            return
        assets = root / ASSETS
        assets.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / BUNDLE, assets / BUNDLE)
        shutil.copyfile(source / "LICENSE", assets / f"{BUNDLE}.LICENSE")
        (assets / f"{BUNDLE}.version").write_text(f"{PACKAGE} {wanted}\n")
