"""Astrolabe from Python: the same computation and the same values as the command line.

Keyword arguments are the command's flags with ``_`` for ``-`` (``global_batch=1536`` is
``--global-batch 1536``); booleans become ``true``/``false`` (``flash_attention=False``); lists
become comma-separated values (``tp=[2, 4, 8]``). Results are the JSON output of the command
(see docs/schema.md) as dicts. Bad input raises ``ValueError`` with the CLI's message.

>>> import astrolabe
>>> r = astrolabe.estimate(model="gpt3-175b", system="dgx-a100", gpus=1024, tp=8, pp=16,
...                        global_batch=1536)
>>> round(r["iteration_time_s"], 1) > 0
True
"""

import json

from . import _astrolabe

__all__ = ["estimate", "sweep", "compare", "collective", "schema", "run", "SCHEMA_VERSION"]

SCHEMA_VERSION = _astrolabe.SCHEMA_VERSION


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(_value(x) for x in v)
    return str(v)


def _flags(kwargs):
    """Keyword arguments as command-line flags, in the order given."""
    args = []
    for key, v in kwargs.items():
        if v is None:
            continue
        flag = ("-" if len(key) == 1 else "--") + key.replace("_", "-")
        args += [flag, _value(v)]
    return args


def run(*args):
    """Runs ``astrolabe ARGS...`` and returns (text, exit status), as the binary prints it."""
    return _astrolabe.run([str(a) for a in args])


def _json(args):
    text, _status = _astrolabe.run(args + ["--format", "json"])
    return json.loads(text)


def _records(rows):
    """A pandas DataFrame of the records (nested keys as ``plan.tp``) when pandas is
    installed, else the list of dicts."""
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.json_normalize(rows)


def estimate(model=None, system=None, **plan):
    """One training iteration: a dict with ``iteration_time_s``, ``tokens_per_s``, ``mfu``
    (a fraction), ``memory_per_device_bytes``, ``fits``, ``plan``, the breakdowns, …
    A plan that does not fit is returned with ``fits`` False (the CLI exits 3)."""
    return _json(["estimate"] + _flags({"model": model, "system": system, **plan}))


def sweep(model=None, system=None, **axes):
    """Ranked plans: the ``top`` records (a DataFrame with pandas). Axes take lists
    (``tp=[4, 8]``). ``astrolabe.sweep(..., full=True)`` returns the whole result dict."""
    full = axes.pop("full", False)
    v = _json(["sweep"] + _flags({"model": model, "system": system, **axes}))
    return v if full else _records(v["top"])


def compare(scenario=None, **flags):
    """A built-in or file scenario (or ``model=``/``system=`` lists): the result dict, with
    one record per variant in ``variants``."""
    args = ["compare"] + ([scenario] if scenario else [])
    for key in ("model", "system"):
        vals = flags.pop(key, None)
        for v in [vals] if isinstance(vals, str) else (vals or []):
            args += ["--" + key, v]
    return _json(args + _flags(flags))


def collective(op, **flags):
    """One collective over sizes (``size="8..128M"`` or ``b=8, e="128M", f=2``): one record
    per size with ``size_bytes``, ``nranks``, ``time_s``, ``algbw_bytes_per_s``,
    ``busbw_bytes_per_s`` (a DataFrame with pandas)."""
    return _records(_json(["collective", op] + _flags(flags))["rows"])


def schema(name="estimate"):
    """The JSON Schema of a command's output: estimate, sweep, sweep-all-row, compare,
    collective."""
    return json.loads(_astrolabe.run(["schema", name])[0])
