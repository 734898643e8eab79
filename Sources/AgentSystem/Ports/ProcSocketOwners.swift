#if canImport(Glibc)
import Glibc
#endif

/// Which processes hold the workspace's TCP sockets, read from `/proc`: the socket tables
/// (``ProcNetTCP``), then each process's descriptors (`/proc/<pid>/fd`, links
/// `socket:[inode]`), then what the owner runs (`stat`'s command name, `cmdline`). The
/// listening-ports route and the SSH server's JetBrains count share it.
///
/// Bounds: each table is read up to ``maxTableBytes`` (cut to whole rows); a search for
/// owners looks at most at ``maxProcesses`` processes and ``maxDescriptors`` descriptors and
/// stops once every socket is placed; a command line is read up to ``maxCommandLineBytes``.
/// Blocking file I/O: callers run it off their event loops.
public struct ProcSocketOwners: Sendable {
    /// About 100 000 sockets' rows.
    public static let maxTableBytes = 16 << 20
    public static let maxProcesses = 16_384
    public static let maxDescriptors = 262_144
    /// A JVM's command line holds its whole class path: far more than a page.
    public static let maxCommandLineBytes = 1 << 20

    /// Where `net/tcp`, `net/tcp6` and the processes are (a test may point elsewhere).
    public let procRoot: String

    public init(procRoot: String = "/proc") {
        self.procRoot = procRoot
    }

    /// The IPv4 and IPv6 tables' text, each nil when it cannot be read.
    public func tables() -> (v4: [UInt8]?, v6: [UInt8]?) {
        (
            Self.wholeRows(Self.readProcFile(procRoot + "/net/tcp", maxBytes: Self.maxTableBytes)),
            Self.wholeRows(Self.readProcFile(procRoot + "/net/tcp6", maxBytes: Self.maxTableBytes))
        )
    }

    /// A table cut at the bound may end in half a row, which could read as another inode.
    static func wholeRows(_ table: [UInt8]?) -> [UInt8]? {
        guard let table else { return nil }
        guard table.count >= maxTableBytes, let end = table.lastIndex(of: UInt8(ascii: "\n")) else { return table }
        return Array(table[...end])
    }

    /// The process holding each of `inodes`, found through `/proc/*/fd` (the first process
    /// seen with it; a socket shared after a fork has several).
    public func owners(ofInodes inodes: Set<UInt64>) -> [UInt64: Int32] {
        var owners: [UInt64: Int32] = [:]
        guard !inodes.isEmpty, let proc = opendir(procRoot) else { return owners }
        defer { closedir(proc) }
        var processes = 0
        var descriptors = 0
        while owners.count < inodes.count, processes < Self.maxProcesses, descriptors < Self.maxDescriptors,
            let entry = readdir(proc)
        {
            let name = Self.name(of: entry)
            guard let first = name.utf8.first, first >= UInt8(ascii: "1"), first <= UInt8(ascii: "9"), let pid = Int32(name) else { continue }
            processes += 1
            let fdDirectory = procRoot + "/" + name + "/fd"
            guard let fds = opendir(fdDirectory) else { continue }
            while descriptors < Self.maxDescriptors, let fd = readdir(fds) {
                let fdName = Self.name(of: fd)
                guard fdName.first != "." else { continue }
                descriptors += 1
                guard let inode = Self.socketInode(fdDirectory + "/" + fdName), inodes.contains(inode), owners[inode] == nil else { continue }
                owners[inode] = pid
            }
            closedir(fds)
        }
        return owners
    }

    /// The command name in parentheses in `/proc/<pid>/stat` (up to the last `)`: a name may
    /// itself hold parentheses or spaces).
    public func command(pid: Int32) -> String? {
        guard let bytes = Self.readProcFile(procRoot + "/\(pid)/stat", maxBytes: 4096),
            let open = bytes.firstIndex(of: UInt8(ascii: "(")),
            let close = bytes.lastIndex(of: UInt8(ascii: ")")), open < close
        else { return nil }
        return String(decoding: bytes[(open + 1)..<close], as: UTF8.self)
    }

    /// `/proc/<pid>/cmdline`: the arguments, each ending in a NUL.
    public func commandLine(pid: Int32) -> [UInt8]? {
        Self.readProcFile(procRoot + "/\(pid)/cmdline", maxBytes: Self.maxCommandLineBytes)
    }

    /// The command line of the process holding a TCP socket whose local port is `port`, in
    /// any state: the IPv4 table first, then IPv6; in each a LISTEN row before others, and
    /// only rows a process holds (a TIME_WAIT row's inode is 0). Nil when none is found.
    public func commandLine(ofLocalPort port: UInt16) -> [UInt8]? {
        let (v4, v6) = tables()
        var candidates: [UInt64] = []
        for table in [v4, v6] {
            let rows = ProcNetTCP.sockets(table ?? []).filter { $0.port == port && $0.inode != 0 }
            candidates += rows.filter { $0.state == ProcNetTCP.listenState }.map(\.inode)
            candidates += rows.filter { $0.state != ProcNetTCP.listenState }.map(\.inode)
        }
        guard !candidates.isEmpty else { return nil }
        let owners = owners(ofInodes: Set(candidates))
        guard let pid = candidates.lazy.compactMap({ owners[$0] }).first else { return nil }
        return commandLine(pid: pid)
    }

    /// The inode of a descriptor that is a socket (`socket:[12345]` → 12345).
    static func socketInode(_ path: String) -> UInt64? {
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { readlink(path, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        guard count > 9, count < buffer.count else { return nil }
        return socketInode(link: buffer[0..<count])
    }

    /// `socket:[12345]` → 12345.
    public static func socketInode(link: some BidirectionalCollection<UInt8>) -> UInt64? {
        let prefix = Array("socket:[".utf8)
        guard link.starts(with: prefix), link.last == UInt8(ascii: "]") else { return nil }
        return ProcNetTCP.decimal(link.dropFirst(prefix.count).dropLast())
    }

    static func name(of entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }

    /// A `/proc` file read to its end (their sizes read as 0), at most `maxBytes`; nil when it
    /// cannot be opened.
    public static func readProcFile(_ path: String, maxBytes: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while bytes.count < maxBytes {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, min($0.count, maxBytes - bytes.count)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }
}
