"""Screenshots of the MLflow UI on a sweep's store, as a person opens it (headless Chromium).

    python benchmarks/mlflow_ui_screenshots.py --store sqlite:///mlflow.db --out docs/results/ui

Starts ``mlflow server`` on the store (loopback, a free port), finds the newest finished sweep,
and saves what Debian's ``chromium --headless=new`` renders (with a virtual-time budget, so
that the single-page app has drawn) for: the experiment as it opens, the runs table, the
runs and trials links a sweep prints (``runs_link``: the experiment's sweeps view, a row per
sweep with its score; ``trials_link``: the sweep's trials view; they name the server through
MTC_MLFLOW_UI, as they would a user's ``mlflow ui --port``), the parent run (its
description is the report), one child run, its CSV artifact preview (a sweep run with
``mlflow.readable_trial_files=true`` has one; by default a trial's only artifact is
``trial.npz``, which MLflow does not preview, and that shot is skipped), its "Model metrics"
tab (a 1600 x 9000 window: the ``objective`` section with the trace is far down) and the
sweep's runs in chart mode (filtered on the parent and sorted by accuracy, so that MLflow
lists the child runs instead of folding them under the parent). Chart cards
draw once Chromium reports them on screen, which headless Chromium sometimes never does
(3 of 16 shots stayed spinners); ``--run-all-compositor-stages-before-draw`` is set, and a
shot that still shows spinners can simply be taken again.
The REST side of the same checks runs in CI (tests/test_sweep.py); this script is for the
eye and needs chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from mtc.stack.loopback import free_port, wait_for_port
from mtc.store import tracking


def screenshot(url: str, path: Path, width: int = 1600, height: int = 1000) -> None:
    """Save what headless Chromium renders at ``url`` after 20 s of virtual time."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--run-all-compositor-stages-before-draw",
                        f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        "--virtual-time-budget=20000", f"--screenshot={path}", url],
                       check=True, capture_output=True, timeout=120)


def newest_sweep(client) -> tuple[str, str, str, str | None]:
    """(experiment id, parent run id, one finished child run id, that child's first CSV artifact
    or None) of the newest finished sweep."""
    experiment = client.get_experiment_by_name("mtc")
    parents = client.search_runs([experiment.experiment_id],  # only a sweep's parent run has its key
                                 f"attributes.status = 'FINISHED' and tags.`{tracking.SWEEP_KEY_TAG}` LIKE '%'",
                                 order_by=["attributes.start_time DESC"], max_results=1)
    if not parents:
        sys.exit("error: the store has no finished sweep")
    parent = parents[0].info.run_id
    child = tracking.find_runs(client, experiment.experiment_id, **{tracking.PARENT_TAG: parent})[0].info.run_id
    csv = next((f.path for f in client.list_artifacts(child) if f.path.endswith(".csv")), None)
    return experiment.experiment_id, parent, child, csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="sqlite:///mlflow.db")
    parser.add_argument("--out", default="outputs/ui")
    args = parser.parse_args()
    if not shutil.which("chromium"):
        sys.exit("error: needs Debian's chromium (apt-get install chromium)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    experiment, parent, child, csv = newest_sweep(tracking.client_for(args.store))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", args.store,
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                              env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    base = f"http://127.0.0.1:{port}/#/experiments/{experiment}"
    children = f"tags.{tracking.PARENT_TAG} = '{parent}'"
    view = f"?workflowType={tracking.UI_WORKFLOW}"  # as the sweep prints its links
    os.environ[tracking.UI_ADDRESS_ENV] = f"http://127.0.0.1:{port}"  # the printed links name this server
    runs_link, _, trials_link = re.findall(r": (http\S+)", tracking.links(args.store, experiment, parent, "acc/mean"))
    pages = {"experiment_plain": base, "experiment": f"{base}{view}", "runs_table": f"{base}/runs{view}",
             "runs_link": runs_link, "trials_link": trials_link,
             "parent_run": f"{base}/runs/{parent}{view}", "child_run": f"{base}/runs/{child}{view}",
             "child_chart": f"{base}/runs/{child}/model-metrics{view}",
             "sweep_charts": f"{base}/runs{view}&compareRunsMode=CHART&searchFilter={quote(children, safe='')}"
                             f"&orderByKey={quote('metrics.`acc/mean`', safe='')}&orderByAsc=false"}
    if csv is not None:
        pages["child_artifact_csv"] = f"{base}/runs/{child}/artifacts/{csv}{view}"
    else:
        print("child_artifact_csv: skipped (the child run has no CSV artifact; run the sweep with "
              "mlflow.readable_trial_files=true for one)")
    tall = {"child_chart": 9000, "sweep_charts": 9000}
    try:
        wait_for_port(port, 120)
        for name, url in pages.items():
            screenshot(url, out / f"{name}.png", height=tall.get(name, 1000))
            print(f"{name}: {url} -> {out / f'{name}.png'}")
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
