#!/usr/bin/env python3
"""Whole-process figures for a format-2 vault: `lockbox get` against the same command on a
small vault in the same run, peak RSS of `get` and of `list --json-lines`, and N writer processes
doing M `lockbox set`s each at once (throughput, p99, lost writes). Prints a Markdown table.

Usage: scripts/bench/bench-format2-cli.py LOCKBOX BIG_VAULT BIG_KEY SMALL_VAULT SMALL_KEY SERVICE ACCOUNT
           [--runs N] [--writers W] [--sets S]
  SERVICE ACCOUNT: an item both vaults hold is not needed; each vault is read at an item it has,
  given as SERVICE/ACCOUNT for the big vault; the small vault's first listed item is used.
The vaults are made beforehand (docs/PERFORMANCE.md gives the commands: `lockbox init --format 2`,
`lockbox import --json-lines`). The writers write to their own service in BIG_VAULT and every value
they were told succeeded is read back afterwards: a missing or different one counts as lost.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def run_timed(command):
    """(seconds, peak RSS KiB, completed process): RSS from wait4's rusage of the child."""
    # Output goes to files, not pipes: a pipe would fill (list prints megabytes) before wait4 returns.
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        start = time.monotonic()
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.monotonic() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        return elapsed, usage.ru_maxrss, process.returncode, stdout.read(), stderr.read()


def ms(seconds):
    return f"{seconds * 1000:.1f} ms"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("lockbox", "big_vault", "big_key", "small_vault", "small_key", "service", "account"):
        parser.add_argument(name)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--sets", type=int, default=1000)
    a = parser.parse_args()

    def lockbox(vault, key, *arguments):
        return [a.lockbox, *arguments, "--vault", vault, "--key-file", key]

    listed = subprocess.run(lockbox(a.small_vault, a.small_key, "list", "--json-lines"), capture_output=True, check=True)
    first = json.loads(listed.stdout.splitlines()[0])
    small_get = lockbox(a.small_vault, a.small_key, "get", first["service"], first["account"])
    big_get = lockbox(a.big_vault, a.big_key, "get", a.service, a.account)
    times = {"small": [], "big": []}
    rss = {"small": 0, "big": 0}
    for _ in range(3):  # warm-up: page cache, dynamic loader
        run_timed(small_get)
        run_timed(big_get)
    for _ in range(a.runs):  # alternating, so load changes hit both alike
        for name, command in (("small", small_get), ("big", big_get)):
            elapsed, peak, code, _, err = run_timed(command)
            if code != 0:
                sys.exit(f"bench-format2-cli: {' '.join(command)} exited {code}: {err.decode(errors='replace')}")
            times[name].append(elapsed)
            rss[name] = max(rss[name], peak)
    list_rss = {}
    list_time = {}
    for name, vault, key in (("small", a.small_vault, a.small_key), ("big", a.big_vault, a.big_key)):
        elapsed, peak, code, out, _ = run_timed(lockbox(vault, key, "list", "--json-lines"))
        if code != 0:
            sys.exit(f"bench-format2-cli: list --json-lines on {vault} exited {code}")
        list_rss[name], list_time[name] = peak, (elapsed, out.count(b"\n"))

    # Writers: each its own service, its own values; every acknowledged set is checked afterwards.
    latencies, acknowledged, failures = [], {}, []
    lock = threading.Lock()

    def writer(number):
        for index in range(a.sets):
            value = f"w{number}-{index}-{time.monotonic_ns()}".encode()
            start = time.monotonic()
            result = subprocess.run(lockbox(a.big_vault, a.big_key, "set", f"bench-writer-{number}", f"item-{index % 50}"),
                                    input=value, capture_output=True)
            elapsed = time.monotonic() - start
            with lock:
                if result.returncode == 0:
                    latencies.append(elapsed)
                    acknowledged[(number, index % 50)] = value
                else:
                    failures.append(result.stderr.decode(errors="replace").strip())

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(a.writers)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - start
    lost = 0
    for (number, item), value in acknowledged.items():
        got = subprocess.run(lockbox(a.big_vault, a.big_key, "get", f"bench-writer-{number}", f"item-{item}"),
                             capture_output=True)
        if got.returncode != 0 or got.stdout.rstrip(b"\n") != value:
            lost += 1

    small_median, big_median = statistics.median(times["small"]), statistics.median(times["big"])
    print("| Measure | Small vault | Big vault |")
    print("|---|---:|---:|")
    print(f"| `lockbox get` median ({a.runs} runs each, alternating) | {ms(small_median)} | {ms(big_median)} |")
    print(f"| `lockbox get` p90 | {ms(percentile(times['small'], 0.9))} | {ms(percentile(times['big'], 0.9))} |")
    print(f"| `lockbox get` big ÷ small (medians) | | {big_median / small_median:.2f}× |")
    print(f"| `lockbox get` peak RSS (max over runs) | {rss['small'] / 1024:.1f} MiB | {rss['big'] / 1024:.1f} MiB |")
    print(f"| `lockbox list --json-lines` peak RSS | {list_rss['small'] / 1024:.1f} MiB | {list_rss['big'] / 1024:.1f} MiB |")
    print(f"| `lockbox list --json-lines` time (items) | {list_time['small'][0]:.2f} s ({list_time['small'][1]}) | {list_time['big'][0]:.2f} s ({list_time['big'][1]}) |")
    total = a.writers * a.sets
    print(f"| {a.writers} writer processes × {a.sets} `lockbox set` | | {len(latencies)}/{total} acknowledged in {wall:.1f} s: "
          f"{len(latencies) / wall:.1f} sets/s, median {ms(statistics.median(latencies))}, p99 {ms(percentile(latencies, 0.99))}; "
          f"{len(failures)} refused; lost {lost} |")
    if failures:
        print(f"\nFirst refusal: {failures[0]}", file=sys.stderr)
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
