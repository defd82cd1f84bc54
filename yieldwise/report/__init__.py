"""Batch posterior reports: ``yieldwise report CONFIG.toml`` (the main job).

A TOML file names the calibration data (one ``[data]`` table, or several ``[[data]]``
tables: calibration sets or deployment sites), the classifiers (their output columns),
one or more utility matrices, optional deployment prevalences, the sampler settings and
where the fits run (``[compute] scheduler``). The report fits one transducer per
classifier and data set (:func:`yieldwise.fit_many`: serially, on local processes or on
a Dask cluster), computes the posterior of each classifier's long-run utility under each
matrix (theory section 4), compares the classifiers within each data set, and writes
one folder:

* ``report.html``: self-contained (inline images, no network), user-given names escaped;
  it opens with a verdict per matrix (and data set) and a table of contents, and ends
  with the evaluation toolkit per classifier (ROC hull and each matrix's best point,
  Brier decomposition, reliability diagram with the transducer's bands; in-sample, on
  the calibration items) and the classifier's own rule against expected utility over
  10,000 random utility matrices;
* ``summary.csv``: one row per data set, classifier and matrix (posterior mean, sd,
  quantiles, rescaled values, P(best), integration errors);
* ``superiority.csv``: P(row classifier yields more than column classifier) and P(the two
  tie), per data set and matrix;
* ``draws.nc``: the long-run-utility draws, raw and rescaled, with dims (dataset,
  classifier, chain, draw, matrix), reloadable with ``xarray.open_dataset``; the
  transducers are saved beside it as ``transducer_<name>.nc`` (with several data sets
  ``transducer_<dataset>__<name>.nc``);
* ``config.lock.toml``: the resolved settings (each classifier's transform and
  resolution, by data set when there are several), the package, backend and Stan
  versions, and the seeds (also the toolkit's: bins, number and seed of the random utility
  matrices), so that the report can be reproduced;
* ``yieldwise-manifest.json``: every file above with its size and SHA-256, written last;
  ``--overwrite`` replaces only a folder that holds a manifest and nothing else, and
  deletes only the files it lists.

The folder is written under a unique hidden name (``.NAME.partial-XXXXXXXX``) and renamed
at the end, so a failed or interrupted run never leaves a folder that looks complete; the
run holds a lock on ``out`` throughout, so a second run on the same folder stops at once
(``yieldwise._files``; the README's "Guarantees").

Example configuration::

    [data]
    calibration = "calibration.csv"   # relative to this file; or dataset = "digits_binary"
    class_col = "label"

    [[classifier]]
    name = "forest"
    outputs = ["forest_votes"]
    transform = "logit"     # optional: auto | identity | logit | log | simplex
    resolution = 0.005      # optional: auto | continuous | lattice spacing

    [[utility]]
    name = "screening"
    decisions = ["dismiss", "treat"]
    classes = ["other", "eight"]
    values = [[0, -10], [-1, 5]]

    [sampler]               # any Transducer setting: chains, warmup, draws, seed, ...
                            # (the defaults: yieldwise.transducer.SAMPLER_DEFAULTS)
    chains = 4
    seed = 1

    [compute]               # optional: "serial" (default), "processes", "tcp://host:8786"
    scheduler = "processes"

    [prevalences]           # optional: deployment class frequencies
    other = 0.8
    eight = 0.2

Several data sets replace ``[data]`` by one ``[[data]]`` table each, with a ``name``::

    [[data]]
    name = "hospital A"
    calibration = "a.csv"
    class_col = "label"

    [[data]]
    name = "hospital B"
    calibration = "b.csv"
    class_col = "diagnosis"

``data/digits_report.toml`` shows every key with comments. The package has three parts:
:mod:`~yieldwise.report.config` (the TOML, validated), :mod:`~yieldwise.report.job`
(fits, long-run utilities, comparisons, the files) and :mod:`~yieldwise.report.html`
(the page).
"""

from __future__ import annotations

from .config import (
    DATASETS,
    RESERVED_CLASSIFIER_NAMES,
    ConfigError,
    DataSource,
    ReportConfig,
    check_scheduler,
    load_config,
    transducer_file_name,
)
from .config import check_sampler as check_sampler  # `yieldwise fit` checks with it
from .config import not_numeric as not_numeric  # the one rule of `fit` and `report`
from .job import Verdict, read_report_csv, run_report, verdicts

__all__ = [
    "DATASETS",
    "RESERVED_CLASSIFIER_NAMES",
    "ConfigError",
    "DataSource",
    "ReportConfig",
    "Verdict",
    "check_scheduler",
    "load_config",
    "read_report_csv",
    "run_report",
    "transducer_file_name",
    "verdicts",
]
