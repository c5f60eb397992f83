#!/usr/bin/env python3
"""lockbox against secret-tool as whole processes, side by side (what scripts/bench/bench-cli.sh runs).

Every row times two commands in pairs, A then B then B then A ..., each run a fresh process
(posix_spawn, then wait4 for its exit status and its own resource use), and quotes the median of
each command's wall time, the median of the pairwise ratios A/B (so a machine that drifts between
pairs does not bias the ratio) and the median peak RSS. The Secret Service rows talk to the
session bus in DBUS_SESSION_BUS_ADDRESS, which must be a private gnome-keyring
(scripts/dev/keyring-session.sh); the items this creates are removed at the end.

With --dbus it also counts the D-Bus method calls each command makes (dbus-monitor --profile on
the same bus, one command at a time): those to the bus daemon (Hello, AddMatch, ...) and those to
the Secret Service provider, and says how many messages carried a secret-session negotiation.

No time thresholds: times are printed, never judged (they depend on the machine's load). The one
assertion is on the D-Bus counts, which do not depend on load: with --dbus the exit status is 1
when lockbox makes more calls than secret-tool for the same operation (issue 18); otherwise it is
0 unless a command failed.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SERVICE = "lockbox-bench"
ACCOUNT = "alice"          # the item both lookups read
ACCOUNT_B = "bob"          # secret-tool's store / delete item (lockbox's is ACCOUNT_L)
ACCOUNT_L = "carol"
SECRET = b"bench-token-0123456789abcdef0123456789\n"


def spawn(argv, env, stdin_path=None):
    """Runs argv once; returns (exit status, wall seconds, user+sys seconds, peak RSS KiB)."""
    actions = []
    if stdin_path is not None:
        actions.append((os.POSIX_SPAWN_OPEN, 0, stdin_path, os.O_RDONLY, 0))
    else:
        actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
    actions.append((os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0))
    actions.append((os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0))
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    return os.waitstatus_to_exitcode(status), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def peak_rss(argv, env, stdin_path, runs, before=None):
    """Median peak RSS (KiB) of argv, measured by GNU time (a small parent).

    Not from the paired runs: a child that posix_spawn starts from this Python process shares
    its memory until exec, and the kernel keeps that high-water mark in the child's ru_maxrss.
    GNU time forks from a ~2 MiB process, well below anything measured here."""
    values = []
    for _ in range(runs):
        if before:
            before()
        with open(stdin_path or os.devnull, "rb") as stdin:
            result = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], env=env, stdin=stdin,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        values.append(int(result.stderr.strip().splitlines()[-1]))
    return statistics.median(values)


def run_checked(argv, env, stdin=None):
    result = subprocess.run(argv, env=env, input=stdin, capture_output=True)
    if result.returncode != 0:
        sys.exit(f"bench-cli: {' '.join(argv)} failed ({result.returncode}): {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


class Row:
    def __init__(self, name, a, b, expect_a=0, expect_b=0, stdin=None, before=None):
        self.name, self.a, self.b = name, a, b
        self.expect = (expect_a, expect_b)
        self.stdin = stdin
        self.before = before  # untimed set-up before every run (e.g. re-create the item to delete)


def measure(row, env, runs, warmup):
    figures = {"a": [], "b": []}
    ratios = []
    for index in range(warmup + runs):
        order = ("a", "b") if index % 2 == 0 else ("b", "a")
        pair = {}
        for side in order:
            if row.before:
                row.before(side)
            argv = row.a if side == "a" else row.b
            code, wall, cpu, _ = spawn(argv, env, row.stdin)
            want = row.expect[0 if side == "a" else 1]
            if code != want:
                sys.exit(f"bench-cli: {row.name}: {' '.join(argv)} exited {code}, expected {want}")
            pair[side] = (wall, cpu)
        if index >= warmup:
            figures["a"].append(pair["a"])
            figures["b"].append(pair["b"])
            ratios.append(pair["a"][0] / pair["b"][0])
    med = lambda values: statistics.median(values)
    rss_runs = 3 if runs <= 3 else 5
    before = (lambda side: (lambda: row.before(side))) if row.before else (lambda side: None)
    return {
        "a_rss": peak_rss(row.a, env, row.stdin, rss_runs, before("a")),
        "b_rss": peak_rss(row.b, env, row.stdin, rss_runs, before("b")),
        "a_wall": med([f[0] for f in figures["a"]]), "b_wall": med([f[0] for f in figures["b"]]),
        "a_cpu": med([f[1] for f in figures["a"]]), "b_cpu": med([f[1] for f in figures["b"]]),
        "ratio": med(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
    }


def count_dbus(argv, env, stdin_path, provider):
    """Method calls argv makes on the session bus: (to the bus daemon, to the provider, sessions)."""
    monitor = subprocess.Popen(["dbus-monitor", "--session", "--profile", "type='method_call'"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    # dbus-monitor prints a header line, then NameAcquired/NameLost once it is a monitor.
    for _ in range(3):
        line = monitor.stdout.readline()
        if "NameLost" in line or "NameAcquired" in line:
            break
    code, _, _, _ = spawn(argv, env, stdin_path)
    time.sleep(0.3)  # let the monitor print the last messages
    monitor.terminate()
    output, _ = monitor.communicate()
    if code != 0:
        sys.exit(f"bench-cli: {' '.join(argv)} exited {code} while counting D-Bus calls")
    bus, secrets, sessions = 0, 0, 0
    for line in output.splitlines():
        fields = line.split("\t")
        if len(fields) < 8 or fields[0] != "mc":
            continue
        sender, destination, member = fields[3], fields[4], fields[7]
        if sender == provider or member == "BecomeMonitor":
            continue
        if destination == "org.freedesktop.DBus":
            bus += 1
        else:
            secrets += 1
            sessions += member == "OpenSession"
    return bus, secrets, sessions


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lockbox", required=True, help="the lockbox binary to measure")
    parser.add_argument("--quick", action="store_true", help="3 pairs per row (seconds): a smoke run")
    parser.add_argument("--runs", type=int, default=30, help="pairs per row (default 30)")
    parser.add_argument("--dbus", action="store_true", help="also count D-Bus method calls per command")
    args = parser.parse_args()
    runs, warmup = (3, 1) if args.quick else (args.runs, 3)
    lockbox = os.path.abspath(args.lockbox)
    secret_tool = shutil.which("secret-tool")
    if not secret_tool:
        sys.exit("bench-cli: secret-tool is missing (apt-get install libsecret-tools)")
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        sys.exit("bench-cli: no session bus; run inside scripts/dev/keyring-session.sh")

    work = tempfile.mkdtemp(prefix="lockbox-bench-cli.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKBOX_")}
    ss = ["--backend", "secret-service"]
    secret_file = os.path.join(work, "secret")
    with open(secret_file, "wb") as f:
        f.write(SECRET)
    try:
        # The Secret Service item both lookups read, stored by lockbox (with its attributes).
        run_checked([lockbox, *ss, "set", SERVICE, ACCOUNT], env, SECRET)
        # A 10-item file vault with a key file.
        vault, key = os.path.join(work, "vault.lockbox"), os.path.join(work, "vault.key")
        file_env = dict(env, LOCKBOX_VAULT=vault, LOCKBOX_KEY_FILE=key)
        run_checked([lockbox, "init", "--generate-key-file", key], file_env)
        for i in range(10):
            run_checked([lockbox, "--backend", "file", "set", SERVICE, f"user{i}"], file_env, SECRET)
        file_args = ["--backend", "file", "--vault", vault, "--key-file", key]

        def recreate(side):
            account = ACCOUNT_L if side == "a" else ACCOUNT_B
            run_checked([secret_tool, "store", "--label=bench", "service", SERVICE, "username", account], env, SECRET)

        rows = [
            Row("Secret Service lookup", [lockbox, *ss, "get", SERVICE, ACCOUNT],
                [secret_tool, "lookup", "service", SERVICE, "username", ACCOUNT]),
            Row("store (overwrite)", [lockbox, *ss, "set", SERVICE, ACCOUNT_L],
                [secret_tool, "store", "--label=bench", "service", SERVICE, "username", ACCOUNT_B], stdin=secret_file),
            Row("delete", [lockbox, *ss, "delete", SERVICE, ACCOUNT_L],
                [secret_tool, "clear", "service", SERVICE, "username", ACCOUNT_B], before=recreate),
            Row("start-up (`--version` / no arguments)", [lockbox, "--version"], [secret_tool], expect_b=2),
            Row("file vault get, key file, 10 items", [lockbox, *file_args, "get", SERVICE, "user3"],
                [secret_tool, "lookup", "service", SERVICE, "username", ACCOUNT]),
        ]
        print(f"lockbox: {lockbox}")
        print(f"B: {secret_tool}; {runs} pairs per row after {warmup} warm-up, alternating order; "
              f"load average before: {open('/proc/loadavg').read().split()[0:3]}")
        print()
        print("| | lockbox | secret-tool | ratio (median, min–max) | lockbox CPU | secret-tool CPU | peak RSS lockbox / secret-tool |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            r = measure(row, env, runs, warmup)
            print(f"| {row.name} | {r['a_wall'] * 1e3:.1f} ms | {r['b_wall'] * 1e3:.1f} ms | "
                  f"{r['ratio']:.2f} ({r['ratio_min']:.2f}–{r['ratio_max']:.2f}) | "
                  f"{r['a_cpu'] * 1e3:.1f} ms | {r['b_cpu'] * 1e3:.1f} ms | "
                  f"{r['a_rss'] / 1024:.1f} / {r['b_rss'] / 1024:.1f} MiB |", flush=True)
        print(f"\nload average after: {open('/proc/loadavg').read().split()[0:3]}")

        if args.dbus:
            owner = subprocess.run(
                ["dbus-send", "--session", "--print-reply=literal", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                 "org.freedesktop.DBus.GetNameOwner", "string:org.freedesktop.secrets"],
                env=env, capture_output=True, text=True).stdout.strip()
            recreate("a"); recreate("b")
            operations = [
                ("get / lookup", [lockbox, *ss, "get", SERVICE, ACCOUNT], None,
                 [secret_tool, "lookup", "service", SERVICE, "username", ACCOUNT], None),
                ("set / store", [lockbox, *ss, "set", SERVICE, ACCOUNT_L], secret_file,
                 [secret_tool, "store", "--label=bench", "service", SERVICE, "username", ACCOUNT_B], secret_file),
                ("list / search", [lockbox, *ss, "list", "--service", SERVICE], None,
                 [secret_tool, "search", "--all", "service", SERVICE], None),
                ("delete / clear", [lockbox, *ss, "delete", SERVICE, ACCOUNT_L], None,
                 [secret_tool, "clear", "service", SERVICE, "username", ACCOUNT_B], None),
            ]
            print("\nD-Bus method calls per command (dbus-monitor; to the bus daemon + to the Secret Service; "
                  "OpenSession = an encrypted-session negotiation):\n")
            print("| operation | lockbox: total (bus + provider) | secret-tool: total (bus + provider) | lockbox OpenSession | secret-tool OpenSession |")
            print("|---|---:|---:|---:|---:|")
            more = []
            for name, a, a_in, b, b_in in operations:
                la = count_dbus(a, env, a_in, owner)
                sb = count_dbus(b, env, b_in, owner)
                print(f"| {name} | {la[0] + la[1]} ({la[0]} + {la[1]}) | {sb[0] + sb[1]} ({sb[0]} + {sb[1]}) | {la[2]} | {sb[2]} |", flush=True)
                if la[0] + la[1] > sb[0] + sb[1]:
                    more.append(f"{name}: {la[0] + la[1]} calls against {sb[0] + sb[1]}")
            if more:
                sys.exit("bench-cli: lockbox makes more D-Bus calls than secret-tool for " + "; ".join(more))
    finally:
        for account in (ACCOUNT, ACCOUNT_B, ACCOUNT_L):
            subprocess.run([secret_tool, "clear", "service", SERVICE, "username", account], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
