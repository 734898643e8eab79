import AgentCore
import Foundation
import Logging
import Testing

@testable import AgentProc

/// The records log's changes that come from the reactor thread (exits, and the forgetting
/// that retention does after one) only ever append: a compaction, or the rewrite a broken
/// log needs, waits for the next start, off the reactor (a whole-file rewrite of up to
/// 96 MiB held every process's output and exits).
struct ProcessLogTests {
    private static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    private static func record(_ id: String) throws -> ProcessRecord {
        let options = String(decoding: try JSONEncoder().encode(StartOptions()), as: UTF8.self)
        let json = #"{"version":1,"id":"\#(id)","command":"true","workdir":"","background":false,"started_at_unix":1,"options":\#(options)}"#
        return try JSONDecoder().decode(ProcessRecord.self, from: Data(json.utf8))
    }

    private static func lines(_ path: String) -> Int {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    @Test func exitsAndForgetsAppendAndTheNextStartCompacts() throws {
        let directory = NSTemporaryDirectory() + "process-log-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/" + ProcessLog.fileName
        let log = ProcessLog(directory: directory, failures: DurableFailures(logger: Self.quiet))
        for index in 0..<1100 { log.started(try Self.record("p\(index)")) }
        for index in 0..<1100 {
            log.exited("p\(index)", ProcessRecord.Exit(code: 0, signal: nil, exitedAtUnix: 2))
            log.forgot("p\(index)")
        }
        #expect(Self.lines(path) == 3300, "every exit and forget appended, past the compaction point")
        log.started(try Self.record("next"))
        #expect(Self.lines(path) == 1, "the next start compacted the log to its one live process")
        let restored = ProcessLog(directory: directory, failures: DurableFailures(logger: Self.quiet)).restored
        #expect(restored.map(\.id) == ["next"])
    }
    /// A file of many more records than the manager keeps (a hostile state directory, or a
    /// very long-lived one) is read down to the newest exits, and commands are cut as a
    /// record keeps them: restore had built a process for every one of them first.
    @Test func aFileOfManyRecordsIsReadDownToWhatIsKept() throws {
        let directory = NSTemporaryDirectory() + "process-log-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            let log = ProcessLog(directory: directory, failures: DurableFailures(logger: Self.quiet), keeping: 5000)
            for index in 0..<3000 {
                var record = try Self.record("p\(index)")
                if index == 2999 { record.command = String(repeating: "c", count: ProcessLog.maxCommandBytes * 2) }
                log.started(record)
                log.exited("p\(index)", ProcessRecord.Exit(code: 0, signal: nil, exitedAtUnix: Int64(index)))
            }
        }
        let restored = ProcessLog(directory: directory, failures: DurableFailures(logger: Self.quiet), keeping: 256).restored
        #expect(restored.count == 256)
        #expect(Set(restored.map(\.id)) == Set((2744..<3000).map { "p\($0)" }), "the newest exits")
        #expect(restored.allSatisfy { $0.command.utf8.count <= ProcessLog.maxCommandBytes })
    }
}
