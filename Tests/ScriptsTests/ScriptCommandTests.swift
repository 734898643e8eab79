import AgentCore
import Foundation
import Logging
import AgentProto
import AgentRPC
import AgentTestSupport
import SwiftProtobuf
import Testing

@testable import Scripts

/// How a script's command line, environment, directories and log path are made.
struct ScriptCommandTests {
    static func context(_ environment: [String: String] = ["PATH": "/usr/bin:/bin", "HOME": "/home/u", "SHELL": "/bin/sh"]) -> ScriptCommand.Context {
        var manifest = AgentManifest(directory: "/nonexistent-dir", environment: ["CODER": "true", "FROM_MANIFEST": "yes", "PATH": "/manifest/bin"])
        manifest.workspaceID = [0x0b, 0x7c, 0x6d, 0x5e, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1]
        return ScriptCommand.Context(
            agentEnvironment: environment, manifest: manifest,
            command: CommandEnvironment(executable: "/agent", binDirectory: "/data/coder-script-data/bin"),
            manifestDirectory: "/nonexistent-dir",
            agentToken: "t0ken", agentSocketPath: "/tmp/agent.sock", binDirectory: "/data/coder-script-data/bin",
            dataRoot: "/data/coder-script-data")
    }

    @Test func shellRunsTheScriptWithDashC() throws {
        let command = try ScriptCommand.make(script: "echo hi", context: Self.context(), dataDirectory: "/data/x")
        let shell = try #require(UserAccount.current(environment: ["SHELL": "/bin/sh"]).shell)
        #expect(command.arguments == [shell, "-c", "echo hi"])
        #expect(command.environment["SHELL"] == shell)
    }

    @Test func shebangSelectsTheInterpreterWithTheWholeScript() throws {
        let script = "  \n#!/usr/bin/env python3 -u\nprint(1)\n"
        let command = try ScriptCommand.make(script: script, context: Self.context(), dataDirectory: nil)
        #expect(command.executable == "/usr/bin/env")
        #expect(command.arguments == ["/usr/bin/env", "python3", "-u", "-c", script])
        #expect(ScriptCommand.shebang("echo no") == nil)
        #expect(ScriptCommand.shebang("#!/bin/bash -e") == ["/bin/bash", "-e"])
    }

    @Test func shellWordsFollowShellQuoting() {
        #expect(ShellWords.split(#"a 'b c' "d \"e\" \$f" g\ h"#) == ["a", "b c", #"d "e" $f"#, "g h"])
        #expect(ShellWords.split("  ") == [])
        #expect(ShellWords.split(#"'' x"#) == ["", "x"])
        #expect(ShellWords.split(#""a\nb""#) == [#"a\nb"#])
    }

    @Test func aMissingInterpreterIsASetupError() {
        #expect(throws: ScriptCommand.SetupError.self) {
            try ScriptCommand.make(script: "#!/no/such/interpreter\nx", context: Self.context(), dataDirectory: nil)
        }
    }

    /// The environment: the manifest's variables over the agent's, the bin dir first on PATH,
    /// the socket and token, the script variables only for scripts (not metadata).
    @Test func environmentLayers() throws {
        let env = try ScriptCommand.make(script: "true", context: Self.context(), dataDirectory: "/data/x").environment
        #expect(env["FROM_MANIFEST"] == "yes")
        #expect(env["PATH"] == "/data/coder-script-data/bin:/manifest/bin")
        #expect(env["CODER_AGENT_SOCKET_PATH"] == "/tmp/agent.sock")
        #expect(env["CODER_AGENT_TOKEN"] == "t0ken")
        #expect(env["CODER_WORKSPACE_ID"] == "0b7c6d5e-0000-4000-8000-000000000001")
        #expect(env["CODER_SCRIPT_DATA_DIR"] == "/data/x")
        #expect(env["CODER_SCRIPT_BIN_DIR"] == "/data/coder-script-data/bin")
        #expect(env["SSH_CONNECTION"] == "0.0.0.0 0 0.0.0.0 0")
        let metadata = try ScriptCommand.make(script: "true", context: Self.context(), dataDirectory: nil).environment
        #expect(metadata["CODER_SCRIPT_DATA_DIR"] == nil && metadata["CODER_SCRIPT_BIN_DIR"] == nil)
        var goTraceback = Self.context()
        goTraceback.agentEnvironment["GOTRACEBACK"] = "none"
        #expect(try ScriptCommand.make(script: "true", context: goTraceback, dataDirectory: nil).environment["GOTRACEBACK"] == nil)
    }

    @Test func workingDirectoryFallsBackToHome() {
        #expect(ScriptCommand.workingDirectory("/nonexistent-dir", home: "/home/u") == "/home/u")
        #expect(ScriptCommand.workingDirectory("/tmp", home: "/home/u") == "/tmp")
        #expect(ScriptCommand.workingDirectory("", home: "/home/u") == "/home/u")
    }

    @Test func logPaths() {
        let source: [UInt8] = Array(repeating: 0xAB, count: 16)
        let env = ["LOGS": "/var/log/ws"]
        #expect(
            ScriptSetup.logPath("", logSourceID: source, logDirectory: "/tmp", home: "/home/u", environment: env)
                == "/tmp/coder-script-abababab-abab-abab-abab-abababababab.log")
        #expect(ScriptSetup.logPath("~/x.log", logSourceID: source, logDirectory: "/tmp", home: "/home/u", environment: env) == "/home/u/x.log")
        #expect(ScriptSetup.logPath("~x.log", logSourceID: source, logDirectory: "/tmp", home: "/home/u", environment: env) == "/home/u/x.log")
        #expect(ScriptSetup.logPath("$LOGS/a.log", logSourceID: source, logDirectory: "/tmp", home: "/home/u", environment: env) == "/var/log/ws/a.log")
        #expect(ScriptSetup.logPath("rel/a.log", logSourceID: source, logDirectory: "/tmp", home: "/home/u", environment: env) == "/tmp/rel/a.log")
    }

    @Test func openLogMakesParentsAndTruncates() throws {
        let root = NSTemporaryDirectory() + "script-log-\(UUID().uuidString.prefix(8))"
        let path = root + "/a/b/run.log"
        var fd = try ScriptSetup.openLog(path)
        _ = "a longer first run\n".withCString { write(fd, $0, strlen($0)) }
        close(fd)
        fd = try ScriptSetup.openLog(path)
        _ = "second\n".withCString { write(fd, $0, strlen($0)) }
        close(fd)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "second\n")
        let mode = try #require((try FileManager.default.attributesOfItem(atPath: root + "/a")[.posixPermissions] as? NSNumber)?.intValue)
        #expect(mode & 0o777 == 0o700)
        #expect(throws: ScriptCommand.SetupError.self) { try ScriptSetup.openLog("/proc/no-such/x.log") }
        // A FIFO at the log's path (a script may make one) is refused at once: its open had
        // blocked until a reader came, and its writes the child reactor.
        let fifo = root + "/fifo.log"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: ScriptCommand.SetupError.self) { try ScriptSetup.openLog(fifo) }
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        defer { close(reader) }
        #expect(throws: ScriptCommand.SetupError.self) { try ScriptSetup.openLog(fifo) }
        try? FileManager.default.removeItem(atPath: root)
    }

    @Test func uuidText() {
        let bytes: [UInt8] = [0x5b, 0x0e, 0x8f, 0x6c, 0x8f, 0x7e, 0x4d, 0x3c, 0x9a, 0x5b, 0x0c, 0x1d, 0x2e, 0x3f, 0x4a, 0x5b]
        #expect(UUIDText.format(bytes) == "5b0e8f6c-8f7e-4d3c-9a5b-0c1d2e3f4a5b")
        #expect(UUIDText.parse("5B0E8F6C-8F7E-4D3C-9A5B-0C1D2E3F4A5B") == bytes)
        #expect(UUIDText.parse("5b0e8f6c8f7e4d3c9a5b0c1d2e3f4a5b") == bytes)
        #expect(UUIDText.parse("not-a-uuid") == nil)
        #expect(UUIDText.parse("5b0e8f6c-8f7e-4d3c-9a5b-0c1d2e3f4a5g") == nil)
    }

    /// Metadata: exit status, cap and timeout texts as the reference writes them.
    @Test func metadataCommandTexts() async throws {
        var context = Self.context(ProcessInfo.processInfo.environment)
        context.manifest.environment = [:]
        let ok = await MetadataCommand.collect(script: "echo value; echo err >&2", timeout: .seconds(10), context: context)
        #expect(ok.value == "value\nerr\n" && ok.error == "")
        let failed = await MetadataCommand.collect(script: "printf partial; exit 3", timeout: .seconds(10), context: context)
        #expect(failed.value == "partial" && failed.error == "run cmd: exit status 3")
        let big = await MetadataCommand.collect(script: "head -c 20000 /dev/zero | tr '\\0' a", timeout: .seconds(10), context: context)
        #expect(big.value.utf8.count == 10_240)
        #expect(big.error == "run cmd: output truncated from 20000 to 10240 bytes")
        // Long enough for a loaded host to start the shell and print before the deadline.
        let slow = await MetadataCommand.collect(script: "echo before; sleep 60", timeout: .seconds(5), context: context)
        #expect(slow.value == "before\n")
        #expect(slow.error == "run cmd: signal: killed\ncontext deadline exceeded")
    }

    /// A collection whose task is cancelled (a dropped connection) ends its command then,
    /// not at its timeout: a hung command cannot hold the reconnect.
    @Test(.timeLimit(.minutes(1))) func aCancelledMetadataCollectionEndsItsCommand() async throws {
        var context = Self.context(ProcessInfo.processInfo.environment)
        context.manifest.environment = [:]
        let marker = NSTemporaryDirectory() + "metadata-started-\(UUID().uuidString)"
        defer { unlink(marker) }
        let collection = Task {
            await MetadataCommand.collect(script: "touch '\(marker)'; exec sleep 3600", timeout: .seconds(3600), context: context)
        }
        #expect(await eventually(timeout: .seconds(30)) { access(marker, F_OK) == 0 }, "the command started")
        collection.cancel()
        let outcome = await collection.value
        #expect(outcome.error.hasPrefix("run cmd: "), "ended by the cancel: \(outcome)")
    }

    /// A burst of on-demand runs admits at most four at once: each is counted when it is
    /// admitted, not when its task gets to start it (a burst had all passed the check first).
    @Test(.timeLimit(.minutes(2))) func aBurstOfRunsAdmitsFour() async throws {
        let directory = NSTemporaryDirectory() + "run-burst-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let runner = ScriptRunner(
            configuration: .init(scriptDataDirectory: directory + "/data", logDirectory: directory, stopScriptsLimit: .seconds(60)),
            environment: .init(agentEnvironment: ["PATH": "/usr/bin:/bin", "HOME": directory]),
            uploads: try ScriptUploads(directory: directory + "/uploads", metrics: ScriptsMetrics()),
            lifecycle: NoLifecycleReporter(), clock: nil, metrics: ScriptsMetrics(), logger: .init(label: "test"))
        let gate = directory + "/gate"
        let id = [UInt8](repeating: 5, count: 16)
        // Each run waits for the gate (bounded: 30 s).
        let wait = "i=0; while [ ! -e \(gate) ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"
        var manifest = AgentManifest(directory: directory, environment: [:])
        manifest.scripts = [ManifestScript(id: id, logSourceID: [UInt8](repeating: 6, count: 16), script: wait)]
        await runner.start(with: manifest)
        var admitted = 0
        var busy = 0
        for _ in 0..<10 {
            do {
                _ = try runner.runNow(id: id)
                admitted += 1
            } catch .busy {
                busy += 1
            }
        }
        #expect(admitted == ScriptRunner.maxOverlappingRuns && busy == 10 - ScriptRunner.maxOverlappingRuns, "\(admitted) admitted")
        try TestFile.write(gate, [UInt8]())
        await runner.stop()
    }

    @Test func stopTimeoutIsBoundedByTheLimit() {
        let runner = ScriptRunner(
            configuration: .init(scriptDataDirectory: "/tmp", logDirectory: "/tmp", stopScriptsLimit: .seconds(60)),
            environment: .init(agentEnvironment: [:]),
            uploads: try! ScriptUploads(
                directory: NSTemporaryDirectory() + "stop-limit-\(UUID().uuidString.prefix(8))", metrics: ScriptsMetrics()),
            lifecycle: NoLifecycleReporter(), clock: nil, metrics: ScriptsMetrics(), logger: .init(label: "test"))
        #expect(runner.stopTimeout(ManifestScript(id: [], logSourceID: [], script: "", timeout: .seconds(5))) == .seconds(5))
        #expect(runner.stopTimeout(ManifestScript(id: [], logSourceID: [], script: "", timeout: .seconds(600))) == .seconds(60))
        #expect(runner.stopTimeout(ManifestScript(id: [], logSourceID: [], script: "")) == .seconds(60))
    }
}

/// The tunnel's flows as the stats report counts them.
struct TunnelTrafficTests {
    static func ipv6(proto: UInt8, source: UInt8, destination: UInt8, sourcePort: UInt16, destinationPort: UInt16) -> [UInt8] {
        var packet = [UInt8](repeating: 0, count: 60)
        packet[0] = 0x60
        packet[6] = proto
        packet[23] = source
        packet[39] = destination
        packet[40] = UInt8(sourcePort >> 8); packet[41] = UInt8(sourcePort & 0xFF)
        packet[42] = UInt8(destinationPort >> 8); packet[43] = UInt8(destinationPort & 0xFF)
        return packet
    }

    @Test func flowsAreCountedOncePerWindow() {
        let traffic = TunnelTraffic()
        let a = Self.ipv6(proto: 6, source: 1, destination: 2, sourcePort: 50000, destinationPort: 4)
        let reply = Self.ipv6(proto: 6, source: 2, destination: 1, sourcePort: 4, destinationPort: 50000)
        let b = Self.ipv6(proto: 17, source: 1, destination: 2, sourcePort: 1, destinationPort: 2)
        for _ in 0..<3 { a.withUnsafeBytes { traffic.record(packet: $0, inbound: true) } }
        reply.withUnsafeBytes { traffic.record(packet: $0, inbound: false) }
        b.withUnsafeBytes { traffic.record(packet: $0, inbound: true) }
        let window = traffic.takeWindow()
        #expect(window.flowsByProtocol == ["tcp": 2, "udp": 1])
        #expect(window.received == .init(packets: 4, bytes: 240))
        #expect(window.sent == .init(packets: 1, bytes: 60))
        #expect(traffic.takeWindow() == TunnelTraffic.Window())
        [UInt8]([0x60, 1]).withUnsafeBytes { traffic.record(packet: $0, inbound: true) }
        #expect(traffic.takeWindow().received.packets == 1)
    }
}

/// coderd's metadata Durations: N nanoseconds meaning N seconds; a proper one as it is.
struct ManifestDurationTests {
    @Test func metadataIntervalsAreReadAsCoderdSendsThem() {
        #expect(ManifestMetadata.seconds(fromWire: 0, nanos: 5) == .seconds(5))
        #expect(ManifestMetadata.seconds(fromWire: 0, nanos: 0) == .zero)
        #expect(ManifestMetadata.seconds(fromWire: 10, nanos: 0) == .seconds(10))
        #expect(ManifestMetadata.seconds(fromWire: 0, nanos: -3) == .zero)
    }
}

/// Durations from the manifest are bounded before any deadline is computed from them.
struct ManifestDurationBoundTests {
    @Test func hugeDurationsAreClamped() {
        #expect(ManifestMetadata.seconds(fromWire: .max, nanos: .max) == .seconds(ManifestMetadata.maxSeconds) + .nanoseconds(Int64(Int32.max)))
        var manifest = Coder_Agent_V2_Manifest()
        var script = Coder_Agent_V2_WorkspaceAgentScript()
        script.logSourceID = Data([UInt8](repeating: 1, count: 16))
        script.timeout = Google_Protobuf_Duration(seconds: .max, nanos: 0)
        manifest.scripts = [script]
        var app = Coder_Agent_V2_WorkspaceApp()
        app.healthcheck.interval = Google_Protobuf_Duration(seconds: .max, nanos: 0)
        manifest.apps = [app]
        let converted = ControlPlaneSession.agentManifest(from: manifest)
        #expect(converted.scripts.first?.timeout == .seconds(ManifestMetadata.maxSeconds))
        #expect(converted.apps.first?.healthcheckInterval == .seconds(ManifestMetadata.maxSeconds))
        // A deadline that far off is representable.
        _ = ContinuousClock.now + .seconds(ManifestMetadata.maxSeconds) * 2
    }
}
