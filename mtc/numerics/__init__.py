"""Shared array code for every solver. Imports no method (docs/architecture.md).

- ``affinity``: cosine and Gaussian affinities, pairwise squared distances;
- ``linalg``: dense/sparse helpers, thin SVD from a Gram matrix, row-space coordinates;
- ``thin``: tall-by-thin products A @ B by the faster of two routes that give the same bits;
- ``stacking``: the tasks stacked into one matrix and rows split back by task;
- ``simplex``: row-wise problems on the probability simplex (projection, QP, Frank-Wolfe);
- ``snmf``: symmetric-NMF update rules and their iteration;
- ``seeding``: initial cluster indicators (k-means + offset, random);
- ``convergence``: stopping rules and the result of one iterative fit;
- ``cache``: an explicit cache for deterministic, seed-independent steps.
"""
