import AgentCore
import Foundation
import Testing

@testable import AgentFiles

#if canImport(Glibc)
import Glibc
#endif

/// The content hash of a file whose size comes from outside the agent.
struct ContentHashTests {
    /// A sparse file reporting a size near `Int.max` (tmpfs allows 2^63−1): the hash's read
    /// limit was `size + 16 MiB`, which trapped. Now it saturates, and a cancelled hash ends.
    @Test func aFileOfNearlyIntMaxBytesDoesNotTrap() throws {
        let path = "/dev/shm/content-hash-\(UUID().uuidString.prefix(8))"
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { unlink(path) }
        let sized = ftruncate(fd, off_t.max) == 0
        close(fd)
        guard sized else {
            print("skipped: this tmpfs does not allow a file of 2^63-1 bytes")
            return
        }
        let token = CancelToken()
        token.cancel()
        #expect(throws: (any Error).self) { try ContentHash.ofFile(path, token: token) }
    }
}
