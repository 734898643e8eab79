// swift-tools-version:6.2
import PackageDescription

// libFuzzer's build of the fuzz targets for every decoder of outside bytes (`make fuzz`). A
// package of its own, built with `-sanitize=fuzzer,address` (see the Makefile's
// `fuzz-build`), so the agent's own build and `make test` never carry sanitizers. The
// targets themselves are the agent package's FuzzTargets (Fuzz/Targets); this package's one
// executable, `agent-fuzz`, hands libFuzzer's inputs to the target FUZZ_TARGET names.

// The agent's package, by path: its identity is its directory's name, whatever the clone
// is called.
let agentPackage = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "workspace-agent")

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "workspace-agent-fuzz",
    products: [.executable(name: "agent-fuzz", targets: ["AgentFuzz"])],
    dependencies: [.package(path: "..")],
    targets: [
        // libFuzzer's entry points: FUZZ_TARGET names which of the agent's fuzz targets
        // (FuzzTargets, in the agent's package: Fuzz/Targets) this run drives.
        .executableTarget(
            name: "AgentFuzz",
            dependencies: [.product(name: "FuzzTargets", package: agentPackage)],
            swiftSettings: swiftSettings
        )
    ]
)
