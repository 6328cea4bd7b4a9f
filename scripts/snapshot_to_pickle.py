#!/usr/bin/env python3
"""Convert memtrain's memory snapshot JSON into the pickle that PyTorch's memory visualizer
(https://pytorch.org/memory_viz) opens.

The JSON already has the shape of torch.cuda.memory._snapshot() (segments with blocks, and
device_traces); the visualizer only reads pickles, written as torch.cuda.memory._dump_snapshot
writes them (pickle.dump of the dict). Two adjustments keep the visualizer's views correct:
- block state "stitched" (ours, vmm_stitch) becomes "inactive": the block is free in its own
  segment and the visualizer knows only PyTorch's three states;
- trace entries and blocks keep our extra keys ("tag", "allocation_id"), which it ignores.

Usage: snapshot_to_pickle.py memory_snapshot.json memory_snapshot.pickle
Exit 2 with a message for a missing file or JSON that is not a snapshot.
"""
import json
import pickle
import sys

PYTORCH_STATES = {"active_allocated", "active_pending_free", "inactive"}


def convert(snapshot):
    if not isinstance(snapshot, dict) or "segments" not in snapshot or "device_traces" not in snapshot:
        raise ValueError("not a memory snapshot: expected an object with 'segments' and 'device_traces'")
    for segment in snapshot["segments"]:
        for block in segment.get("blocks", []):
            if block.get("state") not in PYTORCH_STATES:
                block["state"] = "inactive"
    return snapshot


def main(argv):
    if len(argv) != 3:
        print("usage: snapshot_to_pickle.py SNAPSHOT.json OUT.pickle", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            snapshot = convert(json.load(f))
    except (OSError, ValueError) as e:
        print(f"snapshot_to_pickle: {argv[1]}: {e}", file=sys.stderr)
        return 2
    with open(argv[2], "wb") as f:
        pickle.dump(snapshot, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
