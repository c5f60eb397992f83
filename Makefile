# Shortcuts for the scripts in scripts/ (each script says what it does at its top).
# `make test` is what CI runs (.ci/run); `make demo` is the README's first command.
.PHONY: demo test examples build docs docs-check bench bench-peers fuzz selftest

demo:
	scripts/demo.sh

test:
	scripts/test.sh

build:
	scripts/ensure-deps.sh --test
	swift build

# All five app flows (and TokenKeeper) on a file vault, then on a private gnome-keyring.
examples: build
	scripts/run-examples.sh

# CLI reference, man page and completions from the command definitions.
docs:
	scripts/gen-cli-docs.sh

docs-check:
	scripts/gen-cli-docs.sh --check
	scripts/check-docs.sh

selftest: build
	"$$(swift build --show-bin-path)/lockbox" selftest

bench:
	scripts/bench.sh

bench-peers:
	scripts/bench-peers.sh

fuzz:
	scripts/fuzz.sh 60
