"""A toy solver that lives outside the mtc package, to show that a method plugs in as one
module + one config (tests/plugin/conf/method/toy.yaml) with no platform change. It fills
every kind of fit-record entry, and fails on request (a numerical failure inside a fit)."""

from __future__ import annotations

import os
import signal
import time
from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from mtc.methods.base import MultiTaskClusterer
from mtc.numerics.cache import Cache
from mtc.numerics.seeding import kmeans_labels
from mtc.record import LabelledMatrix


class ToyClusterer(MultiTaskClusterer):
    """k-means labels per task plus made-up learned quantities.

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        Clusters per task.
    shift : float, default=0.0
        Added to every learned quantity (a parameter to sweep).
    fail : bool, default=False
        Raise a FloatingPointError inside the fit.
    delay : float, default=0.0
        Seconds the fit sleeps (a slow trial, to interrupt a sweep).
    die_once : str, default=""
        A file path: the first fit that finds no file there creates it and kills its own
        process with SIGKILL (a Ray worker killed in the middle of a trial).
    pid_file : str, default=""
        A file path: each fit appends the id of the process that ran it (a test finds the
        Ray worker of a trial).
    cache : mtc.numerics.cache.Cache or None, default=None
        Keeps the k-means labels (a sweep's worker gives its cache; its files are shared by
        the workers of a machine).
    random_state : int, Generator or None, default=None
        Seed of k-means.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        k-means labels per task.
    objective_trace_ : ndarray of shape (4,)
        A made-up decreasing trace.
    n_iter_ : int
        3.
    converged_ : bool
        True.
    record_ : FitRecord
        Scalars ``toy_score`` (one) and ``toy_mass`` (per task), trace ``toy_step`` (per
        task), matrices ``toy_relatedness`` (cluster x cluster per task pair),
        ``toy_task_similarity`` (task x task) and ``toy_weights`` (per sample and task).
    """

    _parameter_constraints = {**MultiTaskClusterer._parameter_constraints,
                              "shift": [Interval(Real, 0, None, closed="left")], "fail": ["boolean"],
                              "delay": [Interval(Real, 0, None, closed="left")], "die_once": [str],
                              "pid_file": [str], "cache": [None, Cache]}

    def __init__(self, n_clusters=2, shift=0.0, fail=False, delay=0.0, die_once="", pid_file="", cache=None,
                 random_state=None):
        self.n_clusters = n_clusters
        self.shift = shift
        self.fail = fail
        self.delay = delay
        self.die_once = die_once
        self.pid_file = pid_file
        self.cache = cache
        self.random_state = random_state

    def _fit(self, matrices, n_clusters, rng):
        if self.fail:
            raise FloatingPointError("toy failure: the iteration diverged")
        if self.pid_file:
            with open(self.pid_file, "a") as handle:
                handle.write(f"{os.getpid()}\n")
        time.sleep(self.delay)
        if self.die_once and not os.path.exists(self.die_once):
            open(self.die_once, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        T = len(matrices)
        self.labels_ = [kmeans_labels(X, k, rng, cache=self.cache) for X, k in zip(matrices, n_clusters)]
        self.objective_trace_ = np.array([4.0, 3.0, 2.5, 2.25]) + self.shift
        self.n_iter_, self.converged_ = 3, True
        # block (t, s)[i, j]: 1 + t when cluster i of task t and cluster j of task s are the same cluster
        pairs = {(t, s): np.eye(n_clusters[t], n_clusters[s]) * (1 + t) + self.shift
                 for t in range(T) for s in range(T) if s != t}
        self.record_.scalars.update(toy_score=7.0 + self.shift, toy_mass=np.arange(T, dtype=float))
        self.record_.traces["toy_step"] = np.outer(np.arange(4.0), np.arange(1, T + 1))
        self.record_.matrices.update(
            toy_relatedness=LabelledMatrix(pairs, "cluster", "cluster", "toy cluster relatedness"),
            toy_task_similarity=LabelledMatrix.single(np.eye(T) + self.shift, "task", "task", "toy task similarity"),
            toy_weights=LabelledMatrix({(t, 0): np.full((X.shape[0], 1), 0.5) for t, X in enumerate(matrices)},
                                       "sample", ("weight",), "toy per-sample weights"))


class SharedColumnsToy(ToyClusterer):
    """The toy solver declaring that it needs the same number of clusters in every task (as a
    solver whose cluster columns are shared across tasks does): a sweep on tasks of unequal
    cluster counts is refused before Ray starts, and a leaderboard lists that benchmark."""

    equal_clusters_reason = "its cluster columns are shared by every task"
