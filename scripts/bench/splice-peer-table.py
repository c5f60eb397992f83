#!/usr/bin/env python3
"""Copies the peer benchmark's result tables into docs/PERFORMANCE.md, so that file carries the
table of the latest `scripts/bench/bench-peers.sh` run itself (bench-peers.sh calls this after a run).

Usage: scripts/bench/splice-peer-table.py REPORT PERFORMANCE_MD

Takes from REPORT (docs/PERFORMANCE-PEERS.md as generated) the run's date, load and commit lines
and the sections "Summary: Lockbox time ÷ peer time", the four per-store tables and "Peak memory
of one lookup process", and replaces what lies between the markers
<!-- peer-table:begin --> and <!-- peer-table:end --> in PERFORMANCE_MD. Exits 1 if a marker or
a section is missing, rather than write a half table.
"""
import re
import sys

BEGIN, END = "<!-- peer-table:begin -->", "<!-- peer-table:end -->"


def sections(text):
    """Heading line -> body, for every '## ' section of the report."""
    out, current, lines = {}, None, []
    for line in text.splitlines():
        if line.startswith("## "):
            if current:
                out[current] = "\n".join(lines).strip()
            current, lines = line[3:].strip(), []
        elif current:
            lines.append(line)
    if current:
        out[current] = "\n".join(lines).strip()
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    report_path, target_path = sys.argv[1], sys.argv[2]
    report = open(report_path, encoding="utf-8").read()
    target = open(target_path, encoding="utf-8").read()
    if BEGIN not in target or END not in target:
        sys.exit(f"splice-peer-table: {target_path} has no {BEGIN} ... {END} markers")
    found = sections(report)
    wanted = [h for h in found if h.startswith("Summary") or h.startswith("Secret Service (") or h.startswith("Encrypted file,")
              or h.startswith("Peak memory")]
    if not any(h.startswith("Summary") for h in wanted) or not any(h.startswith("Peak memory") for h in wanted):
        sys.exit(f"splice-peer-table: {report_path} lacks the summary or the peak-memory section")
    how = found.get("How it was measured", "")
    facts = [line for line in how.splitlines() if re.match(r"- (Date|Machine|\*\*Load\*\*|Lockbox|Peers):", line)]
    parts = [BEGIN,
             "_Copied from [PERFORMANCE-PEERS.md](PERFORMANCE-PEERS.md) by `scripts/bench/bench-peers.sh` after its run; "
             "the method, the D-Bus call counts and the notes on each difference are there._",
             "",
             "Produced by: `scripts/bench/bench-peers.sh` (one run, tools interleaved round by round).",
             ""] + facts
    for heading in wanted:
        parts += ["", f"### {heading}", "", found[heading]]
    parts.append(END)
    start, end = target.index(BEGIN), target.index(END) + len(END)
    open(target_path, "w", encoding="utf-8").write(target[:start] + "\n".join(parts) + target[end:])
    print(f"splice-peer-table: {len(wanted)} tables copied into {target_path}")


if __name__ == "__main__":
    main()
