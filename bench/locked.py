#!/usr/bin/env python3
"""Atomic (locked) instructions a hop executes per request, from a callgrind dump.

    python3 bench/locked.py DUMP REQUESTS [TOP]

DUMP must come from `valgrind --tool=callgrind --dump-instr=yes` (bench/instructions.sh
with LOCKED=1), so that its costs are per instruction address. Each object the dump names
(the hop's binary and its shared libraries) is disassembled with `objdump -d`; every
instruction with a `lock` prefix, and every `xchg` with a memory operand (locked without
the prefix), is a locked one. Read a dump while the binaries it names are still the ones
it recorded: a rebuilt binary has other instructions at those addresses. Prints their
executions per request, then the TOP (10) functions by locked instructions, with the
instruction.

On x86-64 a locked instruction is a full memory barrier and costs about 20 cycles even
when its cache line is not shared: reference counts, task states, mutexes, metric
counters. Their number is a cost that instruction counts alone do not show.
"""

import collections
import os
import re
import subprocess
import sys

NAMED = re.compile(r"\((\d+)\)(?: (.*))?")
INSTRUCTION = re.compile(r"\s*([0-9a-f]+):\s+(.*)")


class Names:
    """callgrind's name compression: `(id) name` the first time, `(id)` after."""

    def __init__(self):
        self.by_id = {}

    def __call__(self, text):
        m = NAMED.match(text)
        if not m:
            return text
        if m.group(2):
            self.by_id[m.group(1)] = m.group(2)
        return self.by_id.get(m.group(1), m.group(1))


def executions(dump):
    """{(object, address): executions} and {(object, address): function} of DUMP."""
    objects, functions = Names(), Names()
    counts, function_of = collections.Counter(), {}
    obj = fn = None
    address, after_call = 0, False
    positions, ir = 1, 0  # position columns before the costs; the column of `Ir` among them
    with open(dump, errors="replace") as f:
        for line in f:
            if line.startswith("positions:"):
                positions = len(line.split()) - 1
            elif line.startswith("events:"):
                ir = line.split()[1:].index("Ir")
            elif line.startswith("ob="):
                obj = objects(line[3:].strip())
            elif line.startswith("cob="):
                objects(line[4:].strip())
            elif line.startswith("fn="):
                fn = functions(line[3:].strip())
            elif line.startswith("cfn="):
                functions(line[4:].strip())
            elif line.startswith("calls="):
                after_call = True  # the next cost line is the call's inclusive cost
            elif line[:1] in "0123456789+-*":
                fields = line.split()
                position = fields[0]
                if position.startswith("0x"):
                    address = int(position, 16)
                elif position[0] in "+-":
                    step = int(position[1:], 0)
                    address += step if position[0] == "+" else -step
                if after_call:
                    after_call = False
                    continue
                # Trailing zero costs may be left out of a line.
                costs = fields[positions:]
                counts[(obj, address)] += int(costs[ir]) if ir < len(costs) else 0
                function_of[(obj, address)] = fn
    return counts, function_of


def locked_addresses(path):
    """{address: instruction text} of the locked instructions in the object at PATH."""
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", path],
        capture_output=True, text=True, check=True,
    ).stdout
    found = {}
    for line in listing.splitlines():
        m = INSTRUCTION.match(line)
        if not m:
            continue
        text = m.group(2).split("#")[0].strip()
        if text.startswith("lock ") or (text.startswith("xchg") and "(" in text):
            found[int(m.group(1), 16)] = " ".join(text.split()[:2])
    return found


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    dump, requests = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    counts, function_of = executions(dump)
    by_function = collections.Counter()
    total = 0
    for obj in {o for o, _ in counts}:
        if not obj or not os.path.isfile(obj):
            continue
        for address, text in locked_addresses(obj).items():
            n = counts.get((obj, address), 0)
            if n:
                total += n
                where = (os.path.basename(obj), function_of[(obj, address)], text)
                by_function[where] += n
    print(f"locked instructions per request: {total / requests:.1f}")
    for (obj, fn, text), n in by_function.most_common(top):
        print(f"  {n / requests:6.2f}  {text:<14} {obj}: {fn[:100]}")


if __name__ == "__main__":
    main()
