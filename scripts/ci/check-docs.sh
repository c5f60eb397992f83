#!/usr/bin/env bash
# Checks that every public (and open) symbol of the Lockbox library modules (Lockbox,
# LockboxSecretService, LockboxSessionWindows, LockboxSelfTest, LockboxTPM, LockboxTesting, and the
# products with heavy dependencies, LockboxPostgres and LockboxSwiftConfiguration) carries a DocC
# documentation comment (`///` or `/** */`) of its own.
#
# Usage: scripts/ci/check-docs.sh [--skip-build] [--verbose]
#
#   --skip-build  read the modules as .build has them (the test command and `make check` have just
#                 built it); without it, `swift build --build-tests` with the traits first
#   --verbose     also list the symbols that were exempted, and why
#
# Exit status: 0 when no symbol is missing a comment, 1 when some are (each is printed as
# `path:line: kind name`, then a count), 2 when the check itself could not run (build failure,
# no symbol graph).
#
# How: reads the modules as the package's .build has them, built with `swift build --build-tests`
# and the package's traits (scripts/traits.sh), the build every other step uses: it runs
# swift-symbolgraph-extract on each built module with the same search paths and module maps the
# compiler used, and reads the JSON with python3. Its build and path query use the options and
# deterministic hashing of every other build into .build (scripts/traits.sh), so neither makes the
# next build compile the modules again.
#
# What is checked: every symbol of access level public or open, SPI ones included (none today;
# swift-symbolgraph-extract is asked for them with -include-spi-symbols). Enum cases, nested
# types, initializers, operators and members of extensions all count. Inherited documentation is
# not accepted as the symbol's own (-skip-inherited-docs), except as follows.
#
# Exempt:
#   - symbols the compiler synthesises, which have no location in our sources: Codable's
#     init(from:)/encode(to:), Hashable's hashValue/hash(into:), RawRepresentable's
#     init(rawValue:), Equatable's != and the like, members that come from protocol extensions;
#   - members that implement a protocol requirement (the symbol graph ties them to the
#     requirement with a `sourceOrigin`): Equatable's ==, CustomStringConvertible's
#     description, SecretStore's get(_:)... They inherit the requirement's documentation, as
#     DocC shows it. When the requirement is one of ours, it must itself be documented (it is a
#     public symbol checked here), else the implementation is reported too;
#   - anything inside a type named CodingKeys.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

verbose=0 skip_build=0
for arg in "$@"; do
    case "$arg" in
        --verbose | -v) verbose=1 ;;
        --skip-build) skip_build=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "check-docs: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

# The library products' modules: each is checked on its own.
modules=(Lockbox LockboxSecretService LockboxSessionWindows LockboxSelfTest LockboxTPM LockboxTesting LockboxPostgres LockboxSwiftConfiguration)
scratch=$repo/.build
work=$scratch/check-docs
log=$work/build.log
mkdir -p "$work"

source scripts/traits.sh
source scripts/ci/symbol-graph.sh
build=("${lockbox_build[@]}" --build-tests "${lockbox_traits[@]}")
if ((!skip_build)) && ! "${build[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "check-docs: the package did not build (above); cannot check" >&2
    exit 2
fi

bin=$("${build[@]}" --show-bin-path)

check_module() { # MODULE
module=$1
graph_dir=$work/$module

# A public symbol named after its module followed by `Version` is left out of every symbol graph
# (the tools take it for a framework's generated version number), so neither this check nor DocC
# would ever see it.
local hidden
local declaration="(enum|struct|class|actor|protocol|typealias|let|var|func)"
if hidden=$(grep -rnE "^\s*(@[A-Za-z]+\s+)*(public|open)\s+((final|indirect)\s+)*$declaration\s+${module}Version" \
    "$repo/Sources/$module"); then
    echo "$hidden" >&2
    echo "check-docs: ${module}Version… names a public symbol that DocC never shows (above); name it otherwise" >&2
    return 1
fi

symbol_graph "$module" "$bin" "$graph_dir" "$work" \
    -minimum-access-level public -include-spi-symbols -skip-inherited-docs || exit 2

python3 - "$graph_dir" "$module" "$repo" "$verbose" <<'EOF'
import glob, json, os, sys
from urllib.parse import unquote, urlparse

graph_dir, module, repo, verbose = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"

# Lockbox.symbols.json, plus Lockbox@Other.symbols.json for extensions of other modules' types.
files = sorted(glob.glob(os.path.join(graph_dir, f"{module}.symbols.json")) +
               glob.glob(os.path.join(graph_dir, f"{module}@*.symbols.json")))
if not files:
    print(f"check-docs: no symbol graph for {module} in {graph_dir}", file=sys.stderr)
    sys.exit(2)

symbols, relationships = {}, []
for path in files:
    with open(path) as f:
        graph = json.load(f)
    for symbol in graph["symbols"]:
        symbols[symbol["identifier"]["precise"]] = symbol
    relationships += graph["relationships"]

def has_doc(symbol):
    doc = symbol.get("docComment")
    return bool(doc) and any(line.get("text", "").strip() for line in doc.get("lines", []))

def name(symbol):
    return ".".join(symbol["pathComponents"])

def kind(symbol):
    identifier = symbol["kind"]["identifier"]
    return identifier[len("swift."):] if identifier.startswith("swift.") else identifier

# Which symbols implement a protocol requirement, and which requirement (its precise id).
origin = {}
for relationship in relationships:
    if relationship["kind"] == "memberOf" and "sourceOrigin" in relationship:
        origin[relationship["source"]] = relationship["sourceOrigin"]
overrides = {r["source"]: r["target"] for r in relationships if r["kind"] == "overrides"}

located = [s for s in symbols.values() if "location" in s]
if not located:
    print("check-docs: the symbol graph has no source locations (is the .swiftsourceinfo missing?)",
          file=sys.stderr)
    sys.exit(2)

missing, exempt = [], []
for symbol in symbols.values():
    if "location" not in symbol:
        exempt.append((symbol, "synthesised (no source location)"))
        continue
    if has_doc(symbol):
        continue
    if "CodingKeys" in symbol["pathComponents"]:
        exempt.append((symbol, "CodingKeys"))
        continue
    inherited_from = origin.get(symbol["identifier"]["precise"]) or (
        {"identifier": overrides[symbol["identifier"]["precise"]], "displayName": "overridden member"}
        if symbol["identifier"]["precise"] in overrides else None)
    if inherited_from is not None:
        requirement = symbols.get(inherited_from["identifier"])
        # A requirement of another module is taken as documented; one of ours must be.
        if requirement is None or has_doc(requirement):
            exempt.append((symbol, f"inherits the documentation of {inherited_from['displayName']}"))
            continue
    missing.append(symbol)

def where(symbol):
    location = symbol["location"]
    path = unquote(urlparse(location["uri"]).path)
    if path.startswith(repo + os.sep):
        path = path[len(repo) + 1:]
    return path, location["position"]["line"] + 1

if verbose:
    for symbol, reason in sorted(exempt, key=lambda e: name(e[0])):
        place = "%s:%d" % where(symbol) if "location" in symbol else "(synthesised)"
        print(f"exempt: {place}: {kind(symbol)} {name(symbol)}: {reason}")

for symbol in sorted(missing, key=where):
    path, line = where(symbol)
    print(f"{path}:{line}: {kind(symbol)} {name(symbol)}")

checked = len(symbols) - len(exempt)
print(f"check-docs: {len(missing)} public symbol(s) of {module} without a documentation comment "
      f"({checked} checked, {len(exempt)} exempt)")
sys.exit(1 if missing else 0)
EOF
}

status=0
for module in "${modules[@]}"; do
    check_module "$module" || status=$?
done
exit "$status"
