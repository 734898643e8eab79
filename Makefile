# WorkspaceAgent: `make run` and `make test` work on a fresh Debian 12 machine as root
# with only Swift installed; `deps` installs whatever Debian packages are missing.

SWIFT ?= swift
# C libraries the agent links (git watching; the desktop's libvncclient, zlib and X keysym
# names), pkg-config to find them, and the tools the tests drive (git, procps for ps/pgrep,
# Python's Prometheus text-format parser, TigerVNC's Xvnc and X clients for the desktop;
# curl, jq, Python's websockets and PyYAML for the documentation's examples and the OpenAPI
# document's test; OpenSSL (libssl-dev) for TLS and digests; libsodium and lwIP for the
# tailnet, whose tests drive Debian's wireguard-go with wireguard-tools, iproute2 and
# busybox's ping in a private network namespace; the openssl CLI makes the tests' throwaway
# certificates; GNU screen for the reconnecting PTY's screen backend, tmux to drive an
# interactive ssh in the SSH tests, Xvfb and xauth for ssh -X; systemd for
# `systemd-analyze verify` of the installed unit; iptables and coturn for the direct-path
# tests' NAT routers and STUN server; tinyproxy, a real HTTP proxy, for the outbound-proxy
# tests).
DEB_PACKAGES := pkg-config systemd libgit2-dev libssh2-1-dev libvncserver-dev libx11-dev zlib1g-dev git procps python3-prometheus-client \
	tigervnc-standalone-server xdotool x11-xserver-utils x11-utils curl jq python3-websockets python3-yaml \
	libsodium-dev libssl-dev liblwip-dev wireguard-go wireguard-tools iproute2 busybox openssl openssh-client openssh-server openssh-sftp-server rsync screen tmux xvfb xauth \
	iptables coturn tinyproxy-bin
RUN_ARGS ?=

# `make install`: a release binary with the Swift runtime linked in (--static-swift-stdlib),
# so it runs where no Swift toolchain is installed; it needs only Debian's libgit2-1.5,
# zlib1g, libstdc++6, libssl3 (TLS, digests), libsodium23 and liblwip0 (the tailnet), and,
# for the desktop, libvncclient1 and libx11-6, loaded on first use. Built in a scratch path of its own, so it never rebuilds `make run`'s binary.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
DOCDIR ?= $(PREFIX)/share/doc/workspace-agent
# The layout: `system` (a system unit run as AGENT_USER, its environment file in /etc) unless
# PREFIX is in your home directory (`make install PREFIX=$HOME/.local`): then `user`, a user
# unit (~/.config/systemd/user, run by `systemctl --user` as you, so without User= and Group=)
# with its environment file in ~/.config. LAYOUT=system or LAYOUT=user chooses either.
LAYOUT ?= $(if $(and $(filter-out /,$(HOME)),$(filter $(HOME) $(HOME)/%,$(PREFIX))),user,system)
ifeq ($(LAYOUT),user)
CONFIG_HOME := $(or $(XDG_CONFIG_HOME),$(HOME)/.config)
SYSCONFDIR ?= $(CONFIG_HOME)
UNITDIR ?= $(CONFIG_HOME)/systemd/user
else ifeq ($(LAYOUT),system)
# Beside the binary: the systemd unit (systemd reads /usr/local/lib/systemd/system too), its
# environment file, and the documentation the unit's Documentation= names.
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
else
$(error LAYOUT=$(LAYOUT): write LAYOUT=system or LAYOUT=user)
endif
# The system unit's User= and Group= (the workspace's user; Group= defaults to its primary group).
AGENT_USER ?= coder
AGENT_GROUP ?= $(shell id -gn '$(AGENT_USER)' 2>/dev/null || echo '$(AGENT_USER)')
STATIC_BUILD := .build/static
STATIC_FLAGS := -c release --product workspace-agent --static-swift-stdlib --scratch-path $(STATIC_BUILD)
IMAGE ?= workspace-agent:latest

.PHONY: all deps build release run test bench proto unicode-scripts clean lint fuzz-build fuzz fuzz-smoke static install install-files install-link install-user-check install-check image

all: build

# The MCP Python SDK the MCP client tests run servers with.
MCP_PYTHON_VERSION = 2.3.0

# One dpkg-query for every package and a look-up of the mcp module without importing it:
# about 0.1 s when everything is there (`make run` starts with it).
deps:
	@installed=" $$(dpkg-query -W -f='$${Package} $${Status}\n' $(DEB_PACKAGES) 2>/dev/null | awk '$$NF == "installed" { printf "%s ", $$1 }')"; \
	missing=""; \
	for p in $(DEB_PACKAGES); do \
		case "$$installed" in *" $$p "*) ;; *) missing="$$missing $$p" ;; esac; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@# The official MCP Python SDK, for the MCP client's test servers.
	@# (Debian's own python3 refuses pip installs outside a virtual environment unless told.)
	@python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("mcp") is None)' 2>/dev/null || { \
		echo "installing the mcp Python package"; \
		python3 -m pip install -q 'mcp==$(MCP_PYTHON_VERSION)' 2>/dev/null || \
		python3 -m pip install -q --break-system-packages 'mcp==$(MCP_PYTHON_VERSION)'; }

# Debug builds (`make build`, `make test`, `make proto`'s plugin) compile each module whole
# (`-wmo`, its code generated on two threads) rather than in batches of files that each parse
# the whole module again: a build from nothing takes 13 % less CPU here (623 s against 717 s;
# 321 s against 372 s of a quiet 2-core machine's time), and an edit rebuilds its module
# whole (docs/benchmarks.md, "The test suite", has both). Each module's interface is written
# by its compile job (`-no-emit-module-separately-wmo`) instead of a second job that parses
# and type-checks the module's declarations again: 12 % less CPU again (593 s against 671 s;
# 309 s against 349 s), for importers that start when the module is compiled rather than
# when its interface is. The three pass the same flags so
# that they share one build (a `swift build` without them starts over). `-disable-batch-mode`
# keeps the driver from warning that `-wmo` overrides SwiftPM's batch mode; its remark that a
# whole-module build is not incremental is left out of the output.
DEBUG_FLAGS := -Xswiftc -disable-batch-mode -Xswiftc -wmo -Xswiftc -num-threads -Xswiftc 2 -Xswiftc -no-emit-module-separately-wmo
DEBUG_QUIET := -e "/^remark: Incremental compilation has been disabled: it is not compatible with whole module optimization$$/d"
# `$(call debug-build,ARGS)`: a debug build with those flags, its output filtered (the
# recipes that use it run under pipefail, so a failed build still fails them).
debug-build = $(SWIFT) build $(1) $(DEBUG_FLAGS) 2>&1 | sed -u $(DEBUG_QUIET)
build test proto: private SHELL := /bin/bash
build test proto: private .SHELLFLAGS := -o pipefail -c

build: deps
	$(call debug-build)

release: deps
	$(SWIFT) build -c release --product workspace-agent
	$(SWIFT) build -c release --product agent-bench

# Builds (release) and starts the agent on its embedded defaults: HTTP API on
# 127.0.0.1:2114, no control plane. Stop it with Ctrl-C (SIGINT) or SIGTERM.
# SwiftPM takes 10-20 s to find that nothing changed, so the build is skipped when no input
# of it (RUN_INPUTS, the directories too: a file added, removed or renamed changes its
# directory; the toolchain) is newer than RUN_STAMP, touched when the last successful build
# started. (A file given an older time, e.g. by `cp -p`, is not noticed: `touch` it.) The
# build runs without make's variables in its environment (SwiftPM rebuilds everything when
# that changes, and `make run RUN_ARGS=...` changes it), and the warnings SwiftPM prints for
# a dependency's unhandled CMakeLists.txt files are left out of its output.
RUN_INPUTS = $(wildcard Sources Plugins Package.swift Package.resolved Makefile)
RUN_STAMP := .build/run.stamp
# (SwiftPM's "waiting for another instance" message ends without a newline: the warning may
# follow it on the same line, where only the warning is cut.)
RUN_QUIET := -e "/^warning: 'swift-distributed-tracing': found [0-9]* file(s) which are unhandled;/d" \
	-e "s/warning: 'swift-distributed-tracing': found [0-9]* file(s) which are unhandled;.*//" \
	-e "/^ *[^ ]*\/\.build\/checkouts\/swift-distributed-tracing\/.*\/CMakeLists\.txt$$/d"
run: private SHELL := /bin/bash
run: private .SHELLFLAGS := -o pipefail -c
run: deps
	@swift=$$(readlink -f "$$(command -v $(SWIFT))") || swift=; \
	if [ -x .build/release/workspace-agent ] && [ -f $(RUN_STAMP) ] && [ -n "$$swift" ] && \
		newer=$$(find -H $(RUN_INPUTS) "$$swift" -newer $(RUN_STAMP) -print -quit) && [ -z "$$newer" ]; then \
		echo "make run: no source changed since the last build"; \
	else \
		mkdir -p .build && touch $(RUN_STAMP).next && \
		$(SWIFT_CLEAN_ENV) build -c release --product workspace-agent 2>&1 | sed -u $(RUN_QUIET) && \
		mv -f $(RUN_STAMP).next $(RUN_STAMP); \
	fi
	$(call coder-link,.build/release)
	exec .build/release/workspace-agent $(RUN_ARGS)

# Two settings keep the test process's two cooperative threads (one per core) free enough
# for the tests whose servers have deadlines:
# - at most 24 tests at once: with all 1 300 started together, a probe task's 100 ms sleep
#   was resumed up to 12 s late (in-process servers then closed clients for their silence);
#   at 24, 1.3 s at worst, for a run 10 % longer;
# - no backtrace of every thrown error (each cancelled sleep of a timeout race is one): those
#   unwinds held both threads for seconds. A failure still names its line.
# And a bound on the whole run: a test past its time limit is only cancelled, and one that
# waits where cancellation does not reach would hold the run until CI's own deadline. After
# 30 minutes (a loaded 2-core run takes about 5) the test process and those under it are
# ended with status 124 and a line that says why (Tests/CTestWatchdog).
# A Swift program that crashes (the test process, or an agent it started) prints its
# backtrace with symbols but without line tables: a loaded run's agent crashed twice at start
# and its log, read a minute later, still held only the first line of a full symbolication.
TEST_ENV := SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=24 SWT_SWIFT_ERROR_BACKTRACING_ENABLED=0 \
	AGENT_TEST_RUN_LIMIT_SECONDS=1800 SWIFT_BACKTRACE=symbolicate=fast
# The suite replays every fuzz target's seeds and mutations of them (FuzzTargetsTests);
# libFuzzer's runs need a second build of the whole package with sanitizers: `make fuzz-smoke`.
# The tests' temporary files (agents' state and spools, sockets, logs: NSTemporaryDirectory,
# mkdtemp under TMPDIR) go to a directory of the run's own, removed when the run ends, however
# it ends: a run leaves nothing in /tmp, even when a test fails half way or is interrupted
# (a test's own tmpfs under it, left mounted by a killed test process, is detached first).
# Its mode is /tmp's (1777): tests run clients as another user there. Its name is short: unix
# socket paths under it must fit in 108 bytes.
test: deps lint
	$(call debug-build,--build-tests)
	@scratch=$$(mktemp -d /tmp/wt.XXXXXX) && \
		trap 'for m in $$(cut -d" " -f2 /proc/mounts | grep "^$$scratch/"); do umount -l "$$m" 2>/dev/null; done; rm -rf "$$scratch"' EXIT && \
		chmod 1777 "$$scratch" && \
		echo "TMPDIR=$$scratch $(TEST_ENV) $(SWIFT) test --skip-build $(DEBUG_FLAGS)" && \
		TMPDIR=$$scratch $(TEST_ENV) $(SWIFT) test --skip-build $(DEBUG_FLAGS)

# The project's formatting (.swift-format: 4-space indent, existing line breaks kept) over its
# own Swift files, generated protobuf code aside; any finding fails (`make test` runs it first).
# `swift format format -i --configuration .swift-format <files>` applies it.
lint:
	@git ls-files 'Sources/*.swift' 'Tests/*.swift' 'Fuzz/*.swift' ':!Fuzz/Package.swift' | grep -v '\.pb\.swift$$' | xargs -r $(SWIFT) format lint --strict --parallel --configuration .swift-format
	@echo "lint: no findings"

# libFuzzer targets for every decoder of outside bytes (Fuzz/README.md): their code is the
# agent package's FuzzTargets (Fuzz/Targets); Fuzz/ is a package of its own, so only it is
# built with the fuzzer's coverage and AddressSanitizer (libFuzzer's runtime and lld come with
# the Swift toolchain), as one executable, agent-fuzz, that runs the target FUZZ_TARGET names.
# Corpora, crashes and logs go to FUZZ_OUT (git-ignored). `fuzz` runs every target for
# FUZZ_RUNS inputs (or FUZZ_SECONDS each), FUZZ_JOBS at a time, at low priority; `fuzz-smoke`
# is a short run from the seeds.
# One target per file of Fuzz/Targets/Cases (FuzzCatalog names the same ones).
FUZZ_TARGETS := $(sort $(basename $(notdir $(wildcard Fuzz/Targets/Cases/Fuzz*.swift))))
FUZZ_OUT ?= .fuzz
FUZZ_RUNS ?= 1000000
FUZZ_SECONDS ?= 3600
FUZZ_JOBS ?= 2
FUZZ_SMOKE_RUNS ?= 20000
FUZZ_SMOKE_SECONDS ?= 20
# SwiftPM's --sanitize links libFuzzer's runtime (with its main) and AddressSanitizer's;
# -Xswiftc repeats them so the frontend instruments every module for coverage; lld (in the
# toolchain) links: Debian's gold fails on some ASan objects ("internal error in
# format_file_lineno").
FUZZ_BUILD_FLAGS := --package-path Fuzz -c release --sanitize fuzzer --sanitize address -Xswiftc -sanitize=fuzzer,address \
	-Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld

# Without make's own variables in the environment: SwiftPM rebuilds everything when the
# environment changes, and `make fuzz X=1` or a sub-make would change it.
# SwiftPM does not notice a file added to the agent's package (a path dependency here): its
# build plan is dropped whenever the list of the agent's source files changed.
fuzz-build:
	@mkdir -p Fuzz/.build; list=$$(find Sources Fuzz/Targets -name '*.swift' -o -name '*.c' -o -name '*.h' | LC_ALL=C sort | cksum); \
	if [ "$$list" != "$$(cat Fuzz/.build/agent-sources.txt 2>/dev/null)" ]; then \
		rm -f Fuzz/.build/release.yaml; echo "$$list" > Fuzz/.build/agent-sources.txt; fi
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES $(SWIFT) build $(FUZZ_BUILD_FLAGS)

fuzz: fuzz-build
	@mkdir -p $(FUZZ_OUT)
	@echo "fuzzing $(words $(FUZZ_TARGETS)) targets, $(FUZZ_RUNS) runs or $(FUZZ_SECONDS) s each, $(FUZZ_JOBS) at a time; output in $(FUZZ_OUT)/"
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(FUZZ_JOBS) -I{} nice -n 10 Fuzz/run.sh {} $(FUZZ_RUNS) $(FUZZ_SECONDS) $(abspath $(FUZZ_OUT)) corpus \
		| tee $(FUZZ_OUT)/summary.txt; test "$$(grep -c 'result=ok' $(FUZZ_OUT)/summary.txt)" -eq $(words $(FUZZ_TARGETS))

fuzz-smoke: fuzz-build
	@mkdir -p $(FUZZ_OUT)
	@echo "fuzz smoke: $(FUZZ_SMOKE_RUNS) runs (at most $(FUZZ_SMOKE_SECONDS) s) per target from Fuzz/Seeds"
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(FUZZ_JOBS) -I{} Fuzz/run.sh {} $(FUZZ_SMOKE_RUNS) $(FUZZ_SMOKE_SECONDS) $(abspath $(FUZZ_OUT)) smoke \
		| tee $(FUZZ_OUT)/smoke-summary.txt; \
	passed=$$(grep -c 'result=ok' $(FUZZ_OUT)/smoke-summary.txt); \
	echo "fuzz-smoke: $$passed of $(words $(FUZZ_TARGETS)) targets ran without a finding"; \
	test $$passed -eq $(words $(FUZZ_TARGETS))

# Every figure is a ratio against a baseline measured in the same run; the desktop's
# baselines are websockify and ffmpeg's x11grab, the HTTP layer's a bare SwiftNIO server,
# bare Hummingbird and Go's net/http (bench/go-healthz), loaded by wrk (curl: bench/side-by-side.sh).
BENCH_PACKAGES := websockify ffmpeg wrk golang-go curl python3 openssh-server
# `templates` measures the in-workspace commands' start-up on the binary `make install` ships
# (the static build: the Swift runtime linked in, no shared Swift libraries to bind at start).
bench: release static
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(BENCH_PACKAGES)"
	.build/release/agent-bench proc
	.build/release/agent-bench http
	.build/release/agent-bench manifest
	.build/release/agent-bench rpc
	.build/release/agent-bench hardening
	.build/release/agent-bench socket
	.build/release/agent-bench files
	.build/release/agent-bench git
	.build/release/agent-bench desktop
	.build/release/agent-bench boundary
	.build/release/agent-bench tailnet
	.build/release/agent-bench tailnet-direct
	.build/release/agent-bench scripts
	.build/release/agent-bench chat
	.build/release/agent-bench ssh
	.build/release/agent-bench outbound
	.build/release/agent-bench tls
	.build/release/agent-bench speedtest
	.build/release/agent-bench templates --agent $(STATIC_BUILD)/release/workspace-agent

# Regenerates Sources/AgentProto from proto/ with Debian's protoc and the protoc-gen-swift
# product of the swift-protobuf package this project already depends on (not its slow
# build plugin). The generated files are committed.
PROTO_FILES := tailnet/v2/tailnet.proto agent/v2/agent.proto agentsocket/v1/agentsocket.proto boundarylogproxy/codec/v1/boundary.proto
proto: deps
	@command -v protoc >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null)
	$(call debug-build,--product protoc-gen-swift)
	rm -f Sources/AgentProto/*.pb.swift
	cd proto && protoc --plugin=protoc-gen-swift=../.build/debug/protoc-gen-swift \
		--swift_opt=Visibility=Public --swift_opt=FileNaming=PathToUnderscores \
		--swift_out=../Sources/AgentProto $(PROTO_FILES)

# Regenerates Sources/LineRegex/UnicodeScriptTable.swift (the scripts `\p{Greek}` names) from
# the Unicode data of Debian's Perl. The generated file is committed.
unicode-scripts:
	perl tools/unicode-scripts.pl > Sources/LineRegex/UnicodeScriptTable.swift
	$(SWIFT) format format -i --configuration .swift-format Sources/LineRegex/UnicodeScriptTable.swift

# Without make's variables in the environment (SwiftPM rebuilds everything when it changes,
# and `make install DESTDIR=...` would change it).
SWIFT_CLEAN_ENV := env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES $(SWIFT)

static: deps
	$(SWIFT_CLEAN_ENV) build $(STATIC_FLAGS)

# $(call install-binary,DIR): the static build's binary, stripped, into DIR.
define install-binary
	install -d "$(1)"
	install -m 0755 "$$($(SWIFT_CLEAN_ENV) build $(STATIC_FLAGS) --show-bin-path)/workspace-agent" "$(1)/workspace-agent"
	strip "$(1)/workspace-agent"
endef

# $(call coder-link,DIR): a `coder` link to DIR's workspace-agent (relative, so it survives a
# DESTDIR), the name a template's bootstrap runs the agent under (`coder agent`) and the name
# its scripts call (`coder exp sync ...`). Idempotent; a `coder` that is anything else (another
# Coder CLI) is left alone with a warning.
define coder-link
	@link="$(1)/coder"; \
	if [ -L "$$link" ] && [ "$$(readlink "$$link")" = workspace-agent ]; then :; \
	elif [ -e "$$link" ] || [ -L "$$link" ]; then echo "warning: $$link is not a link to workspace-agent: left alone" >&2; \
	else ln -s workspace-agent "$$link" && echo "linked $$link -> workspace-agent"; fi
endef

install: install-user-check static install-files
	$(call install-binary,$(DESTDIR)$(BINDIR))
	$(call coder-link,$(DESTDIR)$(BINDIR))

# Only the `coder` link (no build): beside an installed binary, or under DESTDIR.
install-link:
	install -d "$(DESTDIR)$(BINDIR)"
	$(call coder-link,$(DESTDIR)$(BINDIR))

# The system unit runs the agent as AGENT_USER: without DESTDIR that user must exist (else the
# unit would fail at every start with status 217/USER); with DESTDIR (a package, an image) a
# user missing here is only a warning.
install-user-check:
ifeq ($(LAYOUT),system)
	@if ! id -u '$(AGENT_USER)' >/dev/null 2>&1; then \
		if [ -n "$(DESTDIR)" ]; then \
			echo "warning: no user '$(AGENT_USER)' here; the unit runs the agent as User=$(AGENT_USER), Group=$(AGENT_GROUP): create it where the unit runs" >&2; \
		else \
			echo "make install: there is no user '$(AGENT_USER)': the unit runs the agent as the workspace's user (User=$(AGENT_USER))." >&2; \
			echo "  Name an existing one: make install AGENT_USER=name [AGENT_GROUP=group], or create it: useradd --create-home $(AGENT_USER)" >&2; \
			echo "  (on an installed unit, a drop-in overrides it: systemctl edit workspace-agent, then [Service] User=name Group=group)" >&2; \
			exit 1; \
		fi; \
	fi
endif

# The unit's rewrites: its paths to where things went; in the system layout User= and Group=
# set to AGENT_USER and AGENT_GROUP; in the user layout no User=/Group= (a user unit runs as
# its user), no ordering after the system's network-online.target (a user manager has none)
# and default.target (a user manager has no multi-user.target).
UNIT_EDITS := -e 's|/usr/local/bin/workspace-agent|$(BINDIR)/workspace-agent|g' -e 's|/usr/local/share/doc/workspace-agent|$(DOCDIR)|g' \
	-e 's|/etc/workspace-agent.env|$(SYSCONFDIR)/workspace-agent.env|g'
ifeq ($(LAYOUT),user)
UNIT_EDITS += -e '/^User=/d' -e '/^Group=/d' -e "/^\# The workspace's user;/d" -e '/^After=network-online.target$$/d' \
	-e '/^Wants=network-online.target$$/d' -e 's|^WantedBy=multi-user.target$$|WantedBy=default.target|'
else
UNIT_EDITS += -e 's|^User=coder$$|User=$(AGENT_USER)|' -e 's|^Group=coder$$|Group=$(AGENT_GROUP)|'
endif

# The files beside the binary (no build): the unit with its paths set to where they are
# installed, the environment file (0600: it may hold a token; one already there is the
# administrator's and is kept), README.md and docs/ (README's links stay valid). Without
# DESTDIR it then says how to start the unit.
install-files: install-user-check
	install -d "$(DESTDIR)$(UNITDIR)" "$(DESTDIR)$(SYSCONFDIR)" "$(DESTDIR)$(DOCDIR)"
	sed $(UNIT_EDITS) packaging/workspace-agent.service > "$(DESTDIR)$(UNITDIR)/workspace-agent.service"
	chmod 0644 "$(DESTDIR)$(UNITDIR)/workspace-agent.service"
	@if [ -e "$(DESTDIR)$(SYSCONFDIR)/workspace-agent.env" ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/workspace-agent.env (already there)"; \
	else install -m 0600 packaging/workspace-agent.env "$(DESTDIR)$(SYSCONFDIR)/workspace-agent.env"; fi
	install -m 0644 README.md "$(DESTDIR)$(DOCDIR)/README.md"
	find docs -type f \( -name '*.md' -o -name '*.yaml' \) | while read -r f; do \
		install -D -m 0644 "$$f" "$(DESTDIR)$(DOCDIR)/$$f" || exit 1; done
ifeq ($(DESTDIR),)
ifeq ($(LAYOUT),user)
	@echo "installed a user unit: $(UNITDIR)/workspace-agent.service (settings: $(SYSCONFDIR)/workspace-agent.env); start it with"
	@echo "  systemctl --user daemon-reload && systemctl --user enable --now workspace-agent"
	@echo "  (loginctl enable-linger $$(id -un) keeps it running while you are logged out)"
else
	@echo "installed $(UNITDIR)/workspace-agent.service, running the agent as User=$(AGENT_USER) Group=$(AGENT_GROUP)"
	@echo "  (another user: make install AGENT_USER=name, or a drop-in: systemctl edit workspace-agent, then [Service] User=name Group=group)"
	@case "$(UNITDIR)" in /etc/systemd/system|/usr/local/lib/systemd/system|/usr/lib/systemd/system|/lib/systemd/system) \
		echo "  settings: $(SYSCONFDIR)/workspace-agent.env; start it with: systemctl daemon-reload && systemctl enable --now workspace-agent" ;; \
	*) echo "  systemd does not read units from $(UNITDIR): systemctl link $(UNITDIR)/workspace-agent.service && systemctl enable --now workspace-agent" ;; esac
endif
endif

# Installs into a scratch DESTDIR, checks that the unit's files are where it names them, and
# that the binary needs no Swift toolchain:
# `ldd` lists no Swift library, and it answers --version and --help under `env -i` with
# LD_LIBRARY_PATH empty and the toolchain's runtime libraries hidden (an empty directory mounted
# over it in a private mount namespace). The first static-stdlib release build took 15 min on
# 2 cores (under load), so this is not part of `make test`; later runs reuse .build/static.
install-check: static
	rm -rf $(STATIC_BUILD)/destdir
	$(MAKE) --no-print-directory install-files DESTDIR=$(abspath $(STATIC_BUILD)/destdir)
	$(call install-binary,$(STATIC_BUILD)/destdir$(BINDIR))
	$(call coder-link,$(STATIC_BUILD)/destdir$(BINDIR))
	packaging/check-install.sh --destdir $(STATIC_BUILD)/destdir $(UNITDIR)/workspace-agent.service

# A workspace image (Debian 12) with the agent: packaging/Dockerfile. Needs Docker.
image:
	docker build -f packaging/Dockerfile -t $(IMAGE) .

clean:
	rm -rf .build Fuzz/.build
