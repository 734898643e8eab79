import AgentSystem
import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// AgentCore's one socket-file lifecycle: restrictive mode before the socket
/// appears, stale entries replaced by policy, a live socket never taken, and removal of our
/// own socket only.
@Suite(.timeLimit(.minutes(3)))
struct SocketFileTests {
    func directory() throws -> String {
        let path = NSTemporaryDirectory() + "socket-file-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A listening socket bound at `path` (the caller closes it). Close-on-exec: a child
    /// another test spawns meanwhile must not keep it listening.
    static func listen(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let bound = UnixSocket.withAddress(path) { bind(fd, $0, $1) }
        guard bound == 0, Glibc.listen(fd, 8) == 0 else {
            close(fd)
            throw SocketFile.Failure(description: "bind \(path): errno \(errno)")
        }
        return fd
    }

    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
    }

    @Test(arguments: [0o600, 0o660] as [mode_t])
    func theSocketIsBoundPrivatelyAndAppearsWithItsMode(mode: mode_t) async throws {
        let directory = try directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/a.sock"
        let file = SocketFile(path: path, mode: mode)
        var stagedPath = ""
        var stagedDirectoryMode: mode_t?
        var modeAtFinalPathWhileBound: mode_t?
        let (fd, identity) = try await file.create(
            bind: { staged in
                let fd = try Self.listen(staged)
                // While bound, the socket sits in a private directory nobody else can enter,
                // and nothing is at the final path yet.
                stagedPath = staged
                stagedDirectoryMode = Self.mode(String(staged.dropLast(2)))
                modeAtFinalPathWhileBound = Self.mode(path)
                return fd
            }, close: { close($0) })
        defer { close(fd) }
        #expect(stagedDirectoryMode == 0o700)
        #expect(modeAtFinalPathWhileBound == nil)
        #expect(stagedPath.hasPrefix(directory + "/.as-"))
        #expect(Self.mode(path) == mode && Self.isSocket(path))
        #expect(Self.mode(String(stagedPath.dropLast(2))) == nil, "the staging directory is gone")
        #expect(SocketFile.isLive(path))
        #expect(file.remove(ifStill: identity))
        #expect(Self.mode(path) == nil)
    }

    @Test func aStaleSocketIsReplacedAndALiveOneIsNot() async throws {
        let directory = try directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/b.sock"
        try #require(makeStaleSocket(path) == 0)
        let file = SocketFile(path: path, stalePolicy: .socketOnly)
        let (fd, _) = try await file.create(bind: { try Self.listen($0) }, close: { close($0) })
        defer { close(fd) }
        #expect(SocketFile.isLive(path))
        // Now live: a second creation fails and leaves it alone.
        do {
            _ = try await SocketFile(path: path).create(bind: { try Self.listen($0) }, close: { close($0) })
            Issue.record("a live socket was taken over")
        } catch {
            #expect(error.description.contains("is not available"))
        }
        #expect(SocketFile.isLive(path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["b.sock"], "no staging left behind")
    }

    @Test func aNonSocketIsReplacedOnlyUnderTheAnyEntryPolicy() async throws {
        let directory = try directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/c.sock"
        _ = FileManager.default.createFile(atPath: path, contents: Data("keep".utf8))
        do {
            _ = try await SocketFile(path: path, stalePolicy: .socketOnly).create(bind: { try Self.listen($0) }, close: { close($0) })
            Issue.record("a regular file was replaced under socketOnly")
        } catch {
            #expect(error.description.contains("is not a socket"))
        }
        #expect(FileManager.default.contents(atPath: path) == Data("keep".utf8))
        let (fd, _) = try await SocketFile(path: path, stalePolicy: .anyEntry).create(bind: { try Self.listen($0) }, close: { close($0) })
        defer { close(fd) }
        #expect(Self.isSocket(path))
    }

    @Test func aSocketReplacedBySomeoneElseIsNotRemoved() async throws {
        let directory = try directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/d.sock"
        let file = SocketFile(path: path)
        let (fd, identity) = try await file.create(bind: { try Self.listen($0) }, close: { close($0) })
        // Replaced while ours still listens (as at run time: our listener closes just before
        // the removal, and holds its inode until then).
        unlink(path)
        let other = try Self.listen(path)
        defer { close(other) }
        close(fd)
        #expect(!file.remove(ifStill: identity))
        #expect(SocketFile.isLive(path), "the other process's socket stays")
    }

    /// A listener that never accepts, its backlog full: a connect gives up after its timeout
    /// with EAGAIN instead of waiting for ever, and the liveness check counts it as live.
    @Test func aListenerThatNeverAcceptsBoundsTheConnect() throws {
        let root = try directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let path = root + "/full.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        #expect(UnixSocket.withAddress(path) { bind(listener, $0, $1) } == 0 && Glibc.listen(listener, 0) == 0)
        // Fill the backlog with non-blocking connects until the kernel refuses one.
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<64 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            held.append(fd)
            if UnixSocket.withAddress(path, { Glibc.connect(fd, $0, $1) }) != 0 { break }
        }
        guard case .failure(let error) = UnixSocket.connect(path, timeout: .milliseconds(100)) else {
            Issue.record("connected to a listener whose backlog is full")
            return
        }
        #expect(error.errno == EAGAIN, "\(error)")
        #expect(SocketFile.isLive(path), "a listener that is there but busy is not stale")
    }
}
