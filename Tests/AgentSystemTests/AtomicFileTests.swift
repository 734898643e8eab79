import AgentSystem
import Foundation
import Testing

/// ``AtomicFile/read(_:maxBytes:)`` never blocks: a FIFO (at `~/.Xauthority`, or the
/// MOTD's path, read on an event loop) is "not a regular file" at once, with or without a
/// writer; a regular file reads whole.
struct AtomicFileTests {
    @Test func aFIFOIsRefusedWithoutBlocking() throws {
        let directory = NSTemporaryDirectory() + "atomic-file-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(AtomicFile.read(fifo, maxBytes: 1 << 20) == nil)
        let plain = directory + "/plain"
        #expect(FileManager.default.createFile(atPath: plain, contents: Data("kept".utf8)))
        #expect(AtomicFile.read(plain, maxBytes: 1 << 20) == Array("kept".utf8))
    }
}
