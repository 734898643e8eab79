import AgentCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The agent socket's path on disk: made so that it is never reachable with a wider mode
/// than 0600, and removed at shutdown only if it is still the socket the agent made.
///
/// The reference binds at the final path and chmods afterwards (a window where the umask's
/// mode applies). Here the socket is bound inside a fresh private directory (0700) next to
/// the final path, set to 0600, and renamed into place, which is atomic.
struct SocketFile: Sendable {
    /// The final path.
    let path: String

    /// The socket's identity once in place, to recognise it at removal time.
    struct Identity: Sendable, Equatable {
        var device: UInt64
        var inode: UInt64
    }

    /// Why the socket could not be made (one line, as the reference's `create socket: ...`).
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static let maxPathBytes = UnixSocket.maxPathBytes

    /// A private directory next to the final path for the bind; its socket path.
    func makeStaging() throws(Failure) -> (directory: String, socket: String) {
        guard path.utf8.count <= Self.maxPathBytes else {
            throw Failure(description: "create socket: socket path \(goQuote(path)) is longer than \(Self.maxPathBytes) bytes")
        }
        let parent = parentDirectory(of: path)
        do {
            try FileManager.default.createDirectory(
                atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Failure(description: "create socket: create parent directory \(goQuote(parent)): \(errorText(error))")
        }
        // Short, so that a final path near the limit still fits while staged.
        var template = Array((parent + "/.as-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else {
            throw Failure(description: "create socket: \(SystemCallError(call: "mkdtemp", errno: errno))")
        }
        let directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let socket = directory + "/s"
        guard socket.utf8.count <= Self.maxPathBytes else {
            rmdir(directory)
            throw Failure(description: "create socket: socket path \(goQuote(path)) is too long to stage next to it")
        }
        return (directory, socket)
    }

    /// Whether something listens at `path` (a connect succeeds).
    static func isLive(_ path: String) -> Bool {
        guard case .success(let fd) = UnixSocket.connect(path) else { return false }
        close(fd)
        return true
    }

    /// Moves the staged socket (already 0600) to the final path: refuses if a live socket is
    /// there, replaces a stale entry of any kind (as the reference), removes the staging
    /// directory, and returns the socket's identity.
    func install(staged: (directory: String, socket: String)) throws(Failure) -> Identity {
        defer { rmdir(staged.directory) }
        guard chmod(staged.socket, 0o600) == 0 else {
            unlink(staged.socket)
            throw Failure(description: "create socket: set socket permissions: \(SystemCallError(call: "chmod", errno: errno))")
        }
        var info = stat()
        if lstat(path, &info) == 0 {
            if Self.isLive(path) {
                unlink(staged.socket)
                throw Failure(description: "create socket: socket path \(path) is not available")
            }
            // Stale: a socket nobody listens on, or any other file (an empty directory too).
            if unlink(path) != 0 { rmdir(path) }
        }
        guard rename(staged.socket, path) == 0 else {
            let error = SystemCallError(call: "rename", errno: errno)
            unlink(staged.socket)
            throw Failure(description: "create socket: \(error)")
        }
        guard let identity = Self.identity(of: path) else {
            throw Failure(description: "create socket: \(path) vanished after it was made")
        }
        return identity
    }

    static func identity(of path: String) -> Identity? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Removes the path only if it is still the socket identified by `identity` (another
    /// agent may have replaced it meanwhile). Returns whether it removed it.
    @discardableResult
    func remove(ifStill identity: Identity) -> Bool {
        guard Self.identity(of: path) == identity else { return false }
        return unlink(path) == 0
    }
}
