# Sourced by scripts/test.sh and scripts/ci/sanitizers.sh: sets cpu_seconds to the CPU time, in
# whole seconds (user + system), of every child process the calling shell has waited for so far.
# On 2 cores the test command's wall time follows its CPU time, so each step's share of it says
# where to cut. (Call it directly, not in a command substitution: a subshell has no children.)
count_children_cpu() {
    local file self children total=0 part
    file=$(mktemp)
    times >"$file"
    { read -r self; read -r children; } <"$file"
    rm -f "$file"
    # "1m2.345s 0m0.678s": the children's user and system time.
    for part in $children; do
        [[ $part =~ ^([0-9]+)m([0-9]+)\.([0-9]{3})s$ ]] || continue
        total=$((total + 10#${BASH_REMATCH[1]} * 60000 + 10#${BASH_REMATCH[2]} * 1000 + 10#${BASH_REMATCH[3]}))
    done
    cpu_seconds=$(((total + 500) / 1000))
}
