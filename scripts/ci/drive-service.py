#!/usr/bin/env python3
"""Drives the example Hummingbird service (Examples/HummingbirdService) with concurrent requests.

Usage:
  drive-service.py check PORT [PORT ...]
      The test command's scenario, against one or more service processes on ONE vault: tokens
      written through one process read back through another (nothing lost), 20 concurrent PIN
      verifies with /health probes beside them, wrong PINs counted across processes into a
      lockout, one device ID for all. Exits 1 (naming the step) if an outcome is not as expected.

  drive-service.py bench PORT PID [--rounds N] [--label TEXT] [--json FILE]
      The starvation benchmark against one process: rounds of 20 concurrent PIN verifies while
      /health is probed every 5 ms (p50/p99/max latency), verifies/s, the service's peak RSS
      (VmHWM of PID); then 100 concurrent token reads and 100 concurrent token writes (p50/p99).
      Prints a table row per figure; asserts nothing but that every request succeeded.

Only the standard library: http.client in threads (one connection per request in flight).
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time

SERVICE_PINS = {f"user{i}": f"{4700 + 13 * i:04d}" for i in range(20)}


def request(port, method, path, body=None, timeout=60):
    """One request on a new connection; returns (status, headers, body bytes, seconds)."""
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        data = response.read()
        return response.status, dict(response.getheaders()), data, time.perf_counter() - start
    finally:
        connection.close()


def concurrently(calls):
    """Runs every call (a zero-argument function) on its own thread, released together; returns results in order."""
    results = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(index, call):
        barrier.wait()
        try:
            results[index] = call()
        except Exception as error:  # a failed request is a result the caller checks
            results[index] = error

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


class Prober:
    """Probes GET /health every `interval` seconds on its own thread, recording each latency."""

    def __init__(self, port, interval=0.005):
        self.port, self.interval = port, interval
        self.latencies, self.failures = [], 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        while not self.stopping.is_set():
            try:
                status, _, body, seconds = request(self.port, "GET", "/health", timeout=120)
                if status == 200 and body == b"ok":
                    self.latencies.append(seconds)
                else:
                    self.failures += 1
            except Exception:
                self.failures += 1
            time.sleep(self.interval)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join()


def percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def fail(step, detail):
    print(f"drive-service: FAILED: {step}: {detail}", file=sys.stderr)
    sys.exit(1)


def expect(step, condition, detail):
    if not condition:
        fail(step, detail)
    print(f"ok: {step}")


def oauth(user, generation=0):
    return json.dumps({
        "access_token": f"access-{user}-{generation}",
        "refresh_token": f"refresh-{user}-{generation}",
        "token_type": "Bearer",
        "expires_in": 3600,
    }).encode()


def status_of(result):
    return result if isinstance(result, Exception) else result[0]


def check(ports):
    def port(i):
        return ports[i % len(ports)]

    status, _, body, _ = request(ports[0], "GET", "/health")
    expect("health", status == 200 and body == b"ok", f"{status} {body!r}")

    # Tokens: 40 users written at once, alternating processes; each read back through another.
    users = [f"token-user{i}" for i in range(40)]
    writes = concurrently([lambda i=i, u=u: request(port(i), "PUT", f"/users/{u}/token", oauth(u)) for i, u in enumerate(users)])
    expect("40 concurrent token writes", all(status_of(r) == 204 for r in writes), [status_of(r) for r in writes])
    reads = concurrently([lambda i=i, u=u: request(port(i + 1), "GET", f"/users/{u}/token") for i, u in enumerate(users)])
    lost = [u for u, r in zip(users, reads) if status_of(r) != 200 or json.loads(r[2]).get("refresh_token") != f"refresh-{u}-0"]
    expect(f"every token read back through another process ({len(ports)} processes)", not lost, f"lost or wrong: {lost}")
    status, _, body, _ = request(ports[0], "GET", "/users/nobody/token")
    expect("no tokens: 404 no-tokens", status == 404 and json.loads(body).get("code") == "no-tokens", f"{status} {body!r}")

    # PINs: 20 profiles set at once, then 20 concurrent right verifies, /health probed beside them.
    sets = concurrently([lambda i=i, u=u, p=p: request(port(i), "PUT", f"/users/{u}/pin", p.encode())
                         for i, (u, p) in enumerate(SERVICE_PINS.items())])
    expect("20 concurrent PIN sets", all(status_of(r) == 204 for r in sets), [status_of(r) for r in sets])
    status, _, body, _ = request(ports[0], "PUT", "/users/guessable/pin", b"1234")
    expect("a guessable PIN is refused: 422 pin-rejected", status == 422 and json.loads(body)["code"] == "pin-rejected", f"{status} {body!r}")
    with Prober(ports[0]) as prober:
        verifies = concurrently([lambda i=i, u=u, p=p: request(port(i + 1), "POST", f"/users/{u}/pin/verify", p.encode())
                                 for i, (u, p) in enumerate(SERVICE_PINS.items())])
    expect("20 concurrent right PIN verifies: 204", all(status_of(r) == 204 for r in verifies), [status_of(r) for r in verifies])
    expect("/health answered during the verifies", prober.failures == 0 and len(prober.latencies) > 0,
           f"{len(prober.latencies)} answers, {prober.failures} failures")
    print(f"   /health during 20 verifies: {len(prober.latencies)} probes, p99 {percentile(prober.latencies, 0.99) * 1000:.1f} ms,"
          f" max {max(prober.latencies) * 1000:.1f} ms (not asserted: a loaded machine)")

    # Wrong PINs alternate between processes: the count is shared, the 6th try is locked out.
    user, right = "user0", SERVICE_PINS["user0"]
    failures = []
    for attempt in range(5):
        status, _, body, _ = request(port(attempt), "POST", f"/users/{user}/pin/verify", b"0001")
        if status != 401:
            fail("wrong PIN: 401", f"try {attempt + 1}: {status} {body!r}")
        failures.append(int(json.loads(body)["failures"]))
    expect("5 wrong PINs across processes count 1..5", failures == [1, 2, 3, 4, 5], failures)
    status, headers, body, _ = request(port(5), "POST", f"/users/{user}/pin/verify", right.encode())
    retry_after = int(headers.get("Retry-After", "0"))
    expect("then even the right PIN is locked out: 429 with Retry-After",
           status == 429 and json.loads(body)["code"] == "pin-locked-out" and 0 < retry_after <= 60, f"{status} {headers} {body!r}")
    lockouts = concurrently([lambda i=i: request(port(i), "POST", f"/users/{user}/pin/verify", right.encode()) for i in range(10)])
    expect("10 concurrent tries while locked out: all 429", all(status_of(r) == 429 for r in lockouts), [status_of(r) for r in lockouts])
    status, _, body, _ = request(ports[0], "POST", "/users/nobody/pin/verify", b"4739")
    expect("no PIN set: 404 pin-not-set", status == 404 and json.loads(body)["code"] == "pin-not-set", f"{status} {body!r}")

    # One device ID, however many ask at once, through every process.
    ids = concurrently([lambda i=i: request(port(i), "GET", "/device-id") for i in range(10)])
    values = {r[2] for r in ids if not isinstance(r, Exception) and r[0] == 200}
    expect("10 concurrent device-ID requests agree", len(values) == 1 and all(status_of(r) == 200 for r in ids), values)
    print("drive-service: all checks passed")


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def bench(port, pid, rounds, label, json_path):
    results = {"label": label}
    pins = list(SERVICE_PINS.items())
    sets = concurrently([lambda u=u, p=p: request(port, "PUT", f"/users/{u}/pin", p.encode()) for u, p in pins])
    if not all(status_of(r) in (204, 422) for r in sets):  # 422: set in an earlier run on this vault
        fail("bench: PIN set", [status_of(r) for r in sets])

    # Starvation: rounds of 20 concurrent right verifies, /health probed throughout.
    verify_count, start = 0, time.perf_counter()
    with Prober(port) as prober:
        time.sleep(0.05)
        for _ in range(rounds):
            verifies = concurrently([lambda u=u, p=p: request(port, "POST", f"/users/{u}/pin/verify", p.encode(), timeout=300) for u, p in pins])
            if not all(status_of(r) == 204 for r in verifies):
                fail("bench: verify", [status_of(r) for r in verifies])
            verify_count += len(verifies)
        elapsed = time.perf_counter() - start
    health = prober.latencies
    results.update({
        "verifies": verify_count, "verify_seconds": round(elapsed, 3), "verifies_per_second": round(verify_count / elapsed, 1),
        "health_probes": len(health), "health_p50_ms": round(percentile(health, 0.5) * 1000, 1),
        "health_p99_ms": round(percentile(health, 0.99) * 1000, 1), "health_max_ms": round(max(health) * 1000, 1),
        "health_failures": prober.failures,
    })

    # 100 concurrent token writes, then 100 concurrent reads (distinct users).
    users = [f"bench-user{i}" for i in range(100)]
    for name, calls in (
        ("write", [lambda u=u: request(port, "PUT", f"/users/{u}/token", oauth(u, 1), timeout=300) for u in users]),
        ("read", [lambda u=u: request(port, "GET", f"/users/{u}/token", timeout=300) for u in users]),
    ):
        answers = concurrently(calls)
        expected = 204 if name == "write" else 200
        if not all(status_of(r) == expected for r in answers):
            fail(f"bench: token {name}", sorted({str(status_of(r)) for r in answers}))
        latencies = [r[3] for r in answers]
        results[f"token_{name}_p50_ms"] = round(percentile(latencies, 0.5) * 1000, 1)
        results[f"token_{name}_p99_ms"] = round(percentile(latencies, 0.99) * 1000, 1)
    results["peak_rss_mib"] = round(peak_rss_kib(pid) / 1024, 1)

    print(f"{label}: {verify_count} verifies in {elapsed:.2f} s ({results['verifies_per_second']}/s); "
          f"/health p50 {results['health_p50_ms']} ms, p99 {results['health_p99_ms']} ms, max {results['health_max_ms']} ms "
          f"({len(health)} probes); token writes p50/p99 {results['token_write_p50_ms']}/{results['token_write_p99_ms']} ms, "
          f"reads {results['token_read_p50_ms']}/{results['token_read_p99_ms']} ms; peak RSS {results['peak_rss_mib']} MiB")
    if json_path:
        with open(json_path, "a") as f:
            f.write(json.dumps(results) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    check_parser = sub.add_parser("check")
    check_parser.add_argument("ports", type=int, nargs="+")
    bench_parser = sub.add_parser("bench")
    bench_parser.add_argument("port", type=int)
    bench_parser.add_argument("pid", type=int)
    bench_parser.add_argument("--rounds", type=int, default=5)
    bench_parser.add_argument("--label", default="service")
    bench_parser.add_argument("--json")
    args = parser.parse_args()
    if args.command == "check":
        check(args.ports)
    else:
        bench(args.port, args.pid, args.rounds, args.label, args.json)


if __name__ == "__main__":
    main()
