import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import SwiftProtobuf
import Testing

/// The agent binary with a manifest's scripts, against the control-plane double.
struct ScriptsHarness {
    /// A script of the manifest: its ids are fresh UUIDs.
    static func script(
        _ body: String, onStart: Bool = true, onStop: Bool = false, cron: String = "", timeout: Int64 = 0, logPath: String = ""
    ) -> Coder_Agent_V2_WorkspaceAgentScript {
        var script = Coder_Agent_V2_WorkspaceAgentScript()
        script.id = uuidBytes()
        script.logSourceID = uuidBytes()
        script.script = body
        script.runOnStart = onStart
        script.runOnStop = onStop
        script.cron = cron
        script.logPath = logPath
        if timeout > 0 { script.timeout = Google_Protobuf_Duration(seconds: timeout) }
        return script
    }

    static func uuidBytes() -> Data {
        withUnsafeBytes(of: UUID().uuid) { Data($0) }
    }

    /// A fresh directory under the temporary directory.
    static func directory(_ name: String) throws -> String {
        let path = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func tokenFile(_ double: ControlPlaneDouble) throws -> String {
        let path = NSTemporaryDirectory() + "agent-token-\(UUID().uuidString)"
        try TestFile.write(path, (double.token + "\n"), atomically: true)
        return path
    }

    /// The lines the double received for `source`, in arrival order.
    static func lines(_ double: ControlPlaneDouble, source: Data) -> [Coder_Agent_V2_Log] {
        double.recorded.withLock { r in r.logBatches.filter { $0.logSourceID == source }.flatMap(\.logs) }
    }

    static func outputs(_ double: ControlPlaneDouble, source: Data) -> [String] {
        lines(double, source: source).map(\.output)
    }

    static func timings(_ double: ControlPlaneDouble, script: Data) -> [Coder_Agent_V2_Timing] {
        double.recorded.withLock { r in r.scriptTimings.filter { $0.scriptID == script } }
    }

    static func lifecycle(_ double: ControlPlaneDouble) -> [Coder_Agent_V2_Lifecycle.State] {
        double.recorded.withLock { $0.lifecycle }
    }
}
