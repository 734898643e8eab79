// swift-tools-version:6.2
import PackageDescription

// The project's own code builds with zero warnings, and keeps it so: a warning fails the
// build (SwiftPM applies this to this package's targets only, never to dependencies).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "workspace-agent",
    products: [
        .executable(name: "workspace-agent", targets: ["WorkspaceAgent"]),
        .executable(name: "agent-bench", targets: ["AgentBench"]),
        .library(name: "AgentProc", targets: ["AgentProc"]),
        .library(name: "LineRegex", targets: ["LineRegex"]),
        .library(name: "AgentHTTP", targets: ["AgentHTTP"]),
        .library(name: "DRPC", targets: ["DRPC"]),
        .library(name: "Yamux", targets: ["Yamux"]),
        .library(name: "DERP", targets: ["DERP"]),
        .library(name: "AgentCore", targets: ["AgentCore"]),
        .library(name: "AgentSystem", targets: ["AgentSystem"]),
        .library(name: "AgentJSON", targets: ["AgentJSON"]),
        .library(name: "AgentProto", targets: ["AgentProto"]),
        .library(name: "AgentFiles", targets: ["AgentFiles"]),
        .library(name: "AgentSocket", targets: ["AgentSocket"]),
        .library(name: "AgentRPC", targets: ["AgentRPC"]),
        .library(name: "BoundaryLogs", targets: ["BoundaryLogs"]),
        .library(name: "Diagnostics", targets: ["Diagnostics"]),
        .library(name: "AgentSSH", targets: ["AgentSSH"]),
        .library(name: "AgentSpeedtest", targets: ["AgentSpeedtest"]),
        .library(name: "ReconnectingPTY", targets: ["ReconnectingPTY"]),
        .library(name: "Desktop", targets: ["Desktop"]),
        .library(name: "WireGuard", targets: ["WireGuard"]),
        .library(name: "TunnelStack", targets: ["TunnelStack"]),
        .library(name: "Tailnet", targets: ["Tailnet"]),
        .library(name: "Scripts", targets: ["Scripts"]),
        .library(name: "ChatContext", targets: ["ChatContext"]),
        .library(name: "MCPEngine", targets: ["MCPEngine"]),
        .library(name: "MCPWire", targets: ["MCPWire"]),
        .library(name: "HostStats", targets: ["HostStats"]),
        .library(name: "GitCredentials", targets: ["GitCredentials"]),
        .library(name: "AgentTLS", targets: ["AgentTLS"]),
        // The fuzz targets' bodies, for Fuzz/'s libFuzzer build (`make fuzz`).
        .library(name: "FuzzTargets", targets: ["FuzzTargets"]),
    ],
    dependencies: [
        // Public API only (Request, Response, HTTPResponder, middleware, the server): the
        // agent routes with its own table (AgentHTTP's Routing/).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // No default traits: BinaryDelimitedStreams imports Foundation (ICU and ~9 MiB resident),
        // which the agent does without (FoundationEssentials only).
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0", traits: []),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // The SSH server (tailnet ports 1 and 22, `--ssh-address`) and its Ed25519 host key.
        .package(url: "https://github.com/apple/swift-nio-ssh.git", from: "0.15.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // Small C shim: clone(CLONE_VM|CLONE_VFORK) + exec with a clean signal state, process
        // group, rlimit and oom/nice adjustment; pidfd, epoll, waitid(WNOWAIT), /proc scans.
        .target(name: "CAgentSpawn"),
        // Message digests (SHA-1, SHA-256) from OpenSSL 3's libcrypto (Debian's libssl-dev).
        .target(name: "CAgentDigest", linkerSettings: [.linkedLibrary("crypto")]),
        // TLS sessions from OpenSSL 3's libssl over memory buffers (sans-IO), for AgentTLS.
        .target(name: "CAgentTLS", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        // TLS on NIO channels over CAgentTLS: contexts, the channel handler, certificates'
        // names. The system's OpenSSL, which the agent links for digests already, is its one
        // TLS and hash implementation (SSH's swift-crypto aside).
        .target(
            name: "AgentTLS",
            dependencies: [
                "AgentSystem", "CAgentTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the agent needs of the system apart from the module contract: POSIX helpers
        // (files, sockets, threads, environment blocks, owned children, inotify), blocking
        // pools, latches and signals, hashing over libcrypto, the retry backoff and the
        // sleep-or-signal wait. No NIO, no Hummingbird.
        .target(name: "AgentSystem", dependencies: ["AgentJSON", "CAgentDigest", "CAgentSpawn"], swiftSettings: swiftSettings),
        // JSON without Foundation: the Go-compatible parser (JSONValue), its writer, the
        // compact encoder of API answers, Go and JSON string quoting. Depends on nothing.
        .target(name: "AgentJSON", swiftSettings: swiftSettings),
        // What every capability module may share: the module contract (AgentModule,
        // ShutdownPhase, AgentContext, Settings), the upward and manifest seams, connection caps
        // and origins, the tool-call key, chat's shared types (Chat/: chat identity, the chat ->
        // paths store, the context's and MCP catalog's types). It re-exports AgentSystem and
        // AgentJSON. No Hummingbird, no NIO.
        .target(
            name: "AgentCore",
            dependencies: [
                "AgentSystem", "AgentJSON",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Structured logging (text and JSON lines) shared by every module.
        .target(
            name: "AgentLogging",
            dependencies: [
                "AgentCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP/WebSocket server core that capability modules mount their routes on
        // (HTTPModule: the contract's HTTP half).
        .target(
            name: "AgentHTTP",
            dependencies: [
                "AgentCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                // MultiThreadedEventLoopGroup: the listeners' loops (AgentHTTPListener).
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Linear-time regular expressions in RE2 syntax (the process API's `until=`).
        .target(name: "LineRegex", swiftSettings: swiftSettings),
        // Capability: the process API (spawn, head/tail output, wait, signal, stream,
        // stdin and terminals, awaits, durable spools, at-most-once starts).
        .target(
            name: "AgentProc",
            dependencies: [
                "AgentCore",
                "CAgentSpawn",
                "AgentHTTP",
                "LineRegex",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // Capability: the agent socket (dRPC on a unix socket: the unit graph for
        // `exp sync`, app status upward) and its client for the CLI.
        .target(
            name: "AgentSocket",
            dependencies: [
                "AgentCore", "AgentJSON", "AgentProto", "DRPC",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // Capability: the file API (read, read lines, atomic write, list, resolve, create,
        // move) and the paths chats touched.
        .target(
            name: "AgentFiles",
            dependencies: [
                "AgentCore", "AgentHTTP", "CAgentSpawn", "CHostStats",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The tailnet's cryptography: libsodium (X25519, ChaCha20-Poly1305, NaCl box) and OpenSSL
        // 3's libcrypto (BLAKE2s), Debian's libsodium-dev and libssl-dev.
        .target(
            name: "CTailnetCrypto",
            linkerSettings: [.linkedLibrary("sodium"), .linkedLibrary("crypto")]
        ),
        // Capability: the tailnet (coordination, DERP, WireGuard, the tunnel's TCP/IPv6 stack)
        // through which coderd reaches the HTTP API on port 4.
        .target(
            name: "Tailnet",
            dependencies: [
                "AgentCore", "AgentHTTP", "AgentProto", "WireGuard", "DERP", "TunnelStack",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // statfs(2) for HostStats (Swift's Glibc module has no <sys/vfs.h>).
        .target(name: "CHostStats"),
        // `stat` (cpu, mem, disk) as Coder's `coder stat` computes it from /proc, the cgroup
        // (v2, v1) and statfs, and the resource monitor that pushes memory and volume use upward.
        .target(
            name: "HostStats",
            dependencies: [
                "AgentCore", "AgentProto", "CHostStats",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["Monitoring/resources_monitor.proto"],
            swiftSettings: swiftSettings
        ),
        // The manifest's scripts (start, stop, cron), the lifecycle outcomes, startup logs with a
        // durable upload journal, metadata, app health and stats: the agent's remaining upward
        // reports, as an upward participant.
        .target(
            name: "Scripts",
            dependencies: [
                "OutboundProxy", "AgentCore", "AgentHTTP", "AgentProto", "CAgentSpawn",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                "AgentTLS",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // WireGuard in userspace: a synchronous state machine (Noise IKpsk2 handshakes, transport
        // keys, timers, cryptokey routing) driven by the tailnet module; no threads, no I/O.
        .target(name: "WireGuard", dependencies: ["CTailnetCrypto"], swiftSettings: swiftSettings),
        // lwIP (Debian's liblwip-dev 2.1.3) for the tailnet's userspace TCP/IPv6: the include
        // path and the link only; CLwIPGlue is the C that uses it, TunnelStack the Swift.
        .systemLibrary(name: "CLwIP", pkgConfig: "lwip", providers: [.apt(["liblwip-dev"])]),
        .target(name: "CLwIPGlue", dependencies: ["CLwIP"]),
        // The tunnel's TCP/UDP/IPv6 stack: IPv6 packets in and out, each TCP connection a NIO
        // channel (port 4's handed to the agent's HTTP server), TCP ports 9+ and UDP
        // forwarded to the workspace's loopback.
        .target(
            name: "TunnelStack",
            dependencies: [
                "CLwIPGlue",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // libgit2 (Debian's libgit2-dev), for the git watcher: the agent never forks git.
        .systemLibrary(name: "CGit2", pkgConfig: "libgit2", providers: [.apt(["libgit2-dev"])]),
        // The repository diff in C under a SIGBUS guard: libgit2 maps working-tree files,
        // and a file truncated under the mapping must fail the scan, not end the agent.
        .target(name: "CGitScan", dependencies: ["CGit2"]),
        // libvncclient (the agent's own VNC connection) and X keysym names for the desktop,
        // loaded with dlopen on first use (headers from libvncserver-dev, libx11-dev); zlib (PNG).
        .target(
            name: "CDesktop",
            linkerSettings: [.linkedLibrary("z")]
        ),
        // Capability: the desktop (portabledesktop or Xvnc, the VNC bridge, computer-use actions).
        .target(
            name: "Desktop",
            dependencies: [
                "AgentCore", "AgentHTTP", "CDesktop", "CAgentSpawn",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The SSH server: sessions (shell, exec, PTY, env, signals, exit status and signal) on
        // swift-nio-ssh, no client authentication (reaching the port is the authorization).
        .target(
            name: "AgentSSH",
            dependencies: [
                "AgentCore", "AgentHTTP", "CAgentSpawn",
                .product(name: "NIOSSH", package: "swift-nio-ssh"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The reconnecting PTY of tailnet port 2 (the web terminal): sessions by ID that outlive
        // their connections, the buffered backend's 64 KiB replay, several attachments at once.
        .target(
            name: "ReconnectingPTY",
            dependencies: [
                "AgentCore", "CAgentSpawn",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The speed test of tailnet port 3: tailscale's protocol version 2, both directions.
        .target(
            name: "AgentSpeedtest",
            dependencies: [
                "AgentCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The agent's answers about itself and the workspace: hello, listening ports (IPv4 and
        // IPv6, from /proc), the manifest and recent logs for support bundles, containers' 403.
        .target(
            name: "Diagnostics",
            dependencies: [
                "AgentCore", "AgentHTTP", "AgentLogging",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        // Capability: the boundary audit-log socket and its forwarder upward.
        .target(
            name: "BoundaryLogs",
            dependencies: [
                "AgentCore", "AgentProto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // Capability: the git watcher (repository snapshots for a chat's paths).
        .target(
            name: "GitWatch",
            dependencies: [
                "AgentCore", "AgentHTTP", "CGit2", "CGitScan",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Chat, one capability in three targets under Sources/Chat (tests under Tests/Chat),
        // with its shared types in AgentCore/Chat and its CLI in WorkspaceAgent/Chat.
        // ChatContext: instruction files, skills, .mcp.json resolved over a file-system seam
        // into the snapshot pushed upward; its watcher, routes and push.
        .target(
            name: "ChatContext",
            dependencies: [
                "AgentCore", "AgentHTTP", "AgentProto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Sources/Chat/ChatContext",
            swiftSettings: swiftSettings),
        // Chat's MCPWire: JSON-RPC framing and messages, the SSE decoder, tool results, errors
        // and bounds; its own target so that the fuzz targets build it without the HTTP client.
        .target(name: "MCPWire", dependencies: ["AgentCore"], path: "Sources/Chat/MCPWire", swiftSettings: swiftSettings),
        // Chat's MCPEngine: the workspace's `.mcp.json` servers, their sessions and tool calls
        // (stdio children the agent owns, Streamable HTTP and HTTP+SSE on OutboundProxy's client); the
        // client is hand-written on FoundationEssentials, see docs/api/mcp.md.
        .target(
            name: "MCPEngine",
            dependencies: [
                "OutboundProxy", "AgentCore", "AgentHTTP", "CAgentSpawn", "MCPWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/Chat/MCPEngine",
            swiftSettings: swiftSettings),
        // Generated protobuf messages (committed; `make proto` regenerates them from proto/).
        .target(
            name: "AgentProto",
            dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")],
            swiftSettings: swiftSettings
        ),
        // The received-bytes buffer dRPC's and yamux's frame decoders share.
        .target(name: "FrameBytes", swiftSettings: swiftSettings),
        // Outbound proxies as Go's ProxyFromEnvironment reads them (HTTP_PROXY, HTTPS_PROXY,
        // NO_PROXY): the choice per target, the CONNECT tunnel and SOCKS5 of the agent's own
        // dials, TLS checked as Go checks it, and the HTTP client of its own requests (REST,
        // metadata, MCP). Shared by DERP, AgentRPC, MCP and Scripts.
        .target(
            name: "OutboundProxy",
            dependencies: [
                "AgentSystem",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                "AgentTLS",
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // dRPC: wire format, unary and streaming client and server; transport-agnostic. Needs
        // only AgentJSON (Go's quoting of a method name in its errors), not AgentCore.
        .target(name: "DRPC", dependencies: ["AgentJSON", "FrameBytes"], swiftSettings: swiftSettings),
        // yamux: framing and a session over any byte stream, run on its connection's NIO loop.
        .target(
            name: "Yamux",
            dependencies: [
                "FrameBytes",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Git credentials for the workspace's commands: git's GIT_ASKPASS and GIT_SSH_COMMAND
        // answered with the owner's external-auth tokens and Coder git key, `external-auth
        // access-token`, and VS Code's git-auth settings.
        .target(
            name: "GitCredentials",
            dependencies: ["AgentCore", "AgentJSON", "AgentSystem", "CAgentSpawn", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // Capability: the upward RPC session (WebSocket + yamux + dRPC + protobuf).
        .target(
            name: "AgentRPC",
            dependencies: [
                "OutboundProxy", "AgentCore", "AgentProto", "DRPC", "Yamux",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                "AgentTLS",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // DERP: the relay client the tailnet reaches coderd's relay with (frames, handshake,
        // Upgrade and WebSocket transports, reconnects) and disco ping/pong over it.
        .target(
            name: "DERP",
            dependencies: [
                "OutboundProxy", "AgentSystem", "CTailnetCrypto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                "AgentTLS",
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // A real DERP relay for tests (Upgrade and WebSocket, plain and TLS, hostile frames);
        // not part of the agent and in no product.
        .target(
            name: "DERPRelayDouble",
            dependencies: [
                "DERP", "AgentSystem", "CTailnetCrypto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                "AgentTLS",
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Runs the modules: mounts their routes on the HTTP listeners, runs their services
        // and stops them phase by phase within the shutdown bound (signals, watchdog).
        .target(
            name: "AgentHost",
            dependencies: [
                "AgentCore", "AgentHTTP", "CAgentSpawn",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                // RuntimeWarmUp: NIOHTTP1's pipelines once on an embedded channel at start.
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The daemon: reads each module's options, builds the modules, hands them to the host.
        .executableTarget(
            name: "WorkspaceAgent",
            dependencies: [
                "HostStats",
                "GitCredentials",
                "Tailnet",
                "Scripts",
                "ChatContext",
                "MCPEngine",
                "AgentCore",
                "AgentHTTP",
                "AgentFiles",
                "AgentHost",
                "GitWatch",
                "Desktop",
                "BoundaryLogs",
                "Diagnostics",
                "AgentSSH",
                "AgentSpeedtest",
                "ReconnectingPTY",
                "AgentProc",
                "AgentProto",
                "AgentSocket",
                "AgentLogging",
                "AgentRPC",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["BuildInfo"]
        ),
        // Writes the commit the binary is built from (`--version`, the build-info metric).
        .plugin(name: "BuildInfo", capability: .buildTool()),
        // Benchmarks: every figure is a ratio against a baseline measured in the same run.
        .executableTarget(
            name: "AgentBench",
            dependencies: [
                "CAgentSpawn", "AgentCore", "AgentHTTP", "AgentRPC", "AgentProto", "AgentSocket", "ControlPlaneDouble", "DRPC", "Yamux", "GitWatch",
                // `agent-bench chat`: the MCP client and the context resolver in process.
                "ChatContext", "MCPEngine",
                // `agent-bench tailnet`: the relay double, a DERP client per bridge, WireGuard keys.
                "DERP", "DERPRelayDouble", "WireGuard",
                // `agent-bench templates`: the stat figures' own cost, in process.
                "HostStats",
                // `agent-bench tls`: AgentTLS's handler against the same OpenSSL on blocking sockets.
                "AgentTLS", "CAgentTLS",
                // `agent-bench outbound`: the agent's own HTTP client, in process.
                "OutboundProxy",
                // `agent-bench speedtest`: tailnet port 3's server on a loopback listener.
                "AgentSpeedtest",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Ends a test process that runs past AGENT_TEST_RUN_LIMIT_SECONDS (`make test` sets it).
        .target(name: "CTestWatchdog", path: "Tests/CTestWatchdog"),
        // What the test targets share (a library target under Tests/): raw HTTP and WebSocket
        // clients, loopback sockets, child programs, the channel hand-over, captured logs.
        .target(
            name: "AgentTestSupport",
            dependencies: [
                "AgentCore", "CAgentSpawn", "CTestWatchdog", "AgentHTTP", "AgentProto",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/AgentTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MCPEngineTests",
            dependencies: [
                "MCPEngine", "AgentCore", "AgentTestSupport", "OutboundProxy",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/Chat/MCPEngineTests",
            exclude: ["Servers"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LineRegexTests",
            dependencies: ["LineRegex", "AgentTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentProcTests",
            dependencies: [
                "AgentCore", "AgentProc", "AgentHTTP", "AgentTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentLoggingTests",
            dependencies: ["AgentLogging", "AgentCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "OutboundProxyTests",
            dependencies: [
                "OutboundProxy", "AgentTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                "AgentTLS",
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentTLSTests",
            dependencies: [
                "AgentTLS", "AgentSystem", "AgentTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "AgentSystemTests", dependencies: ["AgentSystem", "AgentTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "AgentJSONTests", dependencies: ["AgentJSON"], swiftSettings: swiftSettings),
        .testTarget(name: "MCPWireTests", dependencies: ["MCPWire", "AgentJSON"], path: "Tests/Chat/MCPWireTests", swiftSettings: swiftSettings),
        .testTarget(
            name: "AgentCoreTests",
            dependencies: [
                "AgentCore", "AgentTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentHostTests",
            dependencies: [
                "AgentCore", "AgentHTTP", "AgentHost", "AgentProc", "AgentTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentHTTPTests",
            dependencies: [
                "AgentCore", "AgentHTTP", "AgentTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DRPCTests",
            dependencies: ["DRPC", "Yamux", "AgentTestSupport", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        // An in-process control plane that speaks the real wire format byte for byte, for
        // tests and the rpc benchmark; not part of the agent and in no product.
        .target(
            name: "ControlPlaneDouble",
            dependencies: [
                "AgentCore", "AgentJSON", "AgentRPC", "AgentProto", "DRPC", "Yamux",
                // The resource-monitoring messages (until agent.proto carries them).
                "HostStats",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentFilesTests",
            dependencies: [
                "AgentCore", "AgentFiles", "AgentHTTP", "AgentTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentSSHTests",
            dependencies: [
                "AgentSSH", "AgentTestSupport", "AgentCore", "AgentHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOSSH", package: "swift-nio-ssh"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReconnectingPTYTests",
            dependencies: [
                "ReconnectingPTY", "AgentTestSupport", "AgentCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentSpeedtestTests",
            dependencies: [
                "AgentSpeedtest", "AgentTestSupport", "AgentCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DiagnosticsTests",
            dependencies: ["Diagnostics", "AgentTestSupport", "AgentCore", "AgentHTTP", "AgentLogging"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BoundaryLogsTests",
            dependencies: [
                "BoundaryLogs", "AgentTestSupport", "AgentCore", "AgentProto", "AgentRPC", "ControlPlaneDouble",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DesktopTests",
            dependencies: [
                "Desktop", "CDesktop", "AgentTestSupport", "AgentCore", "AgentHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GitWatchTests",
            dependencies: [
                "GitWatch", "AgentTestSupport", "AgentCore", "AgentHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentSocketTests",
            dependencies: [
                "AgentCore", "AgentSocket", "AgentProto", "AgentRPC", "AgentTestSupport", "ChatContext", "ControlPlaneDouble", "DRPC",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentRPCTests",
            dependencies: [
                "AgentCore", "AgentRPC", "AgentProto", "AgentTestSupport", "ControlPlaneDouble", "DRPC", "OutboundProxy", "Yamux",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                "AgentTLS",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "WireGuardTests",
            dependencies: ["WireGuard", "CTailnetCrypto", "AgentTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ChatContextTests",
            dependencies: [
                "ChatContext", "AgentCore", "AgentHTTP", "AgentTestSupport", "AgentProto", "AgentRPC", "ControlPlaneDouble",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/Chat/ChatContextTests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AgentProtoTests",
            dependencies: ["AgentProto", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TunnelStackTests",
            dependencies: [
                "TunnelStack", "AgentTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DERPTests",
            dependencies: [
                "DERP", "DERPRelayDouble", "AgentTestSupport", "CTailnetCrypto", "OutboundProxy",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "YamuxTests",
            dependencies: ["Yamux", "AgentTestSupport", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "WorkspaceAgentTests",
            dependencies: [
                "DERP", "DERPRelayDouble", "WireGuard",
                "AgentCore", "AgentTestSupport", "CAgentSpawn", "CTestWatchdog", "ControlPlaneDouble", "AgentProto", "AgentRPC", "AgentSocket",
                "HostStats",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["Servers"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GitCredentialsTests",
            dependencies: ["GitCredentials", "AgentCore", "AgentJSON", "AgentTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ScriptsTests",
            dependencies: [
                "Scripts", "AgentCore", "AgentProto", "AgentRPC", "AgentTestSupport", "ControlPlaneDouble", "OutboundProxy",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                "AgentTLS",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HostStatsTests",
            dependencies: [
                "HostStats", "AgentCore", "AgentProto", "AgentRPC", "AgentTestSupport", "ControlPlaneDouble",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TailnetTests",
            dependencies: [
                "Tailnet", "AgentProto", "AgentTestSupport", "ControlPlaneDouble", "AgentHTTP", "AgentCore", "DERP", "WireGuard",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // Every decoder of outside bytes has a fuzz target: its invariants as one function
        // of libFuzzer's input (Fuzz/README.md). Built here with no sanitizers, so the suite
        // replays each target's seeds and mutations of them (FuzzTargetsTests); Fuzz/ builds
        // the same code with libFuzzer and sanitizers.
        .target(
            name: "FuzzTargets",
            dependencies: [
                "AgentCore", "AgentFiles", "AgentHTTP", "AgentJSON", "AgentProc", "AgentProto", "AgentRPC", "AgentSSH",
                "AgentSocket", "AgentSpeedtest", "AgentSystem", "AgentTLS", "BoundaryLogs", "ChatContext", "DERP", "DRPC", "Desktop",
                "GitCredentials", "HostStats", "LineRegex", "MCPWire", "OutboundProxy", "ReconnectingPTY", "Scripts", "Tailnet",
                "TunnelStack", "WireGuard", "Yamux",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            path: "Fuzz/Targets",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "FuzzTargetsTests", dependencies: ["FuzzTargets"], swiftSettings: swiftSettings),
    ]
)
