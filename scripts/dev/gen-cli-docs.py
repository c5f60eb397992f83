#!/usr/bin/env python3
"""Renders the lockbox CLI reference, man page and shell completions from the binary itself.

    python3 scripts/dev/gen-cli-docs.py --binary PATH [--root DIR] [--out DIR]

Writes, under --out (default: the repository root):
    docs/CLI.md             Markdown reference of every command
    docs/man/lockbox.1      roff man page (man -l docs/man/lockbox.1)
    completions/lockbox.bash, completions/_lockbox, completions/lockbox.fish

Usually run through scripts/dev/gen-cli-docs.sh, which builds the binary and has a --check mode.

Sources, so that a change to the command definitions changes the output:
  * commands, arguments, options, defaults, help texts: `lockbox --experimental-dump-help`
    (argument-parser's ToolInfo JSON, serialization version 0);
  * the version in the man page header: `lockbox --version`;
  * the exit-code table: the "Exit codes:" paragraph of the `exit-codes` command's discussion
    (what `lockbox help exit-codes` shows), checked against the raw values of `enum ExitStatus`
    in Sources/LockboxCLI/ExitStatus.swift; the two must list the same codes or this script fails;
  * the vault options: hidden from `--help` (shouldDisplay false) but documented here, as the
    arguments whose section title is VAULT_OPTIONS_TITLE and that have a description;
  * EXAMPLES (man page): every "Example…: lockbox …" line of the commands' discussions;
  * ENVIRONMENT: the descriptions below, checked against the variables the code reads
    (`environment["NAME"]` / `getenv("NAME")` in Sources/); an undocumented variable fails;
  * completions: `lockbox --generate-completion-script bash|zsh|fish`, verbatim.
The prose about secret input, files and the environment is written here, from reading
Sources/LockboxCLI (SecretInput.swift, VaultOptions.swift) and Sources/Lockbox.

Output is deterministic: no dates, no absolute or build paths. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

TOOL = "lockbox"

# The title of the option group every command that opens a store takes (`VaultOptions.title`):
# hidden from `--help`, documented in full here.
VAULT_OPTIONS_TITLE = "Vault options"

# The command whose discussion holds the exit-code table.
EXIT_CODES_COMMAND = "exit-codes"

# The man page's date (.TH): fixed, so the page changes only when the commands do. Bump it with
# the version (it shows in the footer beside "Lockbox VERSION").
MAN_DATE = "2026-11-21"

# Words ending in a period that do not end a sentence (roff would add sentence space after them).
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.")

# Variables the code reads, with what they do. Markdown subset: `code`, **bold**.
# LOCKBOX_* ones must all be read somewhere in Sources/, and every variable read there must be here.
ENVIRONMENT = [
    ("LOCKBOX_STORE",
     "The store when `--store` is not given: `auto`, `secret-service`, `file` or `postgres`. Any other value "
     "is a usage error (exit 64)."),
    ("LOCKBOX_BACKEND",
     "The old name of `LOCKBOX_STORE`, read when that is not set (as `--backend`, not shown in help, "
     "is still accepted for `--store`)."),
    ("LOCKBOX_PROFILE",
     "The profile when `--profile` is not given (else `default`). Each profile records the store "
     "it uses in the settings file."),
    ("LOCKBOX_VAULT",
     "The vault file when `--vault` is not given. Setting it selects the file store."),
    ("LOCKBOX_KEY_FILE",
     "The path of the key file when `--key-file` is not given (a path, never the key itself). "
     "Setting it selects the file store."),
    ("LOCKBOX_POSTGRES_URL_FILE",
     "With the `postgres` store, when `--postgres-url-file` is not given: the file (a regular file, mode "
     "0600) whose first line is the database URL."),
    ("LOCKBOX_POSTGRES_URL",
     "With the `postgres` store, when no URL file is named: the database URL itself, "
     "`postgresql://USER:PASSWORD@HOST:PORT/DATABASE` (several `HOST:PORT` for failover). It holds the "
     "database password: prefer the file, which other users' processes cannot read in `/proc`."),
    ("LOCKBOX_LOG",
     "`debug` turns on the trace that `--verbose` gives: what lockbox decides and does (store "
     "choice, paths, credential kinds, timings) on standard error; never secrets or argument values."),
    ("XDG_DATA_HOME",
     "Where the default vault lives (`$XDG_DATA_HOME/lockbox/vault.lockbox`); ignored unless absolute."),
    ("XDG_CONFIG_HOME",
     "Where the settings file lives (`$XDG_CONFIG_HOME/lockbox/settings.json`); ignored unless absolute."),
    ("HOME",
     "The base of the default paths when the XDG variables are unset."),
    ("LOCKBOX_TPM_TCTI",
     "The TPM for TPM2 key slots, as a tpm2-tss TCTI string (e.g. `swtpm:host=127.0.0.1,port=2321`); "
     "default `device:/dev/tpmrm0`, the kernel's resource manager. `lockbox doctor` shows whether it answers."),
    ("LOCKBOX_TPM_TIMEOUT",
     "The most seconds one TPM operation (connecting, then every command it sends) may take, e.g. `5` or `0.5`; "
     "default 5. A TPM that does not answer in time exits 60."),
    ("TSS2_LOG",
     "tpm2-tss's own logging; lockbox sets `all+NONE` unless it is already set, and reports TPM errors itself."),
    ("DBUS_SESSION_BUS_ADDRESS",
     "The D-Bus session bus on which the Secret Service (e.g. gnome-keyring) is reached; "
     "`lockbox doctor` shows it."),
]

FILES = [
    ("$XDG_DATA_HOME/lockbox/vault.lockbox",
     "The default file vault (`~/.local/share/lockbox/vault.lockbox`), mode 0600; "
     "`--vault` or `LOCKBOX_VAULT` names another. Its format is described in docs/FORMAT.md."),
    ("VAULT.lock",
     "A lock file beside each vault (the vault's path plus `.lock`) that serialises access "
     "across processes; it is never deleted."),
    ("$XDG_CONFIG_HOME/lockbox/settings.json",
     "Which store each profile uses, recorded the first time one is chosen "
     "(`~/.config/lockbox/settings.json`); not secret, mode 0600."),
    ("VAULT.locks/",
     "Lock files (`pin-locks/`, `token-locks/`, `id-locks/`) beside each vault that serialise PIN "
     "attempts, token refreshes and first-use device IDs across processes; named by a hash, never "
     "by the item. For the Secret Service: `/run/user/UID/lockbox/`, else "
     "`~/.local/state/lockbox/` in the home of the user's password entry. Never chosen by "
     "environment variables, so every process reaching a store meets the same locks."),
]

SECRETS_INTRO = (
    "No command takes a secret (a stored secret, passphrase, PIN or token) as a command-line "
    "argument or from an environment variable, where `ps`, `/proc/PID/cmdline` and shell history "
    "would show it. A secret enters in one of three ways:"
)

SECRETS_WAYS = [
    "**Standard input.** `lockbox set` reads the secret to the end of its standard input (one "
    "trailing newline is dropped unless `--raw`); `lockbox token set` reads the OAuth token "
    "response JSON; the `pin` commands read one PIN per line when standard input is not a "
    "terminal (`pin set` reads it twice, `pin change` the old PIN and then the new one twice).",
    "**An open file descriptor**, read up to the first newline: the shell opens it, e.g. "
    "`lockbox get com.example.api alice --passphrase-fd 3 3< passphrase.txt`. `set` refuses "
    "`--passphrase-fd 0`, since standard input carries the secret.",
    "**A prompt on the terminal** (`/dev/tty`) with echo off, when neither is given. A new "
    "passphrase or secret is asked twice and both entries must match. Without a terminal the "
    "command fails rather than wait: exit 64 when a secret is missing, 40 when a locked vault "
    "has no credential, 13 when a `wipe` is not confirmed.",
]

SECRETS_AFTER = [
    "Key files are named by their path (`--key-file`, `LOCKBOX_KEY_FILE`), never given by value, "
    "and must have mode 0600 or tighter (else exit 8). The command of `token get --refresh-with` "
    "gets the refresh token on its standard input, never in its arguments or environment. "
    "`get` and `token get` write the secret alone to standard output; every status message goes "
    "to standard error.",
]

JSON_OUTPUT = [
    "Every command that reports something takes `--json` and then prints one JSON value on standard "
    "output in one dialect: camelCase keys (`openedThisHandle`, `expiresAt`, `deviceId`), "
    "pretty-printed with two-space indentation and sorted keys, dates in ISO 8601 (UTC), numbers as "
    "numbers, an absent value as `null`, and an empty array or object as `[]` or `{}`. "
    "`list --json-lines` is the one exception by design: one compact object per line, as JSON lines are.",
    "With `--json`, a failure is reported on standard error as a JSON object instead of the "
    "`lockbox: error[CODE]: message` line: `{\"code\": CODE, \"exitCode\": N, \"message\": TEXT}`, where "
    "CODE is the stable error code (`usage` for an error in the command line itself) and N the exit "
    "status. The message never holds a secret or a value typed on the command line.",
]

# Said in both documents, after the vault options' heading and the environment's table.
VAULT_OPTIONS_INTRO = ("to choose the store and unlock the file vault. They may also be written before the subcommand "
                       "(`lockbox --store file get SERVICE ACCOUNT`). A command's `--help` names them in one closing "
                       "line; `--help-all` describes them.")
ENVIRONMENT_AFTER = ("An option always wins over its variable. No variable carries a secret of the vault; "
                     "only `LOCKBOX_POSTGRES_URL` may carry the database's password, when you put it there.")

SEE_ALSO = ["secret-tool(1)", "gnome-keyring-daemon(1)", "keyctl(1)", "keyrings(7)"]


class GenerationError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Reading the binary and the sources


def run_binary(binary: str, *args: str) -> str:
    with tempfile.TemporaryDirectory(prefix="lockbox-clidocs-home.") as home:
        # A clean environment: nothing of the caller's (LOCKBOX_*, COLUMNS, locale) can leak in.
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "LC_ALL": "C.UTF-8"}
        result = subprocess.run([binary, *args], env=env, capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise GenerationError(f"`lockbox {' '.join(args)}` exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def exit_status_cases(root: Path) -> dict[int, str]:
    """The raw values of `enum ExitStatus` in Sources/LockboxCLI/ExitStatus.swift."""
    path = root / "Sources/LockboxCLI/ExitStatus.swift"
    text = path.read_text(encoding="utf-8")
    match = re.search(r"enum ExitStatus\b[^{]*\{(.*?)\n\s*init\(", text, re.S)
    if not match:
        raise GenerationError(f"{path.relative_to(root)}: no `enum ExitStatus {{ case … = N … init(` found")
    cases = {}
    for name, value in re.findall(r"^\s*case\s+(\w+)\s*=\s*(-?\d+)\s*$", match.group(1), re.M):
        cases[int(value)] = name
    if not cases:
        raise GenerationError(f"{path.relative_to(root)}: `enum ExitStatus` has no `case name = N`")
    return cases


def environment_reads(root: Path) -> dict[str, list[str]]:
    """Variables read by name anywhere in Sources/: `environment["X"]` or `getenv("X")`."""
    found: dict[str, list[str]] = {}
    pattern = re.compile(r'(?:environment\s*\[\s*|getenv\(\s*)"([A-Z][A-Z0-9_]*)"')
    for path in sorted((root / "Sources").rglob("*.swift")):
        for name in pattern.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, []).append(str(path.relative_to(root)))
    return found


def check_environment(root: Path) -> None:
    read = environment_reads(root)
    documented = {name for name, _ in ENVIRONMENT}
    problems = []
    for name in sorted(set(read) - documented):
        problems.append(f"{name} is read in {', '.join(sorted(set(read[name])))} but is not documented: "
                        f"add it to ENVIRONMENT in scripts/dev/gen-cli-docs.py")
    for name in sorted(documented - set(read)):
        if name.startswith("LOCKBOX_"):
            problems.append(f"{name} is documented in scripts/dev/gen-cli-docs.py but no longer read in Sources/")
    if problems:
        raise GenerationError("\n".join(problems))


# ---------------------------------------------------------------------------------------------
# The command model


class Command:
    def __init__(self, info: dict, path: list[str]):
        self.info = info
        self.path = path + [info["commandName"]]
        self.name = " ".join(self.path)
        self.abstract = info.get("abstract", "").strip()
        self.discussion = info.get("discussion", "").strip()
        self.arguments = [a for a in info.get("arguments", []) if is_documented(a)]
        self.subcommands = [Command(s, self.path) for s in info.get("subcommands", [])
                            if s.get("shouldDisplay", True) and s["commandName"] != "help"]

    def walk(self):
        yield self
        for sub in self.subcommands:
            yield from sub.walk()

    @property
    def anchor(self) -> str:
        return "-".join(self.path)

    def own_arguments(self) -> list[dict]:
        """Arguments without the automatic --help and --version."""
        return [a for a in self.arguments if not is_builtin(a)]


def is_documented(arg: dict) -> bool:
    """Shown by `--help`, or one of the vault options (hidden there, shown by `--help-all`);
    an option hidden without a description (`--backend`, an old name) is not documented."""
    if arg.get("shouldDisplay", True):
        return True
    return arg.get("sectionTitle") == VAULT_OPTIONS_TITLE and bool(arg.get("abstract"))


def is_builtin(arg: dict) -> bool:
    return arg["kind"] == "flag" and arg.get("preferredName", {}).get("name") in ("help", "version")


def signature(arg: dict) -> str:
    return json.dumps({k: arg.get(k) for k in ("kind", "names", "abstract", "valueName", "defaultValue",
                                               "isOptional", "isRepeating", "allValues")}, sort_keys=True)


def shared_options(root: Command) -> list[dict]:
    """The option group most commands take (VaultOptions): options identical, in the same
    order, in more than half of the leaf commands."""
    leaves = [c for c in root.walk() if not c.subcommands and c is not root]
    counts: dict[str, int] = {}
    first: dict[str, dict] = {}
    for command in leaves:
        for arg in command.own_arguments():
            if arg["kind"] == "positional":
                continue
            key = signature(arg)
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, arg)
    shared_keys = {k for k, n in counts.items() if n * 2 > len(leaves)}
    # Keep the order in which the first command that has them all lists them.
    for command in leaves:
        keys = [signature(a) for a in command.own_arguments() if signature(a) in shared_keys]
        if set(keys) == shared_keys:
            return [first[k] for k in keys]
    return []


def dash_name(name: dict) -> str:
    prefix = {"short": "-", "long": "--", "longWithSingleDash": "-"}[name["kind"]]
    return prefix + name["name"]


def preferred(arg: dict) -> str:
    return dash_name(arg["preferredName"]) if "preferredName" in arg else dash_name(arg["names"][0])


def all_names(arg: dict) -> str:
    return ", ".join(dash_name(n) for n in arg.get("names", []))


def synopsis_parts(command: Command, shared_keys: set[str]) -> list[tuple[str, str]]:
    """The usage line as (kind, text) parts: kind is 'cmd', 'opt' (a literal option name),
    'val' (a placeholder) or 'raw' (brackets, dots)."""
    if command.subcommands:
        return [("cmd", command.name), ("val", "<subcommand>")]
    parts: list[tuple[str, str]] = [("cmd", command.name)]
    placed_shared = False
    for arg in command.own_arguments():
        if signature(arg) in shared_keys:
            if not placed_shared:
                parts.append(("raw", "[<vault-options>]"))
                placed_shared = True
            continue
        value = arg.get("valueName", "value")
        if arg["kind"] == "positional":
            text = f"<{value}>" + (" ..." if arg.get("isRepeating") else "")
            parts.append(("val", f"[{text}]" if arg.get("isOptional") else text))
            continue
        opt = preferred(arg)
        body = opt if arg["kind"] == "flag" else f"{opt} <{value}>"
        if arg.get("isRepeating") and arg["kind"] != "flag":
            body += " ..."
        parts.append(("opt", f"[{body}]" if arg.get("isOptional") else body))
    return parts


def synopsis_text(parts: list[tuple[str, str]]) -> str:
    return " ".join(text for _, text in parts)


def split_exit_codes(root: Command, cases: dict[int, str]) -> tuple[list[str], list[tuple[int, str, list[str]]]]:
    """The root discussion's paragraphs, and the entries (code, meaning, error codes) of the
    "Exit codes:" paragraph of the exit-codes command's discussion (which loses that paragraph:
    the documents show it as their exit-code table)."""
    holder = next((c for c in root.subcommands if c.path[-1] == EXIT_CODES_COMMAND), None)
    if holder is None:
        raise GenerationError(f"`lockbox {EXIT_CODES_COMMAND}` is missing: it holds the exit-code table")
    paragraphs = [p.strip() for p in holder.info.get("discussion", "").strip().split("\n\n") if p.strip()]
    rest, entries = [], []
    for paragraph in paragraphs:
        if paragraph.startswith("Exit codes:") and not entries:
            body = paragraph[len("Exit codes:"):].strip().rstrip(".")
            for item in re.split(r"(?:,\s+|\s*\n\s*)(?=\d+\s)", body):
                match = re.fullmatch(r"(\d+)\s+(.+)", item.strip(), re.S)
                if not match:
                    raise GenerationError(f"cannot read exit code entry {item!r} in the root command's discussion")
                meaning = " ".join(match.group(2).split())
                # "5 wrong passphrase or key [wrong-credential]": the error codes ErrorTable maps here.
                codes = re.fullmatch(r"(.*?)\s*\[([a-z0-9 -]+)\]", meaning)
                if codes:
                    entries.append((int(match.group(1)), codes.group(1), codes.group(2).split()))
                else:
                    entries.append((int(match.group(1)), meaning, []))
        else:
            rest.append(paragraph)
    if not entries:
        raise GenerationError(f"`lockbox help {EXIT_CODES_COMMAND}` has no \"Exit codes:\" paragraph")
    holder.discussion = "\n\n".join(rest)
    rest = [p.strip() for p in root.discussion.split("\n\n") if p.strip()]
    listed = [code for code, _, _ in entries]
    problems = []
    if len(set(listed)) != len(listed):
        problems.append(f"an exit code is listed twice in `lockbox help {EXIT_CODES_COMMAND}`")
    missing = sorted(set(cases) - set(listed))
    extra = sorted(set(listed) - set(cases))
    if missing:
        problems.append(f"ExitStatus.swift has exit codes that `lockbox help {EXIT_CODES_COMMAND}` does not list: "
                        + ", ".join(f"{c} ({cases[c]})" for c in missing))
    if extra:
        problems.append(f"`lockbox help {EXIT_CODES_COMMAND}` lists exit codes that ExitStatus.swift does not have: "
                        + ", ".join(map(str, extra)))
    if problems:
        raise GenerationError("\n".join(problems) + "\nKeep `ExitStatus.table` and `enum ExitStatus` in "
                              "Sources/LockboxCLI/ExitStatus.swift in step.")
    return rest, sorted(entries)


def discussion_blocks(text: str) -> list[tuple[str, str]]:
    """Paragraphs of a discussion as ('p', text) or ('example', label + command) blocks."""
    blocks = []
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        match = re.fullmatch(r"(Examples?[^:]*):\s*(\S.*\blockbox\b.*)", line)
        if match:
            blocks.append(("example", match.group(1) + ":\n" + match.group(2)))
        else:
            blocks.append(("p", line))
    return blocks


def fd_options(root: Command, shared_keys: set[str]) -> list[tuple[str, str]]:
    """Options that read a secret from a descriptor (`--*-fd`) and which commands take them."""
    where: dict[str, list[str]] = {}
    shared: set[str] = set()
    for command in root.walk():
        for arg in command.own_arguments():
            # `exec --fd` hands a secret to the program it runs; it reads none.
            if arg["kind"] == "option" and preferred(arg).endswith("-fd") and preferred(arg) != "--fd":
                name = preferred(arg)
                if signature(arg) in shared_keys:
                    shared.add(name)
                else:
                    where.setdefault(name, []).append(" ".join(command.path[1:]))
    rows = []
    for name in sorted(shared):
        rows.append((name, "every command that takes the vault options"))
    for name in sorted(where):
        rows.append((name, ", ".join(f"`{c}`" for c in where[name])))
    return rows


def option_details(arg: dict) -> tuple[str, list[str], str | None]:
    """(abstract, notes such as values/required/repeatable, default)."""
    abstract = arg.get("abstract", "").strip()
    notes = []
    if arg.get("allValues"):
        notes.append("Values: " + ", ".join(f"`{v}`" for v in arg["allValues"]) + ".")
    if arg["kind"] == "option" and not arg.get("isOptional"):
        notes.append("Required.")
    if arg.get("isRepeating") and arg["kind"] != "flag" and "repeatable" not in abstract.lower():
        notes.append("Repeatable.")
    return abstract, notes, arg.get("defaultValue")


# ---------------------------------------------------------------------------------------------
# Markdown


def md_inline(text: str, table: bool = False) -> str:
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", text)):
        if i % 2 == 1:
            out.append(part.replace("|", "\\|") if table else part)
            continue
        part = re.sub(r"([\\*\[\]])", r"\\\1", part)
        part = part.replace("<", "&lt;")
        if table:
            part = part.replace("|", "\\|")
        out.append(part)
    result = "".join(out)
    if not table and re.match(r"([-+#>]|\d+[.)])", result):
        result = "\\" + result
    return result


def prepare(root: Command, cases: dict[int, str]):
    """What both renderers start from: the shared options (and their signatures), the root
    description without its exit-code paragraph, the exit codes, and every command below root."""
    shared = shared_options(root)
    description, exits = split_exit_codes(root, cases)
    return shared, {signature(a) for a in shared}, description, exits, [c for c in root.walk() if c is not root]


def render_markdown(root: Command, version: str, cases: dict[int, str]) -> str:
    shared, shared_keys, description, exits, commands = prepare(root, cases)
    lines: list[str] = []
    add = lines.append

    add("<!-- Generated by scripts/dev/gen-cli-docs.sh from the lockbox binary's own command definitions.")
    add("     Do not edit: change the help texts in Sources/LockboxCLI, then run scripts/dev/gen-cli-docs.sh. -->")
    add("")
    add(f"# `{TOOL}` command-line reference")
    add("")
    add(md_inline(root.abstract))
    add("")
    add(f"This is the reference for `{TOOL}` {md_inline(version)}, generated from its own command definitions.")
    add("")
    for paragraph in description:
        add_discussion_markdown(add, paragraph)
    add("The same text, command by command: `lockbox help <subcommand>` or `lockbox <subcommand> --help`. "
        "The man page is [docs/man/lockbox.1](man/lockbox.1) (`man -l docs/man/lockbox.1`); "
        "shell completions are in [completions/](../completions/).")
    add("")
    add("## Contents")
    add("")
    add("- [Usage](#usage)")
    add("- [Secrets are never arguments](#secrets-are-never-arguments)")
    add("- [Vault options](#vault-options)")
    add("- [Commands](#commands)")
    for command in commands:
        indent = "  " * (len(command.path) - 1)
        add(f"{indent}- [`{command.name}`](#{command.anchor})")
    add("- [JSON output](#json-output)")
    add("- [Exit codes](#exit-codes)")
    add("- [Environment](#environment)")
    add("- [Files](#files)")
    add("- [Shell completion](#shell-completion)")
    add("")

    add("## Usage")
    add("")
    add("```")
    add(f"{TOOL} <subcommand> [<arguments>] [<options>]")
    add(f"{TOOL} help [<subcommand> ...]")
    add(f"{TOOL} --version")
    add("```")
    add("")
    root_options = [a for a in root.arguments if a["kind"] != "positional"]
    add("Every command also takes " + " and ".join(f"`{all_names(a)}` ({md_inline(a.get('abstract', '').rstrip('.').lower())})"
                                                  for a in root_options) + ".")
    add("")

    add("## Secrets are never arguments")
    add("")
    add(SECRETS_INTRO)
    add("")
    for way in SECRETS_WAYS:
        add("- " + way)
    add("")
    add("The options that read a secret from a descriptor:")
    add("")
    add("| Option | Taken by |")
    add("| --- | --- |")
    for name, taken_by in fd_options(root, shared_keys):
        add(f"| `{name} <fd>` | {taken_by} |")
    add("")
    for paragraph in SECRETS_AFTER:
        add(paragraph)
        add("")

    add("## Vault options")
    add("")
    takers = [c for c in commands if not c.subcommands and any(signature(a) in shared_keys for a in c.own_arguments())]
    add(f"Every command that opens a store ({len(takers)} of them) takes these options, " + VAULT_OPTIONS_INTRO)
    add("")
    add_option_table(add, shared)

    add("## Commands")
    add("")
    for command in commands:
        add(f"### `{command.name}`")
        add("")
        if command.abstract:
            add(md_inline(command.abstract))
            add("")
        add("```")
        add(synopsis_text(synopsis_parts(command, shared_keys)))
        add("```")
        add("")
        add_discussion_markdown(add, command.discussion)
        if command.subcommands:
            add("Subcommands:")
            add("")
            for sub in command.subcommands:
                add(f"- [`{sub.path[-1]}`](#{sub.anchor}): {md_inline(sub.abstract)}")
            add("")
            continue
        own = command.own_arguments()
        positionals = [a for a in own if a["kind"] == "positional"]
        options = [a for a in own if a["kind"] != "positional" and signature(a) not in shared_keys]
        if positionals:
            add("Arguments:")
            add("")
            add("| Argument | Description |")
            add("| --- | --- |")
            for arg in positionals:
                abstract, notes, _ = option_details(arg)
                add(f"| `<{arg['valueName']}>` | {md_inline(' '.join([abstract] + notes), table=True)} |")
            add("")
        if options:
            add("Options:")
            add("")
            add_option_table(add, options)
        if any(signature(a) in shared_keys for a in own):
            add("Also takes the [vault options](#vault-options) ("
                + ", ".join(f"`{preferred(a)}`" for a in shared) + ").")
            add("")

    add("## JSON output")
    add("")
    for paragraph in JSON_OUTPUT:
        add(md_inline(paragraph))
        add("")

    add("## Exit codes")
    add("")
    add("Each kind of failure has its own exit code, so scripts can tell them apart; the message on standard "
        "error says what went wrong and usually how to fix it. Errors in the command line itself (an unknown "
        "option, a missing argument) exit 64.")
    add("")
    add("| Exit | Meaning | Error codes (`error[CODE]`) | `ExitStatus` case |")
    add("| ---: | --- | --- | --- |")
    for code, meaning, errors in exits:
        add(f"| {code} | {md_inline(meaning, table=True)} | {', '.join(f'`{e}`' for e in errors)} | `{cases[code]}` |")
    add("")
    add("A failure is printed as `lockbox: error[CODE]: message`; CODE is the error's stable "
        "code (`LockboxError.Code`: the library's, LockboxTPM's or the CLI's own), and each code belongs "
        "to one store-neutral category (`LockboxError.Category`: "
        "no-entry, no-storage-access, authentication-failed, …) that library users switch on. This table is generated "
        "from the \"Exit codes:\" paragraph of `lockbox help exit-codes`, which the CLI builds from its one error table "
        "(`ErrorTable` in Sources/LockboxCLI/ExitStatus.swift: error code to exit code and advice); the generator "
        "fails unless that paragraph lists exactly the codes of `enum ExitStatus`.")
    add("")

    add("## Environment")
    add("")
    add("| Variable | Meaning |")
    add("| --- | --- |")
    for name, meaning in ENVIRONMENT:
        add(f"| `{name}` | {meaning} |")
    add("")
    add(ENVIRONMENT_AFTER)
    add("")

    add("## Files")
    add("")
    add("| Path | What |")
    add("| --- | --- |")
    for path, what in FILES:
        add(f"| `{path}` | {what} |")
    add("")

    add("## Shell completion")
    add("")
    add("Generated by `lockbox --generate-completion-script bash|zsh|fish` and kept in [completions/](../completions/):")
    add("")
    add("```sh")
    add("# bash: source it, or copy it to ~/.local/share/bash-completion/completions/lockbox")
    add("source completions/lockbox.bash")
    add("# zsh: put _lockbox in a folder on $fpath, then run compinit")
    add("cp completions/_lockbox ~/.zfunc/ && fpath=(~/.zfunc $fpath) && autoload -U compinit && compinit")
    add("# fish")
    add("cp completions/lockbox.fish ~/.config/fish/completions/")
    add("```")
    return "\n".join(lines).rstrip("\n") + "\n"


def add_discussion_markdown(add, discussion: str) -> None:
    """A discussion's paragraphs, its examples as shell blocks."""
    for kind, text in discussion_blocks(discussion):
        if kind == "example":
            label, code = text.split("\n", 1)
            add(md_inline(label))
            add("")
            add("```sh")
            add(code)
            add("```")
        else:
            add(md_inline(text))
        add("")


def add_option_table(add, options: list[dict]) -> None:
    add("| Option | Description | Default |")
    add("| --- | --- | --- |")
    for arg in options:
        abstract, notes, default = option_details(arg)
        names = all_names(arg)
        if arg["kind"] == "option":
            names += f" <{arg['valueName']}>"
        cell = md_inline(" ".join([abstract] + notes), table=True)
        add(f"| `{names}` | {cell} | {f'`{default}`' if default is not None else ''} |")
    add("")


# ---------------------------------------------------------------------------------------------
# roff (man(7))


def roff_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\e")
        elif ch == "-":
            out.append("\\-")
        elif ord(ch) > 127:
            out.append(f"\\[u{ord(ch):04X}]")
        else:
            out.append(ch)
    escaped = "".join(out)
    for abbreviation in ABBREVIATIONS:
        escaped = escaped.replace(abbreviation + " ", abbreviation + "\\& ")
    return escaped


def roff_inline(text: str) -> str:
    """Escapes text; `code` and **bold** become bold."""
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`|\*\*[^*]+\*\*)", text)):
        if i % 2 == 1:
            inner = part[1:-1] if part.startswith("`") else part[2:-2]
            out.append("\\fB" + roff_escape(inner) + "\\fR")
        else:
            out.append(roff_escape(part))
    return roff_line("".join(out))


def roff_single(line: str) -> str:
    """One output line, as is (a tag, a line of code): guarded against control characters."""
    return "\\&" + line if line[:1] in (".", "'") else line


def roff_line(line: str) -> str:
    """Text lines shorter than 80 bytes, a new sentence on a new line (man-pages style), none
    starting with a control character or a space."""
    words = line.split()
    out: list[str] = []
    current = ""
    for i, word in enumerate(words):
        if current and len(current) + 1 + len(word) > 78:
            out.append(current)
            current = ""
        current = f"{current} {word}" if current else word
        following = words[i + 1] if i + 1 < len(words) else ""
        plain = re.sub(r"\\f[BIRP]", "", word).rstrip(")")
        if (plain.endswith((".", "?", "!")) and not plain.endswith(ABBREVIATIONS)
                and re.match(r"(\\f[BIRP])?[A-Z]", following)):
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return "\n".join("\\&" + l if l[:1] in (".", "'") else l for l in out)


def roff_synopsis(parts: list[tuple[str, str]]) -> str:
    out = []
    for kind, text in parts:
        if kind == "cmd":
            out.append("\\fB" + roff_escape(text) + "\\fR")
            continue
        # Option names bold, <placeholders> italic, brackets and dots roman.
        pieces = []
        for token in re.split(r"(<[^>]+>)", text):
            if token.startswith("<"):
                pieces.append("\\fI" + roff_escape(token[1:-1]) + "\\fR")
            else:
                pieces.append(re.sub(r"(\\-\\-?[\w\\-]+|\\-\w)", r"\\fB\1\\fR", roff_escape(token)))
        out.append("".join(pieces))
    return roff_line(" ".join(out))


def roff_option_tag(arg: dict) -> str:
    names = ", ".join("\\fB" + roff_escape(dash_name(n)) + "\\fR" for n in arg.get("names", []))
    if arg["kind"] == "positional":
        return "\\fI" + roff_escape(arg["valueName"]) + "\\fR" + (" ..." if arg.get("isRepeating") else "")
    if arg["kind"] == "option":
        names += " \\fI" + roff_escape(arg["valueName"]) + "\\fR"
    return roff_single(names)


def roff_option_body(arg: dict) -> str:
    abstract, notes, default = option_details(arg)
    text = " ".join([abstract] + notes)
    if default is not None:
        text += f" Default: `{default}`."
    return roff_inline(text)


def add_example_roff(add, label: str, code: str) -> None:
    """An example: its label, then the command indented and unfilled."""
    add(".PP")
    add(roff_inline(label))
    add(".RS 4")
    add(".nf")
    add(roff_single(roff_escape(code)))
    add(".fi")
    add(".RE")


def add_option_roff(add, arg: dict) -> None:
    add(".TP")
    add(roff_option_tag(arg))
    add(roff_option_body(arg))


def add_discussion_roff(add, discussion: str) -> None:
    """A discussion's paragraphs and examples."""
    for kind, text in discussion_blocks(discussion):
        if kind == "example":
            add_example_roff(add, *text.split("\n", 1))
        else:
            add(".PP")
            add(roff_inline(text))


def render_man(root: Command, version: str, cases: dict[int, str]) -> str:
    shared, shared_keys, description, exits, commands = prepare(root, cases)
    lines: list[str] = []
    add = lines.append

    add('.\\" Generated by scripts/dev/gen-cli-docs.sh from the lockbox binary\'s own command definitions.')
    add('.\\" Do not edit: change the help texts in Sources/LockboxCLI, then run scripts/dev/gen-cli-docs.sh.')
    add(f'.TH LOCKBOX 1 "{MAN_DATE}" "Lockbox {roff_escape(version)}" "Lockbox Manual"')
    # Ragged right, no hyphenation: option names and paths must stay whole.
    add(".ad l")
    add(".nh")
    add(".SH NAME")
    abstract = root.abstract.rstrip(".")
    add(roff_line(f"{TOOL} \\- " + roff_escape(abstract[:1].lower() + abstract[1:])))
    add(".SH SYNOPSIS")
    add(f"\\fB{TOOL}\\fR \\fIsubcommand\\fR [\\fIarguments\\fR] [\\fIoptions\\fR]")
    add(".br")
    add(f"\\fB{TOOL} help\\fR [\\fIsubcommand\\fR ...]")
    add(".br")
    add(f"\\fB{TOOL} \\-\\-version\\fR")
    add(".SH DESCRIPTION")
    add(roff_inline(root.abstract))
    for paragraph in description:
        add_discussion_roff(add, paragraph)
    add(".PP")
    add(roff_inline("Each command is described under COMMANDS below, and by `lockbox help <subcommand>`."))
    add(".SS Secrets are never arguments")
    add(roff_inline(SECRETS_INTRO))
    for way in SECRETS_WAYS:
        add(".IP \\(bu 2")
        add(roff_inline(way))
    add(".PP")
    add(roff_inline("The options that read a secret from a descriptor:"))
    for name, taken_by in fd_options(root, shared_keys):
        add(".TP")
        add(f"\\fB{roff_escape(name)}\\fR \\fIfd\\fR")
        add(roff_inline(taken_by[:1].upper() + taken_by[1:] + "."))
    for paragraph in SECRETS_AFTER:
        add(".PP")
        add(roff_inline(paragraph))

    add(".SS JSON output")
    for paragraph in JSON_OUTPUT:
        add(".PP")
        add(roff_inline(paragraph))

    add(".SH OPTIONS")
    add(".SS Vault options")
    add(roff_inline("Every command that opens a store takes these options, " + VAULT_OPTIONS_INTRO))
    for arg in shared:
        add_option_roff(add, arg)
    add(".SS Every command")
    for arg in [a for a in root.arguments if a["kind"] != "positional"]:
        add_option_roff(add, arg)

    add(".SH COMMANDS")
    for command in commands:
        add(f'.SS "{roff_escape(command.name)}"')
        add(roff_synopsis(synopsis_parts(command, shared_keys)))
        if command.abstract:
            add(".PP")
            add(roff_inline(command.abstract))
        add_discussion_roff(add, command.discussion)
        if command.subcommands:
            add(".PP")
            add(roff_line("Subcommands: " + ", ".join(f"\\fB{roff_escape(s.path[-1])}\\fR" for s in command.subcommands) + "."))
            continue
        for arg in command.own_arguments():
            if signature(arg) not in shared_keys:
                add_option_roff(add, arg)
        if any(signature(a) in shared_keys for a in command.own_arguments()):
            add(".PP")
            add("Also takes the vault options (see \\fBOPTIONS\\fR).")

    add(".SH EXIT STATUS")
    add(roff_inline("Each kind of failure has its own exit code; the message on standard error says what went "
                    "wrong. Errors in the command line itself exit 64."))
    for code, meaning, errors in exits:
        add(".TP 5")
        add(f"\\fB{code}\\fR")
        add(roff_inline(meaning[:1].upper() + meaning[1:] + "." + (f" Error codes: {', '.join(errors)}." if errors else "")))

    add(".SH ENVIRONMENT")
    for name, meaning in ENVIRONMENT:
        add(".TP")
        add(f"\\fB{roff_escape(name)}\\fR")
        add(roff_inline(meaning))
    add(".PP")
    add(roff_inline(ENVIRONMENT_AFTER))

    add(".SH FILES")
    for path, what in FILES:
        add(".TP")
        add(f"\\fI{roff_escape(path)}\\fR")
        add(roff_inline(what))

    add(".SH EXAMPLES")
    add(roff_inline("Every example of the commands' help, by command."))
    for command in [root] + commands:
        for kind, text in discussion_blocks(command.discussion):
            if kind != "example":
                continue
            label, code = text.split("\n", 1)
            add_example_roff(add, label if command is root else f"{command.name}: {label}", code)

    add(".SH SEE ALSO")
    refs = []
    for ref in SEE_ALSO:
        name, section = re.fullmatch(r"(.+)\((\w+)\)", ref).groups()
        refs.append(f".BR {roff_escape(name)} ({section})")
    for i, ref in enumerate(refs):
        add(ref + ("," if i < len(refs) - 1 else ""))
    add(".PP")
    add(roff_inline("docs/CLI.md, docs/ARCHITECTURE.md and docs/FORMAT.md in the Lockbox source tree."))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, help="the built lockbox executable")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]),
                        help="the repository root, for Sources/ (default: this script's repository)")
    parser.add_argument("--out", help="where to write docs/ and completions/ (default: --root)")
    options = parser.parse_args()
    root_dir = Path(options.root)
    out = Path(options.out or options.root)

    try:
        dump = json.loads(run_binary(options.binary, "--experimental-dump-help"))
        if dump.get("serializationVersion") != 0:
            raise GenerationError(f"unexpected --experimental-dump-help serializationVersion {dump.get('serializationVersion')}")
        version = run_binary(options.binary, "--version").strip()
        cases = exit_status_cases(root_dir)
        check_environment(root_dir)
        root = Command(dump["command"], [])
        outputs = {
            "docs/CLI.md": render_markdown(root, version, cases),
            "docs/man/lockbox.1": render_man(root, version, cases),
        }
        for shell, name in (("bash", "lockbox.bash"), ("zsh", "_lockbox"), ("fish", "lockbox.fish")):
            script = run_binary(options.binary, "--generate-completion-script", shell)
            if not script.strip():
                raise GenerationError(f"`lockbox --generate-completion-script {shell}` printed nothing")
            outputs[f"completions/{name}"] = script if script.endswith("\n") else script + "\n"
    except GenerationError as error:
        print(f"gen-cli-docs: {error}", file=sys.stderr)
        return 1

    for relative, text in outputs.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
