"""Runs the memtrain binary and sorts its answers into done / not available / failed.

A grid cell whose feature has not landed is written as "not available yet", never faked: the
config loader rejects such a key with exit 2 and "not supported yet" (docs/config.md, "Errors"),
and that rejection is what marks the cell. Any other exit 2 is a bug in the grid, so it stops the
experiment instead of being recorded.
"""
import json
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass


@dataclass
class Result:
    command: str     # the exact command line, for docs/memory-experiments.md
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def not_available_reason(self):
        """The config loader's one-line reason when the command names a feature not built yet."""
        if self.returncode == 2 and "not supported yet" in self.stderr:
            # Under mpirun every rank prints the same line, sometimes run together: keep the
            # text after the last "config error: " of the first such line.
            line = next(l for l in self.stderr.splitlines() if "not supported yet" in l)
            return line.rsplit("config error: ", 1)[-1].strip()
        return None

    def json(self):
        """stdout parsed as one JSON document (plan/replay --json)."""
        return json.loads(self.stdout)


class CommandFailed(RuntimeError):
    pass


# Open MPI refuses root without --allow-run-as-root, and more ranks than cores without
# --oversubscribe; a dry run computes nothing, so 4 ranks on 2 cores are fine.
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]


TIMEOUT = 124  # returncode of a command that ran past its timeout (as timeout(1) reports)


def run(binary, args, timeout_s=300, ranks=1):
    """Runs `binary args...` (under mpirun with `ranks` > 1); returns a Result whatever the exit
    code. A command still running after `timeout_s` is killed with its whole process group
    (mpirun's ranks included) and reported with returncode TIMEOUT."""
    argv = [binary, *args] if ranks == 1 else [*MPIRUN, str(ranks), binary, *args]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = TIMEOUT
        err += f"\n(killed after {timeout_s} s)"
    return Result(shlex.join(argv), code, out, err, time.monotonic() - start)


def check(result, allowed=(0,)):
    """Raises CommandFailed naming the command and its stderr when the exit code is unexpected."""
    if result.returncode not in allowed:
        tail = "\n".join(result.stderr.strip().splitlines()[-5:])
        raise CommandFailed(f"{result.command}\nexit {result.returncode}: {tail}")
    return result
