#!/usr/bin/env python3
"""Strictly checks a Prometheus text exposition (format 0.0.4) and prints
its samples as JSON lines: {"name": ..., "labels": {...}, "value": ...}.

Usage: prom_check.py FILE. Exits 1 naming the first problem. Beyond what
prometheus_client's parser refuses, it requires every family to have HELP
and TYPE, each series to appear once, counter samples to end in _total,
and histogram buckets to be cumulative and end in +Inf == _count.
"""
import json
import math
import re
import sys

from prometheus_client.parser import text_string_to_metric_families

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
# A sample line of format 0.0.4, exactly: the library's parser accepts some
# malformed lines (an unterminated label value, for one).
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_VALUE = r"(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|NaN|[+-]Inf)"
SAMPLE = re.compile(
    rf"^[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{{(?:{_LABEL}(?:,{_LABEL})*,?)?\}})? {_VALUE}(?: -?\d+)?$")


def fail(message):
    print(f"prom_check: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    if not text.endswith("\n"):
        fail("the text does not end with a newline")
    helps, types = set(), {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split(" ")[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            if name in types:
                fail(f"TYPE of {name} given twice")
            types[name] = kind
        elif line.startswith("#") or not line.strip():
            fail(f"unexpected line: {line!r}")
        elif not SAMPLE.match(line):
            fail(f"malformed sample line: {line!r}")
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and others
        fail(f"parser refused the text: {e}")
    seen = set()
    for family in families:
        declared = family.name + ("_total" if family.type == "counter" else "")
        if declared not in types and family.name not in types:
            fail(f"family {family.name} has no TYPE line")
        if declared not in helps and family.name not in helps:
            fail(f"family {family.name} has no HELP line")
        buckets = {}
        for s in family.samples:
            if not NAME.match(s.name):
                fail(f"bad metric name {s.name!r}")
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in seen:
                fail(f"series {key} appears twice")
            seen.add(key)
            if family.type == "counter" and not s.name.endswith("_total"):
                fail(f"counter sample {s.name} does not end in _total")
            if family.type == "histogram" and s.name.endswith("_bucket"):
                series = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                buckets.setdefault(series, []).append((float(s.labels["le"]), s.value))
            value = s.value if math.isfinite(s.value) else str(s.value)
            print(json.dumps({"name": s.name, "labels": s.labels, "value": value}))
        for series, bs in buckets.items():
            if bs[-1][0] != math.inf:
                fail(f"histogram {family.name}{series} does not end in +Inf")
            if any(b[1] > c[1] or b[0] >= c[0] for b, c in zip(bs, bs[1:])):
                fail(f"histogram {family.name}{series} buckets not cumulative")
            count = [s.value for s in family.samples
                     if s.name == family.name + "_count"
                     and tuple(sorted(s.labels.items())) == series]
            if count != [bs[-1][1]]:
                fail(f"histogram {family.name}{series}: +Inf bucket != _count")


if __name__ == "__main__":
    main()
