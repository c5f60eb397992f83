#!/usr/bin/env python3
"""Runs a command as the child of this small parent, which writes the child's process ID to
PIDFILE as soon as it starts and, once it exits, its exit status to STATUSFILE (written whole:
a temporary file renamed into place; a negative status is the signal that ended it).

Usage: scripts/dev/supervise.py PIDFILE STATUSFILE COMMAND [ARGUMENT...]

For scripts that start a long-running process in the background and must learn when it stops
and how: they poll the two files instead of using the shell's `wait`, which cannot be relied on
where the test environment leaves SIGCHLD blocked. Standard input, output and error are the
command's own."""
import os
import subprocess
import sys

if len(sys.argv) < 4:
    sys.exit(__doc__)
pid_file, status_file, command = sys.argv[1], sys.argv[2], sys.argv[3:]
child = subprocess.Popen(command)
with open(pid_file, "w") as f:
    f.write(str(child.pid))
status = child.wait()
with open(status_file + ".tmp", "w") as f:
    f.write(str(status))
os.rename(status_file + ".tmp", status_file)
