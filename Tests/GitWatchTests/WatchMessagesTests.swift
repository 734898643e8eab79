import Foundation
import Testing

@testable import GitWatch

/// A scan's `changes` fit coderd's 4 MiB read limit: the repositories are spread over as
/// many frames as it takes, in order, each a whole message (one frame of three repositories
/// with 2 MiB diffs was 6 MiB, and coderd's relay ended with 1009 on every reconnect).
struct WatchMessagesTests {
    private func entry(_ root: String, diffBytes: Int) -> RepositoryEntry {
        var entry = RepositoryEntry(removed: root)
        entry.removed = nil
        entry.branch = "main"
        entry.unifiedDiff = String(repeating: "+", count: diffBytes)
        return entry
    }

    private func encode(_ value: any Encodable) throws -> [UInt8] { [UInt8](try JSONEncoder().encode(value)) }

    @Test func largeScansAreSplitUnderTheLimitInOrder() throws {
        let big = (0..<3).map { entry("/repo\($0)", diffBytes: 2 << 20) }
        let frames = try ChangesMessage.frames(scannedAt: "2026-11-27T12:00:00Z", changed: big, encode: encode)
        #expect(frames.count == 3)
        var roots: [String] = []
        for frame in frames {
            #expect(frame.count <= ChangesMessage.maxFrameBytes)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(frame)) as? [String: Any])
            #expect(object["type"] as? String == "changes" && object["scanned_at"] as? String == "2026-11-27T12:00:00Z")
            let repositories = try #require(object["repositories"] as? [[String: Any]])
            roots += repositories.compactMap { $0["repo_root"] as? String }
        }
        #expect(roots == ["/repo0", "/repo1", "/repo2"])

        let small =
            (0..<5).map { entry("/small\($0)", diffBytes: 100) } + [entry("/big", diffBytes: 5 << 19), entry("/big2", diffBytes: 5 << 19)]
            + [entry("/after", diffBytes: 10)]
        let packed = try ChangesMessage.frames(scannedAt: "t", changed: small, encode: encode)
        #expect(packed.count == 2, "the small ones share a big one's frame, the last one the other's")
        #expect(packed.allSatisfy { $0.count <= ChangesMessage.maxFrameBytes })
    }

    @Test func aSmallScanOrAHeartbeatIsOneFrame() throws {
        let one = try ChangesMessage.frames(scannedAt: "t", changed: [entry("/r", diffBytes: 10)], encode: encode)
        #expect(one.count == 1)
        let heartbeat = try ChangesMessage.frames(scannedAt: "t", changed: [], encode: encode)
        #expect(heartbeat.count == 1 && !String(decoding: heartbeat[0], as: UTF8.self).contains("repositories"))
    }
}
