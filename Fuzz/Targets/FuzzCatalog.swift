/// One libFuzzer target: the name its seeds, corpus and logs go under, and its
/// `LLVMFuzzerTestOneInput` body. The Fuzz package's `agent-fuzz` runs one of them under
/// libFuzzer with sanitizers; the test suite replays each one's seeds and mutations of them.
public struct FuzzTarget: Sendable {
    public let name: String
    public let run: @Sendable (UnsafePointer<UInt8>?, Int) -> Int32

    /// Runs the target on `bytes` (a failed invariant traps, as under libFuzzer).
    public func callAsFunction(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBufferPointer { run($0.baseAddress, $0.count) }
    }
}

/// Every fuzz target, by name: one per file of `Cases/`, named after it (the Makefile's
/// `FUZZ_TARGETS` is those files' names).
public enum FuzzCatalog {
    public static let targets: [FuzzTarget] = [
        FuzzTarget(name: "FuzzAgentProto", run: fuzzAgentProto),
        FuzzTarget(name: "FuzzAgentSocket", run: fuzzAgentSocket),
        FuzzTarget(name: "FuzzBoundaryFrames", run: fuzzBoundaryFrames),
        FuzzTarget(name: "FuzzCgroupTree", run: fuzzCgroupTree),
        FuzzTarget(name: "FuzzCgroupValues", run: fuzzCgroupValues),
        FuzzTarget(name: "FuzzCron", run: fuzzCron),
        FuzzTarget(name: "FuzzDERPFrames", run: fuzzDERPFrames),
        FuzzTarget(name: "FuzzDERPUpgrade", run: fuzzDERPUpgrade),
        FuzzTarget(name: "FuzzDRPCFrames", run: fuzzDRPCFrames),
        FuzzTarget(name: "FuzzDesktopAction", run: fuzzDesktopAction),
        FuzzTarget(name: "FuzzDirectPaths", run: fuzzDirectPaths),
        FuzzTarget(name: "FuzzEditMatcher", run: fuzzEditMatcher),
        FuzzTarget(name: "FuzzFilePathText", run: fuzzFilePathText),
        FuzzTarget(name: "FuzzFileRequests", run: fuzzFileRequests),
        FuzzTarget(name: "FuzzFrontMatter", run: fuzzFrontMatter),
        FuzzTarget(name: "FuzzGitCredentials", run: fuzzGitCredentials),
        FuzzTarget(name: "FuzzHTTPGuard", run: fuzzHTTPGuard),
        FuzzTarget(name: "FuzzInstanceIdentity", run: fuzzInstanceIdentity),
        FuzzTarget(name: "FuzzJSONRequest", run: fuzzJSONRequest),
        FuzzTarget(name: "FuzzMCPConfig", run: fuzzMCPConfig),
        FuzzTarget(name: "FuzzMCPFrames", run: fuzzMCPFrames),
        FuzzTarget(name: "FuzzOutboundProxy", run: fuzzOutboundProxy),
        FuzzTarget(name: "FuzzProcCgroup", run: fuzzProcCgroup),
        FuzzTarget(name: "FuzzProcMeminfo", run: fuzzProcMeminfo),
        FuzzTarget(name: "FuzzProcNetTCP", run: fuzzProcNetTCP),
        FuzzTarget(name: "FuzzProcStat", run: fuzzProcStat),
        FuzzTarget(name: "FuzzProcessAwait", run: fuzzProcessAwait),
        FuzzTarget(name: "FuzzProcessStart", run: fuzzProcessStart),
        FuzzTarget(name: "FuzzReconnectingPTY", run: fuzzReconnectingPTY),
        FuzzTarget(name: "FuzzReinitEvents", run: fuzzReinitEvents),
        FuzzTarget(name: "FuzzRouteTrie", run: fuzzRouteTrie),
        FuzzTarget(name: "FuzzSSHSession", run: fuzzSSHSession),
        FuzzTarget(name: "FuzzScriptLogs", run: fuzzScriptLogs),
        FuzzTarget(name: "FuzzSpeedtestRequest", run: fuzzSpeedtestRequest),
        FuzzTarget(name: "FuzzTLSHandler", run: fuzzTLSHandler),
        FuzzTarget(name: "FuzzTunnelStack", run: fuzzTunnelStack),
        FuzzTarget(name: "FuzzWebSocketClient", run: fuzzWebSocketClient),
        FuzzTarget(name: "FuzzWireGuardMessages", run: fuzzWireGuardMessages),
        FuzzTarget(name: "FuzzYamuxSession", run: fuzzYamuxSession),
    ]

    /// The target named `name`, if there is one.
    public static func target(named name: String) -> FuzzTarget? {
        targets.first { $0.name == name }
    }
}
