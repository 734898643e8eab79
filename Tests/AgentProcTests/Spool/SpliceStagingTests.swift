import CAgentSpawn
import Glibc
import Testing
import AgentCore
@testable import AgentProc

/// Output moved from a pipe into a spool through the reactor's staging pipe.
@Suite struct SpliceStagingTests {
    /// A non-blocking pipe holding `bytes` (at most its 64 KiB of room).
    private func pipeHolding(_ bytes: [UInt8]) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        precondition(agent_staging_pipe(&fds, 0) == 0)  // non-blocking, the default room
        let written = bytes.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
        precondition(written == bytes.count)
        return (fds[0], fds[1])
    }

    @Test func bytesMoveInOrderAcrossSegmentsAndTheStagingPipeIsLeftEmpty() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try smallStore(in: tmp)
        let spool = try store.create(id: "abc-02")
        let nullfd = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { close(nullfd) }
        let staging = try #require(SpliceStaging(nullfd: nullfd))
        defer { staging.close() }
        // Some bytes appended the ordinary way first, so the moved ones start mid-segment.
        spool.append(patternBytes(from: 0, count: 1000))
        let source = pipeHolding(patternBytes(from: 1000, count: 50_000))
        defer { close(source.read); close(source.write) }
        // Asked for more than the pipe holds: takes what is there (crossing segments), no more.
        var moved = 0
        for _ in 0..<100 where moved < 50_000 {
            let n = spool.appendSplicing(from: source.read, count: 60_000 - moved, through: staging)
            if n == 0 { break }
            moved += n
        }
        #expect(moved == 50_000)
        #expect(spool.end == 51_000 && spool.dropped == 0)
        let back = spool.read(from: 0, limit: 60_000)
        #expect(back.bytes.count == 51_000)
        let exact = back.bytes == patternBytes(from: 0, count: 51_000)
        #expect(exact)
        #expect(agent_pipe_pending(staging.readEnd) == 0)
        // Nothing waiting: nothing moved.
        #expect(spool.appendSplicing(from: source.read, count: 10, through: staging) == 0)
    }

    @Test func bytesThatCannotReachTheFileAreDroppedNotLeftInTheStagingPipe() throws {
        let nullfd = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { close(nullfd) }
        let staging = try #require(SpliceStaging(nullfd: nullfd))
        defer { staging.close() }
        let source = pipeHolding(Array(repeating: 7, count: 20_000))
        defer { close(source.read); close(source.write) }
        // A descriptor the kernel refuses to write (opened read-only): a write error.
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let path = tmp.path + "/readonly"
        close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600))
        let readOnly = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(readOnly) }
        var unwritten = 0
        let taken = agent_pipe_splice_staged(source.read, staging.readEnd, staging.writeEnd, nullfd, readOnly, 0, 12_000, &unwritten)
        #expect(taken == 12_000 && unwritten == 12_000)
        #expect(agent_pipe_pending(staging.readEnd) == 0)
        #expect(agent_pipe_pending(source.read) == 8_000)
        // The next call, into a writable file, moves what is left to the offset asked for.
        let writable = open(path, O_WRONLY | O_CLOEXEC)
        defer { close(writable) }
        let rest = agent_pipe_splice_staged(source.read, staging.readEnd, staging.writeEnd, nullfd, writable, 100, 1 << 20, &unwritten)
        #expect(rest == 8_000 && unwritten == 0)
        #expect(Posix.lstatInfo(path)?.size == 8_100)
    }
}
