#!/usr/bin/env python3
"""Writes a replay trace (CSV op,id,bytes,stream,tag) with N blocks live at once, for timing
`memtrain replay --policy planned` against the number of simultaneously live blocks.

  stack:       N allocs, then N frees in allocation order (every block overlaps every other).
  interleaved: N allocs, then N rounds of (free a random live block, alloc a new one), then
               frees of the rest: N live at every moment of the middle part.
Sizes are 512 B to 32 KiB in 512 B steps, from a fixed seed.

  scripts/bench/live_blocks_trace.py --pattern stack --live 100000 > trace.csv
"""
import argparse
import random
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pattern", choices=["stack", "interleaved"], required=True)
    p.add_argument("--live", type=int, required=True, help="blocks live at once")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)
    out = ["op,id,bytes,stream,tag"]
    live = []
    next_id = 0

    def alloc():
        nonlocal next_id
        out.append(f"alloc,b{next_id},{512 * rng.randint(1, 64)},0,activation")
        live.append(next_id)
        next_id += 1

    for _ in range(a.live):
        alloc()
    if a.pattern == "interleaved":
        for _ in range(a.live):
            k = rng.randrange(len(live))
            live[k], live[-1] = live[-1], live[k]
            out.append(f"free,b{live.pop()},,0,")
            alloc()
    for i in live:
        out.append(f"free,b{i},,0,")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
