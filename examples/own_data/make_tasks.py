# make_tasks.py: scikit-learn's wine data as two tasks, one CSV file each
import numpy as np
from sklearn.datasets import load_wine

wine = load_wine(as_frame=True)
frame = wine.frame.rename(columns={"target": "label"})      # 13 feature columns + label
frame["label"] = frame["label"].map(dict(enumerate(wine.target_names)))
rng = np.random.default_rng(0)
task = rng.integers(0, 2, len(frame))                        # each sample goes to task a or b
frame[task == 0].to_csv("wine_a.csv", index=False)
frame[task == 1].to_csv("wine_b.csv", index=False)
frame.assign(task=np.where(task == 0, "a", "b")).to_csv("wine.csv", index=False)
