import AgentCore
@testable import AgentProc
import AgentTestSupport
import Foundation
import Logging
import Testing

/// What the agent finds at `<state-dir>/processes/spool`: not a directory (it runs on
/// without spooling, says so, and leaves the thing alone), or stray entries in it (removed
/// at start, never followed, nothing outside touched).
@Suite(.timeLimit(.minutes(3)))
struct SpoolDirectoryTests {
    static let base = "/api/v0/processes"

    static func status(_ h: Harness) async throws -> [String: Any] {
        let response = try await h.client.request("GET", "\(base)/status")
        try #require(response.status == 200, "\(response)")
        return try #require(jsonObject(response.body))
    }

    /// Starts a command and checks it runs; an offset read is 409 without a spool.
    static func runsWithoutSpool(_ h: Harness) async throws {
        let id = try await h.start("echo still runs")
        let out = try await h.finalOutput(id)
        #expect(out["output"] as? String == "still runs\n")
        let cursor = try await h.client.request("GET", "\(base)/\(id)/output?offset=0")
        #expect(cursor.status == 409, "\(cursor)")
    }

    @Test(arguments: ["file", "symlink"])
    func aNonDirectoryAtTheSpoolPathDisablesSpoolingAndIsLeftAlone(_ kind: String) async throws {
        let state = try makeTempDirectory()
        let outside = try makeTempDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: state)
            try? FileManager.default.removeItem(atPath: outside)
        }
        try FileManager.default.createDirectory(atPath: state + "/processes", withIntermediateDirectories: true)
        let spool = state + "/processes/spool"
        try TestFile.write(outside + "/precious", "keep me".utf8)
        if kind == "file" {
            try TestFile.write(spool, "not a directory".utf8)
        } else {
            try FileManager.default.createSymbolicLink(atPath: spool, withDestinationPath: outside)
        }
        let log = CapturedLog()
        try await withProcessServer(configure: { $0.stateDirectory = state }, logger: log.logger) { h in
            try await Self.runsWithoutSpool(h)
            let status = try await Self.status(h)
            let spoolStatus = try #require(status["spool"] as? [String: Any])
            #expect(spoolStatus["enabled"] as? Bool == false, "\(status)")
            #expect((spoolStatus["reason"] as? String)?.contains("not a directory") == true, "\(status)")
            #expect(log.all.contains { $0.level >= .warning && $0.message.contains("spool") }, "\(log.all.map(\.message))")
        }
        // Nothing of it was touched: the file, or the link and what it points at.
        if kind == "file" {
            #expect((try? String(contentsOfFile: spool, encoding: .utf8)) == "not a directory")
        } else {
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: spool)) == outside)
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["precious"])
        }
    }

    @Test func strayEntriesInTheSpoolAreRemovedWithoutFollowingLinks() async throws {
        let state = try makeTempDirectory()
        let outside = try makeTempDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: state)
            try? FileManager.default.removeItem(atPath: outside)
        }
        let spool = state + "/processes/spool"
        try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside + "/dir", withIntermediateDirectories: true)
        try TestFile.write(outside + "/dir/0000000000000000", "outside".utf8)
        try TestFile.write(outside + "/file", "outside".utf8)
        // A link named like a spool, to a directory holding a segment-named file.
        let uuid = UUID().uuidString.lowercased()
        try FileManager.default.createSymbolicLink(atPath: spool + "/" + uuid, withDestinationPath: outside + "/dir")
        try FileManager.default.createSymbolicLink(atPath: spool + "/link", withDestinationPath: outside + "/file")
        try FileManager.default.createSymbolicLink(atPath: spool + "/dangling", withDestinationPath: outside + "/missing")
        try TestFile.write(spool + "/not-a-spool.txt", "stray".utf8)
        try FileManager.default.createDirectory(atPath: spool + "/Empty Dir", withIntermediateDirectories: false)
        // A directory with something the agent did not make: left, with its content.
        try FileManager.default.createDirectory(atPath: spool + "/keep", withIntermediateDirectories: false)
        try TestFile.write(spool + "/keep/notes", "user".utf8)
        try await withProcessServer(configure: { $0.stateDirectory = state }) { h in
            let id = try await h.start("echo spooled")
            _ = try await h.finalOutput(id)
            let left = try FileManager.default.contentsOfDirectory(atPath: spool).sorted()
            #expect(left == [id, "keep"].sorted(), "\(left)")
        }
        #expect(try String(contentsOfFile: outside + "/dir/0000000000000000", encoding: .utf8) == "outside")
        #expect(try String(contentsOfFile: outside + "/file", encoding: .utf8) == "outside")
        #expect(try String(contentsOfFile: spool + "/keep/notes", encoding: .utf8) == "user")
    }
}
