import AgentHost
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Releasing start-up pages in a running process (this test process, other tests running
/// beside it) drops only clean file pages: what a mapping's pages were changed to stays.
@Suite struct StartupPagesTests {
    @Test func aReleaseKeepsEveryWrittenPageAndCodeRunsOn() throws {
        // A private mapping of a file named like a shared library, written, then made
        // read-only: the shape of a loaded object's relocated data.
        let path = NSTemporaryDirectory() + "startup-pages-\(getpid()).so"
        let size = 64 * 1024
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x11, count: size)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let mapped = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))
        try #require(mapped != MAP_FAILED)
        defer { munmap(mapped, size) }
        let bytes = mapped.assumingMemoryBound(to: UInt8.self)
        // One page written (anonymous now), the rest only read (clean file pages).
        for index in 0..<4096 { bytes[index] = 0x5A }
        var sum = 0
        for index in stride(from: 4096, to: size, by: 4096) { sum += Int(bytes[index]) }
        #expect(sum == 15 * 0x11)
        #expect(mprotect(mapped, size, PROT_READ) == 0)

        let advised = StartupPages.releaseNow()
        #expect(advised > 0, "the process's own text and libraries are released")

        #expect((0..<4096).allSatisfy { bytes[$0] == 0x5A }, "the written page is kept")
        #expect(stride(from: 4096, to: size, by: 4096).allSatisfy { bytes[$0] == 0x11 })
        // Code whose pages were dropped runs on (each first touch a fault, nothing else).
        let text = String(describing: Date(timeIntervalSince1970: 0))
        #expect(text.hasPrefix("1970-01-01"))
        #expect(try JSONSerialization.jsonObject(with: Data(#"{"a":[1,2]}"#.utf8)) is [String: Any])
    }
}
