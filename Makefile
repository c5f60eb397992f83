# Shortcuts for the scripts in scripts/ (each script says what it does at its top).
# `make test` is what CI runs (.ci/run); `make demo` is the README's first command.
# `make check` is the quick loop: build, the suite without the services the test command starts,
# the docs checks and the protocol models (CONTRIBUTING.md gives its time).
.PHONY: format check demo test examples build release static-libstdc++ release-path install install-postgres docs docs-check bench bench-peers bench-cli fuzz selftest

demo:
	scripts/demo.sh

test:
	scripts/test.sh

# The package's traits and the options of every build into .build, read from scripts/traits.sh
# (which the test command's scripts source, and which says why their order and each option
# matter): the PostgreSQL store (so `lockbox --store postgres` finds a working lockbox-postgres
# beside lockbox) and the swift-configuration adapter, Swift line tables, no C debug information,
# deterministic hashing. One set for every build into .build, so none rebuilds another's.
TRAITS := $(shell bash -c 'source scripts/traits.sh && echo "$${lockbox_traits[*]}"')
DEBUG_BUILD := $(shell bash -c 'source scripts/traits.sh && echo "$${lockbox_build[*]}"') --build-tests $(TRAITS)

build:
	scripts/ensure-deps.sh --test
	$(DEBUG_BUILD)

# Formats every Swift source as .swift-format says (the test command and `make check` lint it).
format:
	swift format -i -r Sources Tests Examples Benchmarks

# The quick loop. The suite runs in a session keyring of its own (`keyctl session`), as a login
# has one, so the re-authentication window tests run the same from a desktop, ssh, cron or CI; no
# gnome-keyring, swtpm or PostgreSQL is started, so the tests that need one say NOT TESTED and
# pass (the test command, `make test`, runs them).
check:
	$(DEBUG_BUILD)
	keyctl session - swift test --skip-build $(TRAITS) --skip LockboxPostgresTests
	scripts/dev/gen-cli-docs.sh --check --binary "$$($(DEBUG_BUILD) --show-bin-path)/lockbox"
	scripts/ci/check-docs.sh --skip-build
	scripts/ci/check-docc.sh --skip-build
	scripts/ci/check-models.sh
	swift format lint --strict -r Sources Tests Examples Benchmarks

# The lockbox users run (`make install`; docs/PERFORMANCE.md gives its figures and why each flag):
# release, with the Swift runtime and FoundationEssentials linked statically, in its own scratch
# folder. Linked with lld, with packed relative relocations (DT_RELR) where glibc reads them (2.36
# or newer, checked here), and laid out in the order of scripts/bench/lockbox.order
# (scripts/bench/gen-symbol-order.sh) so that the code a command runs fills fewer pages.
PACKED_RELOCATIONS := $(shell printf '2.36\n%s\n' "$$(getconf GNU_LIBC_VERSION 2>/dev/null | cut -d' ' -f2)" | sort -V -C 2>/dev/null \
	&& echo "-Xlinker -z -Xlinker pack-relative-relocs")
CODE_LAYOUT := -Xswiftc -use-ld=lld -Xlinker --symbol-ordering-file=$(CURDIR)/scripts/bench/lockbox.order -Xlinker --no-warn-symbol-ordering
# libstdc++ linked statically too (the static Swift runtime is its only user; GCC's runtime library
# exception allows it): the toolchain's link line names -lstdc++ itself, so a folder holding only
# libstdc++.a is searched first (-L). Without libstdc++.a (libstdc++-NN-dev) it stays shared.
LIBSTDCXX_ARCHIVE := $(shell clang -print-file-name=libstdc++.a 2>/dev/null)
STATIC_CXX_DIR := $(CURDIR)/.build-release/static-libstdc++
STATIC_CXX := $(if $(filter /%,$(LIBSTDCXX_ARCHIVE)),-Xswiftc -L$(STATIC_CXX_DIR))
RELEASE_BUILD = swift build -c release --static-swift-stdlib --traits PostgreSQL $(CODE_LAYOUT) $(PACKED_RELOCATIONS) $(STATIC_CXX) --product lockbox --scratch-path .build-release
release: static-libstdc++
	$(RELEASE_BUILD)

static-libstdc++:
	@if [ -n "$(STATIC_CXX)" ]; then mkdir -p "$(STATIC_CXX_DIR)" && ln -sfn "$(LIBSTDCXX_ARCHIVE)" "$(STATIC_CXX_DIR)/libstdc++.a"; \
	else echo "make: no libstdc++.a (apt-get install libstdc++-12-dev): linking libstdc++ as a shared library" >&2; fi

release-path:
	@echo "$$($(RELEASE_BUILD) --show-bin-path | sed "s|^$$(pwd)/||")/lockbox"

PREFIX ?= /usr/local
# docker-credential-lockbox, a link to lockbox, is the registry credential helper clients look for
# (lockbox runs `docker-credential` when called by that name).
install: release
	install -D -m 0755 "$$($(RELEASE_BUILD) --show-bin-path)/lockbox" "$(DESTDIR)$(PREFIX)/bin/lockbox"
	ln -sfn lockbox "$(DESTDIR)$(PREFIX)/bin/docker-credential-lockbox"
	install -D -m 0644 docs/man/lockbox.1 "$(DESTDIR)$(PREFIX)/share/man/man1/lockbox.1"
	install -D -m 0644 completions/lockbox.bash "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/lockbox"
	install -D -m 0644 completions/_lockbox "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_lockbox"
	install -D -m 0644 completions/lockbox.fish "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/lockbox.fish"

# lockbox-postgres beside lockbox: `lockbox --store postgres …` and `lockbox migrate --from/--to
# postgres` hand over to it (it links SwiftNIO and postgres-nio, which lockbox does not; its
# release build takes several minutes more).
# The same flags as lockbox's build (lld, which reads the packed-relocations option, and the same
# code layout), so the two products share one scratch folder without rebuilding each other.
POSTGRES_RELEASE_BUILD = swift build -c release --static-swift-stdlib --traits PostgreSQL $(CODE_LAYOUT) $(PACKED_RELOCATIONS) $(STATIC_CXX) --product lockbox-postgres --scratch-path .build-release
install-postgres: install
	$(POSTGRES_RELEASE_BUILD)
	install -D -m 0755 "$$($(POSTGRES_RELEASE_BUILD) --show-bin-path)/lockbox-postgres" "$(DESTDIR)$(PREFIX)/bin/lockbox-postgres"

# The examples package (Examples/): all five app flows (and TokenKeeper) on a file vault, then on
# a private gnome-keyring.
examples: build
	scripts/ci/run-examples.sh

# CLI reference, man page and completions from the command definitions.
docs:
	scripts/dev/gen-cli-docs.sh

docs-check:
	scripts/dev/gen-cli-docs.sh --check
	scripts/ci/check-docs.sh
	scripts/ci/check-docc.sh

selftest: build
	"$$($(DEBUG_BUILD) --show-bin-path)/lockbox" selftest

# The LockboxBenchmarks report (docs/PERFORMANCE.md): release build with the static Swift runtime
# in its own scratch folder, run inside a private unlocked gnome-keyring so that the Secret Service
# rows are measured too. `make bench BENCH_ARGS=--quick` is a smoke run; BENCH_ARGS takes any of
# the benchmark's options (`--only format2`, `--dir PATH`; `--help` lists them).
BENCH_BUILD = swift build -c release --static-swift-stdlib --scratch-path .build-bench
bench:
	$(BENCH_BUILD) --product lockbox
	$(BENCH_BUILD) --product LockboxBenchmarks
	@echo "make bench: $$(date -u '+%Y-%m-%d %H:%M UTC'), commit $$(git rev-parse --short HEAD), $$(nproc) cores, load average $$(cut -d' ' -f1-3 /proc/loadavg)"
	scripts/dev/keyring-session.sh -- "$$($(BENCH_BUILD) --show-bin-path)/LockboxBenchmarks" $(BENCH_ARGS)
	@echo "make bench: load average after the run $$(cut -d' ' -f1-3 /proc/loadavg)"

bench-peers:
	scripts/bench/bench-peers.sh

# lockbox next to secret-tool, paired, with D-Bus call counts (docs/PERFORMANCE.md).
bench-cli:
	scripts/bench/bench-cli.sh --dbus

fuzz:
	scripts/ci/fuzz.sh 60
