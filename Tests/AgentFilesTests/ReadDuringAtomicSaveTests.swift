import AgentCore
import AgentTestSupport
import Foundation
import Hummingbird
import Synchronization
import Testing

@testable import AgentFiles

#if canImport(Glibc)
import Glibc
#endif

/// read-file while an editor saves the file the way editors do: write a temporary file
/// beside it, then rename it over the target.
@Suite(.timeLimit(.minutes(3)))
struct ReadDuringAtomicSaveTests {
    /// Versions of distinct sizes and bytes; two are larger than one streamed chunk
    /// (128 KiB), so a body takes several reads.
    static let versions: [[UInt8]] = [
        Array(repeating: UInt8(ascii: "a"), count: 1_000),
        (0..<60_000).map { UInt8(truncatingIfNeeded: $0 &* 7) },
        Array(repeating: UInt8(ascii: "c"), count: 300_001),
        (0..<700_003).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) },
    ]

    /// Every read gets an answer, and every 200 carries a body whose length and SHA-256 are
    /// those of its own headers and which is one whole version: the body comes from the
    /// descriptor the head measured and hashed, never from a second open of the path.
    @Test(.ownThreads) func readsRacingRenamesGetConsistentAnswers() async throws {
        try await withFilesServer { h in
            let path = h.file("saved.txt")
            let temporary = h.file(".saved.txt.tmp")
            try TestFile.write(path, Self.versions[0])
            let hashes = Set(Self.versions.map { SHA256.hex($0) })

            let stop = Atomic<Bool>(false)
            let saves = Atomic<Int>(0)
            let writerDone = DispatchSemaphore(value: 0)
            // The writer: write-temp-then-rename of the versions in turn, until the reads end
            // (bounded in count as well).
            let writer = Thread {
                defer { writerDone.signal() }
                var index = 0
                while !stop.load(ordering: .relaxed), index < 2_000_000 {
                    index += 1
                    let version = Self.versions[index % Self.versions.count]
                    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                    guard fd >= 0 else { continue }
                    let written = version.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    close(fd)
                    guard written == version.count, rename(temporary, path) == 0 else { continue }
                    saves.add(1, ordering: .relaxed)
                }
            }
            writer.start()
            defer {
                stop.store(true, ordering: .relaxed)
                writerDone.wait()
            }

            let rounds = 40
            let concurrent = 6
            var answered = 0
            var failures: [String] = []
            for _ in 0..<rounds {
                let results = try await withThrowingTaskGroup(of: String?.self) { group in
                    for _ in 0..<concurrent {
                        group.addTask {
                            let response: RawHTTPClient.Response
                            do { response = try await h.get("read-file?path=\(FilesHarness.q(path))") } catch {
                                return "no answer: \(error)"
                            }
                            guard response.status == 200 else { return "status \(response.status): \(response.bodyText)" }
                            let length = response.header("Content-Length").flatMap(Int.init)
                            guard length == response.body.count else {
                                return "Content-Length \(length.map(String.init) ?? "nil") over \(response.body.count) bytes"
                            }
                            let digest = SHA256.hex(response.body)
                            guard response.header("Coder-File-Sha256") == digest else {
                                return "Coder-File-Sha256 \(response.header("Coder-File-Sha256") ?? "nil") over bytes hashing \(digest)"
                            }
                            guard hashes.contains(digest) else { return "a body that is no version (\(response.body.count) bytes)" }
                            return nil
                        }
                    }
                    var results: [String?] = []
                    for try await result in group { results.append(result) }
                    return results
                }
                answered += results.count
                failures += results.compactMap { $0 }
            }
            stop.store(true, ordering: .relaxed)
            #expect(answered == rounds * concurrent)
            #expect(failures.count == 0, "\(failures.count) of \(answered) reads: \(Array(failures.prefix(5)))")
            #expect(saves.load(ordering: .relaxed) > 0, "the writer saved while the reads ran")
        }
    }

    /// The descriptor a body streams from keeps the measured bytes when the path is renamed
    /// over; a write in place that changes the size fails the next read instead of sending
    /// other bytes under the head's length and hash.
    @Test func aSnapshotSurvivesRenamesAndDetectsWritesInPlace() throws {
        let directory = NSTemporaryDirectory() + "agent-snapshot-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/f"
        try TestFile.write(path, "first version".utf8)
        let snapshot = FileSnapshot(try RegularFile(path: path), path: path)
        try TestFile.write(directory + "/tmp", "second, longer version".utf8)
        #expect(rename(directory + "/tmp", path) == 0)
        #expect(String(buffer: try snapshot.read(snapshot.size, at: 0)) == "first version")

        let inPlace = FileSnapshot(try RegularFile(path: path), path: path)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(" and more".utf8))
        try handle.close()
        #expect(throws: FileSnapshot.Changed.self) { try inPlace.read(4, at: 0) }
    }
}
