# Sourced by scripts/ci/check-docs.sh and scripts/ci/check-docc.sh: the symbol graph of one module
# as the package's .build has it, read from the built module (no compile of its own).
# shellcheck shell=bash
#
# symbol_graph MODULE BIN OUTPUT_DIR WORK_DIR [EXTRACTOR_OPTIONS...]
#   BIN is the build's bin folder (`swift build --show-bin-path`, with the options of the build);
#   the build plan read is the one beside it (.build/debug.yaml, or release.yaml). Runs
#   swift-symbolgraph-extract with the compiler's own flags for MODULE (target triple, -I,
#   -Xcc -fmodule-map-file=... for the system-library targets and the dependencies' C modules), so
#   the extractor imports the module exactly as the build did. Returns 2, having printed why, when
#   it cannot.
symbol_graph() {
    local module=$1 bin=$2 output=$3 work=$4
    shift 4
    local plan flag_lines
    plan="$(dirname "$(dirname "$bin")")/$(basename "$bin").yaml"
    flag_lines=$(python3 - "$plan" "$module" "$bin/Modules/$module.swiftmodule" <<'PY'
import json, sys
plan, module, module_path = sys.argv[1:]
found = None
try:
    with open(plan) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("args: [") or f'"-module-name","{module}"' not in line:
                continue
            args = json.loads(line[len("args: "):])
            if "-emit-module-path" in args and args[args.index("-emit-module-path") + 1] == module_path:
                found = args
                break
except OSError as error:
    print(f"symbol-graph: cannot read the build plan: {error}", file=sys.stderr)
    sys.exit(2)
if found is None:
    print(f"symbol-graph: no compile command for {module} in {plan}", file=sys.stderr)
    sys.exit(2)
keep_with_value = {"-I", "-Xcc", "-target", "-sdk", "-resource-dir", "-F", "-Fsystem", "-Isystem"}
i = 1
while i < len(found):
    arg = found[i]
    if arg in keep_with_value and i + 1 < len(found):
        print(arg); print(found[i + 1]); i += 2
        continue
    if arg.startswith("-I") and len(arg) > 2:
        print(arg)
    i += 1
PY
) || return 2
    local -a flags
    mapfile -t flags <<<"$flag_lines"
    rm -rf "$output"
    mkdir -p "$output" "$work"
    # A module cache of its own: the extractor writing the build's cache (it rebuilds the C
    # modules' PCMs there) makes the next build recompile every module that imports one.
    if ! swift-symbolgraph-extract -module-name "$module" -I "$bin/Modules" "${flags[@]}" \
        -module-cache-path "$work/module-cache" -output-dir "$output" "$@" >"$work/extract.log" 2>&1; then
        cat "$work/extract.log" >&2
        echo "symbol-graph: swift-symbolgraph-extract failed for $module (above)" >&2
        return 2
    fi
}
