import AgentCore
import AgentTestSupport
import Foundation
import Logging
import Testing

@testable import AgentProc

/// A horizon read from the claims file past now (any number may be on disk) is brought back
/// to now: it had refused every start with tool-call headers, for good (each rewrite saved it).
struct ToolCallHorizonTests {
    @Test func aHorizonFromTheFutureIsBroughtBackToNow() async throws {
        let directory = NSTemporaryDirectory() + "horizon-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try TestFile.write(directory + "/" + ToolCallStarts.fileName, Array(#"{"t":"horizon","at":9223372036854775807}"#.utf8) + [0x0a])
        let starts = ToolCallStarts(
            directory: directory, failures: DurableFailures(logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
        let key = ToolCallKey(chat: "3f2e1d0c-9b8a-4765-8432-10fedcba9876", messageID: 1, callID: "call")
        let claim = await starts.claim(key, digest: "d", ageMs: 0, newID: "p1") { pass in pass() }
        guard case .run(let id) = claim else {
            Issue.record("\(claim)")
            return
        }
        #expect(id == "p1")
    }
}
