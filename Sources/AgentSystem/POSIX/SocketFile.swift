import AgentJSON
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// A unix socket's path on disk, for every unix socket the agent listens on (the agent
/// socket, the boundary audit-log socket, an HTTP listener at `unix:/path`): one lifecycle.
///
/// - **Restrictive from the start.** Binding at the final path and chmod-ing afterwards
///   leaves a window where the umask's mode applies. Here the socket is bound inside a fresh
///   private directory (0700) next to the final path, given its mode there, and renamed
///   into place, which is atomic: at the final path it never has another mode.
/// - **Stale entries.** A live socket at the path (a connect succeeds) is never taken over.
///   A stale one (nobody listens) is replaced; with ``StalePolicy/anyEntry`` so is any other
///   kind of file (as the agent socket's reference does), with ``StalePolicy/socketOnly`` a
///   non-socket stops the creation.
/// - **Removal of our own only.** At shutdown the path is removed only if it is still the
///   socket this process made (same device and inode): another process may have replaced it.
public struct SocketFile: Sendable {
    /// What a stale entry at the final path may be, to be replaced.
    public enum StalePolicy: Sendable {
        /// Any entry nobody listens on (a socket, a file, an empty directory).
        case anyEntry
        /// Only a socket nobody listens on; anything else is left alone (creation fails).
        case socketOnly
    }

    /// The final path.
    public let path: String
    /// The socket's mode, set before it appears at ``path``.
    public let mode: mode_t
    public let stalePolicy: StalePolicy

    public init(path: String, mode: mode_t = 0o600, stalePolicy: StalePolicy = .anyEntry) {
        self.path = path
        self.mode = mode
        self.stalePolicy = stalePolicy
    }

    /// The socket's identity once in place, to recognise it at removal time.
    public struct Identity: Sendable, Equatable {
        public var device: UInt64
        public var inode: UInt64
    }

    /// Why the socket could not be made (one line, as the reference's `create socket: ...`).
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Where the socket is bound before it is moved into place.
    public struct Staging: Sendable {
        /// The private directory (0700).
        public var directory: String
        /// The socket's path inside it: bind here.
        public var socket: String
    }

    public static let maxPathBytes = UnixSocket.maxPathBytes

    /// Makes the socket: a private staging directory, `bind(stagedPath)` there, then
    /// ``install(staged:)``. What `bind` returned is closed with `close` if installing fails.
    public func create<Listener>(
        bind: (String) async throws -> Listener, close: (Listener) async -> Void
    ) async throws(Failure) -> (Listener, Identity) {
        let staged = try makeStaging()
        let listener: Listener
        do {
            listener = try await bind(staged.socket)
        } catch {
            unlink(staged.socket)
            rmdir(staged.directory)
            throw Failure(description: "create socket: listen: \(error)")
        }
        do {
            return (listener, try install(staged: staged))
        } catch {
            await close(listener)
            throw error
        }
    }

    /// A private directory next to the final path for the bind; its socket path. Fails
    /// early when the final path is not available (a live socket, or a non-socket under
    /// ``StalePolicy/socketOnly``).
    public func makeStaging() throws(Failure) -> Staging {
        guard path.utf8.count <= Self.maxPathBytes else {
            throw Failure(description: "create socket: socket path \(goQuote(path)) is longer than \(Self.maxPathBytes) bytes")
        }
        try checkAvailable()
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
        return Staging(directory: directory, socket: socket)
    }

    /// Whether something listens at `path`: a connect succeeds, or finds the listener's
    /// backlog full (it is there, just not accepting: never taken for stale). The connect
    /// does not block: a full backlog answers at once, so a probe never holds its caller
    /// (an SSH connection's event loop for `streamlocal-forward`).
    public static func isLive(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard let result = UnixSocket.withAddress(path, { Glibc.connect(fd, $0, $1) }) else { return false }
        return result == 0 || errno == EAGAIN || errno == EINPROGRESS
    }

    /// Throws when the final path holds something that must not be replaced.
    private func checkAvailable() throws(Failure) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if stalePolicy == .socketOnly, (info.st_mode & S_IFMT) != S_IFSOCK {
            throw Failure(description: "create socket: socket path \(path) is not a socket")
        }
        if (info.st_mode & S_IFMT) == S_IFSOCK, Self.isLive(path) {
            throw Failure(description: "create socket: socket path \(path) is not available")
        }
    }

    /// Moves the staged socket to the final path with its mode: refuses if a live socket (or,
    /// under ``StalePolicy/socketOnly``, a non-socket) is there, replaces a stale entry,
    /// removes the staging directory, and returns the socket's identity.
    public func install(staged: Staging) throws(Failure) -> Identity {
        defer { rmdir(staged.directory) }
        guard chmod(staged.socket, mode) == 0 else {
            unlink(staged.socket)
            throw Failure(description: "create socket: set socket permissions: \(SystemCallError(call: "chmod", errno: errno))")
        }
        do {
            try checkAvailable()
        } catch {
            unlink(staged.socket)
            throw error
        }
        var info = stat()
        if lstat(path, &info) == 0 {
            // Stale: a socket nobody listens on, or (``StalePolicy/anyEntry``) any other
            // file, an empty directory too.
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

    public static func identity(of path: String) -> Identity? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Removes the path only if it is still the socket identified by `identity` (another
    /// process may have replaced it meanwhile). Returns whether it removed it.
    @discardableResult
    public func remove(ifStill identity: Identity) -> Bool {
        guard Self.identity(of: path) == identity else { return false }
        return unlink(path) == 0
    }
}
