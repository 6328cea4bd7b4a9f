"""What a replay CSV (`op,id,bytes,stream,tag`, memory/replay.hpp) says without an allocator.

These figures depend only on the requests, not on a policy: the live requested bytes over the
trace, their peak, and how that peak splits by tag. They are computed here, independently of
memtrain's replay, so that the two can be checked against each other (the peak of live bytes must
equal replay's peak_live_bytes under every policy).
"""
import csv
from dataclasses import dataclass, field


@dataclass
class TraceStats:
    events: int = 0
    num_allocs: int = 0
    peak_live_bytes: int = 0
    at_peak_by_tag: dict = field(default_factory=dict)   # tag -> live bytes when the total peaked
    peak_by_tag: dict = field(default_factory=dict)      # tag -> its own peak of live bytes
    tags: list = field(default_factory=list)             # in order of first appearance


def _rows(path):
    with open(path, newline="") as f:
        for line in f:
            text = line.split("#", 1)[0].strip()
            if text:
                yield text


def read_trace_stats(path):
    """Reads one trace CSV. Raises ValueError naming the file and line for a malformed row."""
    stats = TraceStats()
    live = {}            # id -> (bytes, tag)
    live_by_tag = {}
    total = 0
    rows = _rows(path)
    header = next(rows, None)
    if header != "op,id,bytes,stream,tag":
        raise ValueError(f"{path}: header {header!r}; expected op,id,bytes,stream,tag")
    for n, row in enumerate(csv.reader(rows), start=2):
        if len(row) != 5:
            raise ValueError(f"{path}: row {n}: {len(row)} fields; expected 5")
        op, ident, nbytes, _stream, tag = row
        if op == "step":
            continue  # a step boundary (memory/replay.hpp, Note [Step boundaries in a trace])
        stats.events += 1
        if op == "alloc":
            b = int(nbytes)
            live[ident] = (b, tag)
            total += b
            live_by_tag[tag] = live_by_tag.get(tag, 0) + b
            if tag not in stats.peak_by_tag:
                stats.tags.append(tag)
                stats.peak_by_tag[tag] = 0
            stats.peak_by_tag[tag] = max(stats.peak_by_tag[tag], live_by_tag[tag])
            stats.num_allocs += 1
            if total > stats.peak_live_bytes:
                stats.peak_live_bytes = total
                stats.at_peak_by_tag = dict(live_by_tag)
        elif op == "free":
            if ident not in live:
                raise ValueError(f"{path}: row {n}: free of unknown id {ident}")
            b, t = live.pop(ident)
            total -= b
            live_by_tag[t] -= b
        else:
            raise ValueError(f"{path}: row {n}: op {op!r}; expected alloc, free or step")
    return stats
