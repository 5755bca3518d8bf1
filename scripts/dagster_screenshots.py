"""Screenshots of the Dagster UI for the README, made from scratch: a run's lineage, a STALE partition, a failed check.

    .venv/bin/python scripts/dagster_screenshots.py --out docs/img

Builds a fresh Baton home and DAGSTER_HOME in a temporary directory
(`pipelines.analyst_scene`: a re-verified run, a run with a new candidate, a
run whose evidence names another hash), starts a real dagster-webserver over
them on loopback, and drives headless system Chromium through the analyst's
pages (`pipelines.analyst_ui`). Each page is held until the text it must show
is there. The webserver is stopped (its whole process group) and the
temporary directory removed at the end, unless `--keep` names a directory to
build in instead.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a file: the project's packages come from the checkout

from pipelines import analyst_ui as ui  # noqa: E402
from pipelines.analyst_scene import BROKEN_RUN, LINEAGE_RUN, STALE_RUN, build_scene, start_webserver  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img", help="where the PNGs go")
    parser.add_argument("--keep", type=Path, help="build the scene in this (new) directory and keep it")
    args = parser.parse_args()
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep {args.keep} exists already; name a new directory")
    root = args.keep or Path(tempfile.mkdtemp(prefix="baton-dagster-ui-"))
    try:
        scene = build_scene(root)
        print(f"scene: {LINEAGE_RUN} (re-verified), {STALE_RUN} (new candidate), {BROKEN_RUN} (forged evidence)")
        procs, url = start_webserver(scene, root / "logs")
        try:
            with ui.browser_page() as page:
                ui.dismiss_welcome(page, url)
                shots = (
                    (ui.LINEAGE, lambda: ui.open_lineage(page, url)),
                    (ui.RUN_VERSIONS, lambda: ui.open_run_versions(page, url, LINEAGE_RUN)),
                    (ui.STALE, lambda: ui.open_stale(page, url, STALE_RUN)),
                    (ui.FAILED_CHECK, lambda: ui.open_failed_check(page, url)),
                )
                for view, open_view in shots:
                    open_view()
                    print(f"wrote {ui.shoot(page, args.out / view.image)} ({view.name})")
        finally:
            procs.stop_all()
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
