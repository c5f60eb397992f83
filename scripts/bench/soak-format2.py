#!/usr/bin/env python3
"""Reliability soak of a format-2 vault with real `lockbox` processes (docs/SECURITY-TESTING.md).

Two runs on one fresh format-2 vault each (made with `lockbox init --format 2 --generate-key-file`):

  kills   WRITERS concurrent workers each start `lockbox set` processes one after another and
          SIGKILL about half of them at a random moment (in [0, 2 x the current estimate of one
          set's time], the estimate following the outcomes), until KILLS processes were killed in
          all. Every N kills, and at the end, the vault must open (`lockbox list --json` exit 0,
          and the independent reader scripts/format/lockbox_format.py) and hold every acknowledged write
          (exit 0) with its value; an item whose writer was killed holds the old value or the new
          one (then the new one counts as acknowledged from there on).
  writes  WRITERS concurrent workers x SETS `lockbox set` each (distinct items), no kills: every
          set exits 0 and every item is there with its value (zero lost).

Usage: scripts/bench/soak-format2.py LOCKBOX [--kills N] [--writers W] [--sets S] [--check-every N]
  defaults: 500 kills, 8 writers, 250 sets each (the issue's figures); --quick: 40 kills and
  8 x 25 sets. Prints the figures and exits 0 if nothing was lost, 1 otherwise.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "format"))
import lockbox_format as fmt  # noqa: E402  (the independent reader of docs/FORMAT.md)


def read_items(vault, key_file):
    """Every item of the vault as {(service, account): secret}, through lockbox_format.py."""
    vault_id, key_check, slots, rows = fmt.v2_read(vault)
    with open(key_file, "rb") as f:
        key = fmt.decode_key_file(f.read())
    data_key, _ = fmt.open_data_key(vault_id, slots, [(fmt.SLOT_KEY_FILE, key)])
    keys = fmt.v2_keys(data_key)
    if not fmt.bindings.sodium_memcmp(keys[2], key_check):
        raise SystemExit("soak: the key check does not match")
    nfc = lambda s: __import__("unicodedata").normalize("NFC", s)
    items = {}
    for address, metadata, secret in rows:
        item = fmt.v2_open_item(keys, vault_id, address, metadata, secret, nfc)
        items[(item["service"], item["account"])] = item["secret"].decode("utf-8")
    return items


class Soak:
    def __init__(self, lockbox, folder):
        self.lockbox = lockbox
        self.vault = os.path.join(folder, "v.lockbox")
        self.key = os.path.join(folder, "v.key")
        self.env = {"PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": os.path.join(folder, "config"),
                    "HOME": folder}
        subprocess.run([lockbox, "init", "--format", "2", "--vault", self.vault, "--generate-key-file", self.key],
                       check=True, env=self.env, stderr=subprocess.DEVNULL)
        self.lock = threading.Lock()
        self.acknowledged = {}   # account -> value
        self.pending = {}        # account -> set of values a killed writer may have stored
        self.running = {}        # account -> the value a running writer is storing (checks run meanwhile)
        self.problems = []

    def start_set(self, account, value):
        process = subprocess.Popen([self.lockbox, "set", "--vault", self.vault, "--key-file", self.key, "soak", account],
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env)
        try:
            process.stdin.write(value.encode())
            process.stdin.close()
        except BrokenPipeError:
            pass
        return process

    def check(self, what):
        """The vault opens (lockbox and lockbox_format.py) and holds every write acknowledged
        before the check began; other writers keep writing meanwhile, so an item may also hold a
        value written since (acknowledged, running, or from a writer killed since)."""
        with self.lock:
            before = dict(self.acknowledged)
        listed = subprocess.run([self.lockbox, "list", "--vault", self.vault, "--key-file", self.key, "--json"],
                                env=self.env, capture_output=True)
        if listed.returncode != 0:
            self.problems.append(f"{what}: lockbox list exit {listed.returncode}: {listed.stderr.decode()[-300:]}")
            return
        items = read_items(self.vault, self.key)
        with self.lock:
            for account, value in before.items():
                found = items.get(("soak", account))
                later = {self.acknowledged.get(account), self.running.get(account)} | self.pending.get(account, set())
                if found == value or (found is not None and found in later):
                    if found in self.pending.get(account, ()):
                        self.acknowledged[account] = found  # a killed writer's new value: it counts now
                    continue
                self.problems.append(f"{what}: soak/{account} holds {found!r:.40}, acknowledged {value!r:.40}")

    def kills(self, total, writers, check_every):
        killed = [0]
        completed = [0]
        started = time.monotonic()

        def worker(index):
            rng = random.Random()
            first = time.monotonic()
            calibration = self.start_set(f"w{index}-calibration", "uncut")
            calibration.wait()
            estimate = max(0.005, time.monotonic() - first)
            with self.lock:
                if calibration.returncode == 0:
                    self.acknowledged[f"w{index}-calibration"] = "uncut"
            round_ = 0
            while True:
                with self.lock:
                    if killed[0] >= total or self.problems:
                        return
                    mine = [a for a in self.acknowledged if a.startswith(f"w{index}-")]
                # Every other set overwrites one of this worker's items (items are a worker's own,
                # so the old-or-new rule is exact).
                account = rng.choice(mine) if round_ % 2 == 1 and mine else f"w{index}-r{round_}"
                value = f"value-{index}-{round_}-" + "x" * rng.randint(1, 2000)
                with self.lock:
                    self.running[account] = value
                process = self.start_set(account, value)
                time.sleep(rng.uniform(0, 2 * estimate))
                if process.poll() is None:
                    process.send_signal(signal.SIGKILL)
                process.wait()
                round_ += 1
                with self.lock:
                    del self.running[account]
                    if process.returncode == 0:
                        self.acknowledged[account] = value
                        self.pending.pop(account, None)  # superseded: a killed value may no longer be there
                        completed[0] += 1
                        estimate *= 0.9
                    elif process.returncode == -signal.SIGKILL:
                        self.pending.setdefault(account, set()).add(value)
                        killed[0] += 1
                        estimate *= 1.1
                    else:
                        self.problems.append(f"a writer failed without a kill: exit {process.returncode}: "
                                             f"{process.stderr.read().decode()[-300:]}")
                    due = killed[0] % check_every == 0 and process.returncode != 0
                if due:
                    self.check(f"after {killed[0]} kills")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.check("at the end")
        return killed[0], completed[0], time.monotonic() - started

    def writes(self, writers, sets):
        failures = []
        started = time.monotonic()

        def worker(index):
            for item in range(sets):
                process = self.start_set(f"w{index}-i{item}", f"value-{index}-{item}")
                process.wait()
                if process.returncode != 0:
                    failures.append(f"w{index}-i{item}: exit {process.returncode}: {process.stderr.read().decode()[-200:]}")
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        items = read_items(self.vault, self.key)
        lost = [f"w{i}-i{n}" for i in range(writers) for n in range(sets)
                if items.get(("soak", f"w{i}-i{n}")) != f"value-{i}-{n}"]
        return failures, lost, elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lockbox")
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--sets", type=int, default=250)
    parser.add_argument("--check-every", type=int, default=25)
    parser.add_argument("--quick", action="store_true", help="40 kills, 25 sets per writer")
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.kills, arguments.sets = 40, 25
    lockbox = os.path.abspath(arguments.lockbox)
    ok = True
    with tempfile.TemporaryDirectory(prefix="lockbox-soak.") as folder:
        os.mkdir(os.path.join(folder, "kills"))
        soak = Soak(lockbox, os.path.join(folder, "kills"))
        killed, completed, seconds = soak.kills(arguments.kills, arguments.writers, arguments.check_every)
        print(f"kills: {arguments.writers} concurrent writers, {killed} SIGKILLed and {completed} completed sets in "
              f"{seconds:.1f} s; {len(soak.acknowledged)} acknowledged items checked "
              f"{'every ' + str(arguments.check_every) + ' kills and '}at the end: "
              f"{'all present, the vault always opened' if not soak.problems else str(len(soak.problems)) + ' PROBLEMS'}")
        for problem in soak.problems[:20]:
            print("  " + problem, file=sys.stderr)
        ok = ok and not soak.problems and killed >= arguments.kills
        os.mkdir(os.path.join(folder, "writes"))
        soak = Soak(lockbox, os.path.join(folder, "writes"))
        failures, lost, seconds = soak.writes(arguments.writers, arguments.sets)
        total = arguments.writers * arguments.sets
        print(f"writes: {arguments.writers} processes x {arguments.sets} sets = {total} in {seconds:.1f} s "
              f"({total / seconds:.0f} sets/s): {len(failures)} failed, {len(lost)} lost")
        for line in (failures + lost)[:20]:
            print("  " + line, file=sys.stderr)
        ok = ok and not failures and not lost
    print(f"load average at the end: {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
