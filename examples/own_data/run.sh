# run.sh: the worked example end to end (docs/tutorials/own_data.md; CI runs it in an empty folder)
set -euo pipefail
python make_tasks.py

# one fit, no Ray: one MLflow run in ./mlflow.db
python -m mtc.run method=kmeans data=files 'data.params.paths=[wine_a.csv,wine_b.csv]' \
  data.params.label_column=label data.name=wine

# a sweep over kernel k-means' grid, 3 seeds per grid point: outputs/kkm-wine/report.md
python -m mtc.sweep method=kkm data=files 'data.params.paths=[wine_a.csv,wine_b.csv]' \
  data.params.label_column=label data.name=wine sweep.repeats=3

# the same tasks from the one file, split by its task column
python -m mtc.run method=kmeans data=files 'data.params.paths=[wine.csv]' \
  data.params.task_column=task data.params.label_column=label data.name=wine_one_file
