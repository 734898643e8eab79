# WorkspaceAgent: `make run` and `make test` work on a fresh Debian 12 machine as root
# with only Swift installed; `deps` installs whatever Debian packages are missing.

SWIFT ?= swift
# C libraries the agent links (git watching; the desktop's libvncclient, zlib and X keysym
# names), pkg-config to find them, and the tools the tests drive (git, procps for ps/pgrep,
# Python's Prometheus text-format parser, TigerVNC's Xvnc and X clients for the desktop).
DEB_PACKAGES := pkg-config libgit2-dev libssh2-1-dev libvncserver-dev libx11-dev zlib1g-dev git procps python3-prometheus-client \
	tigervnc-standalone-server xdotool x11-xserver-utils x11-utils
RUN_ARGS ?=

.PHONY: all deps build release run test bench proto clean

all: build

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product workspace-agent
	$(SWIFT) build -c release --product agent-bench

# Builds (release) and starts the agent on its embedded defaults: HTTP API on
# 127.0.0.1:2114, no control plane. Stop it with Ctrl-C (SIGINT) or SIGTERM.
run: deps
	$(SWIFT) build -c release --product workspace-agent
	exec .build/release/workspace-agent $(RUN_ARGS)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# Every figure is a ratio against a baseline measured in the same run; the desktop's
# baselines are websockify and ffmpeg's x11grab, the HTTP layer's a bare SwiftNIO server,
# bare Hummingbird and Go's net/http (bench/go-healthz), loaded by wrk (curl: bench/side-by-side.sh).
BENCH_PACKAGES := websockify ffmpeg wrk golang-go curl
bench: release
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

# Regenerates Sources/AgentProto from proto/ with Debian's protoc and the protoc-gen-swift
# product of the swift-protobuf package this project already depends on (not its slow
# build plugin). The generated files are committed.
PROTO_FILES := agent/v2/agent.proto agentsocket/v1/agentsocket.proto boundarylogproxy/codec/v1/boundary.proto
proto: deps
	@command -v protoc >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null)
	$(SWIFT) build --product protoc-gen-swift
	rm -f Sources/AgentProto/*.pb.swift
	cd proto && protoc --plugin=protoc-gen-swift=../.build/debug/protoc-gen-swift \
		--swift_opt=Visibility=Public --swift_opt=FileNaming=PathToUnderscores \
		--swift_out=../Sources/AgentProto $(PROTO_FILES)

clean:
	rm -rf .build
