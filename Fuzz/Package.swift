// swift-tools-version:6.2
import PackageDescription

// libFuzzer targets for every decoder of outside bytes (`make fuzz`). A package of its own,
// built with `-sanitize=fuzzer,address` (see the Makefile's `fuzz-build`), so the agent's
// own build and `make test` never carry sanitizers. Each target is one executable whose
// `LLVMFuzzerTestOneInput` feeds the agent's code and checks invariants; libFuzzer's
// `main` drives it.

// The agent's package, by path: its identity is its directory's name, whatever the clone
// is called.
let agentPackage = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "workspace-agent")

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

func agent(_ product: String) -> Target.Dependency {
    .product(name: product, package: agentPackage)
}

let nioCore = Target.Dependency.product(name: "NIOCore", package: "swift-nio")
let nioEmbedded = Target.Dependency.product(name: "NIOEmbedded", package: "swift-nio")

/// One fuzz target: an executable named `name` in `Sources/<name>`.
func fuzzTarget(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(name: name, dependencies: ["FuzzSupport"] + dependencies, swiftSettings: swiftSettings)
}

let targets: [(String, [Target.Dependency])] = [
    ("FuzzEditMatcher", [agent("AgentFiles")]),
    ("FuzzFileRequests", [agent("AgentFiles"), agent("AgentCore"), agent("AgentHTTP")]),
    ("FuzzFilePathText", [agent("AgentCore")]),
    ("FuzzJSONRequest", [agent("AgentCore"), agent("AgentHTTP")]),
    ("FuzzProcessStart", [agent("AgentProc"), agent("AgentCore"), agent("AgentHTTP")]),
    ("FuzzDesktopAction", [agent("Desktop"), agent("AgentHTTP")]),
    ("FuzzBoundaryFrames", [agent("BoundaryLogs"), agent("AgentCore"), agent("AgentProto"), nioCore, nioEmbedded]),
    ("FuzzAgentProto", [agent("AgentProto"), agent("AgentRPC"), agent("AgentCore"), .product(name: "SwiftProtobuf", package: "swift-protobuf")]),
    ("FuzzDRPCFrames", [agent("DRPC")]),
    ("FuzzDERPFrames", [agent("DERP")]),
    ("FuzzAgentSocket", [agent("AgentSocket"), agent("AgentCore"), agent("AgentProto"), agent("DRPC"),
                         .product(name: "SwiftProtobuf", package: "swift-protobuf")]),
    ("FuzzYamuxSession", [agent("Yamux")]),
    ("FuzzWebSocketClient", [agent("AgentRPC"), agent("Yamux"), nioCore, nioEmbedded,
                             .product(name: "NIOWebSocket", package: "swift-nio")]),
    ("FuzzHTTPGuard", [agent("AgentHTTP"), agent("AgentCore"), nioCore, nioEmbedded,
                       .product(name: "NIOHTTP1", package: "swift-nio")]),
    ("FuzzWireGuardMessages", [agent("WireGuard")]),
    ("FuzzTunnelStack", [agent("TunnelStack")]),
    ("FuzzCron", [agent("Scripts")]),
    ("FuzzScriptLogs", [agent("Scripts")]),
    ("FuzzProcessAwait", [agent("AgentProc"), agent("LineRegex")]),
    ("FuzzMCPFrames", [agent("MCPWire"), agent("AgentCore")]),
    ("FuzzMCPConfig", [agent("AgentCore")]),
    ("FuzzFrontMatter", [agent("ChatContext")]),
    ("FuzzProcNetTCP", [agent("AgentSystem")]),
    ("FuzzSSHSession", [agent("AgentSSH")]),
    ("FuzzSpeedtestRequest", [agent("AgentSpeedtest"), agent("AgentJSON")]),
    ("FuzzReconnectingPTY", [agent("ReconnectingPTY")]),
    ("FuzzCgroupValues", [agent("HostStats")]),
    ("FuzzCgroupTree", [agent("HostStats")]),
    ("FuzzProcCgroup", [agent("HostStats")]),
    ("FuzzProcMeminfo", [agent("HostStats")]),
    ("FuzzProcStat", [agent("HostStats")]),
    ("FuzzGitCredentials", [agent("GitCredentials"), agent("AgentJSON")]),
    ("FuzzReinitEvents", [agent("AgentRPC")]),
    ("FuzzDirectPaths", [agent("Tailnet"), agent("DERP")]),
]

let package = Package(
    name: "workspace-agent-fuzz",
    products: targets.map { .executable(name: $0.0, targets: [$0.0]) },
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0", traits: []),
    ],
    targets: [
        // Reading structured cases from libFuzzer's bytes, invariant checks, running async code.
        .target(name: "FuzzSupport", swiftSettings: swiftSettings),
    ] + targets.map { fuzzTarget($0.0, $0.1) }
)
