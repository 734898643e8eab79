import AgentCore
#if canImport(Glibc)
import Glibc
#endif

/// One TCP port something in the workspace listens on, as `GET /api/v0/listening-ports`
/// lists it.
public struct ListeningPort: Sendable, Equatable, Encodable {
    public var processName: String
    public var network: String
    public var port: UInt16

    public init(processName: String, network: String = "tcp", port: UInt16) {
        self.processName = processName
        self.network = network
        self.port = port
    }

    enum CodingKeys: String, CodingKey {
        case processName = "process_name"
        case network, port
    }
}

/// Finds the workspace's listening TCP ports from `/proc`: both socket tables (IPv4 and
/// IPv6, so `[::]` and dual-stack listeners are listed too, which the reference misses),
/// each port once, with the name of the process holding the socket when it can be found.
///
/// Bounds: each table is read up to ``maxTableBytes``; the search for the sockets' owners
/// looks at most at ``maxProcesses`` processes and ``maxDescriptors`` descriptors in all,
/// and stops once every socket is placed.
public struct ListeningPortScanner: Sendable {
    /// About 100 000 sockets' rows.
    public static let maxTableBytes = 16 << 20
    public static let maxProcesses = 16_384
    public static let maxDescriptors = 262_144
    /// Ports below this are the agent's own tunnel services (the reference's rule).
    public static let minimumPort: UInt16 = 9

    /// Where `net/tcp`, `net/tcp6` and the processes are (a test may point elsewhere).
    let procRoot: String
    /// Ports never listed (the agent's own listeners: metrics, debug).
    let ignored: Set<UInt16>

    public init(procRoot: String = "/proc", ignored: Set<UInt16> = []) {
        self.procRoot = procRoot
        self.ignored = ignored
    }

    public struct ScanError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The listening ports, sorted by port. Throws when neither table can be read.
    public func scan() throws(ScanError) -> [ListeningPort] {
        let v4 = Self.readProcFile(procRoot + "/net/tcp", maxBytes: Self.maxTableBytes)
        let v6 = Self.readProcFile(procRoot + "/net/tcp6", maxBytes: Self.maxTableBytes)
        guard v4 != nil || v6 != nil else {
            throw ScanError(description: "open \(procRoot)/net/tcp: \(String(cString: strerror(errno)))")
        }
        var byPort: [UInt16: UInt64] = [:]
        // A table cut at the bound may end in half a row, which could read as another inode.
        func whole(_ table: [UInt8]?) -> [UInt8] {
            guard let table else { return [] }
            guard table.count >= Self.maxTableBytes, let end = table.lastIndex(of: UInt8(ascii: "\n")) else { return table }
            return Array(table[...end])
        }
        var order: [UInt16] = []
        for listener in ProcNetTCP.listeners(whole(v4)) + ProcNetTCP.listeners(whole(v6))
        where listener.port >= Self.minimumPort && !ignored.contains(listener.port) && byPort[listener.port] == nil {
            byPort[listener.port] = listener.inode
            order.append(listener.port)
        }
        let names = processNames(forInodes: Set(byPort.values))
        return order.sorted().map { port in ListeningPort(processName: names[byPort[port]!] ?? "", port: port) }
    }

    /// The `comm` of the process holding each socket inode, found through `/proc/*/fd`.
    func processNames(forInodes inodes: Set<UInt64>) -> [UInt64: String] {
        var names: [UInt64: String] = [:]
        guard !inodes.isEmpty, let proc = opendir(procRoot) else { return names }
        defer { closedir(proc) }
        var processes = 0
        var descriptors = 0
        while names.count < inodes.count, processes < Self.maxProcesses, descriptors < Self.maxDescriptors,
            let entry = readdir(proc)
        {
            let pid = Self.name(of: entry)
            guard let first = pid.utf8.first, first >= UInt8(ascii: "1"), first <= UInt8(ascii: "9") else { continue }
            processes += 1
            let fdDirectory = procRoot + "/" + pid + "/fd"
            guard let fds = opendir(fdDirectory) else { continue }
            var owner: String?
            while descriptors < Self.maxDescriptors, let fd = readdir(fds) {
                let name = Self.name(of: fd)
                guard name.first != "." else { continue }
                descriptors += 1
                guard let target = readSymbolicLink(fdDirectory + "/" + name),
                    let inode = Self.socketInode(target), inodes.contains(inode), names[inode] == nil
                else { continue }
                if owner == nil { owner = Self.command(procRoot + "/" + pid + "/stat") }
                names[inode] = owner ?? ""
            }
            closedir(fds)
        }
        return names
    }

    /// `socket:[12345]` → 12345.
    static func socketInode(_ link: String) -> UInt64? {
        guard link.hasPrefix("socket:["), link.hasSuffix("]") else { return nil }
        return ProcNetTCP.decimal(link.utf8.dropFirst(8).dropLast())
    }

    /// The command name in parentheses in `/proc/PID/stat` (up to the last `)`: a name may
    /// itself hold parentheses or spaces).
    static func command(_ statPath: String) -> String? {
        guard let bytes = readProcFile(statPath, maxBytes: 4096),
            let open = bytes.firstIndex(of: UInt8(ascii: "(")),
            let close = bytes.lastIndex(of: UInt8(ascii: ")")), open < close
        else { return nil }
        return String(decoding: bytes[(open + 1)..<close], as: UTF8.self)
    }

    static func name(of entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }

    /// A `/proc` file read to its end (their sizes read as 0), at most `maxBytes`; nil when it
    /// cannot be opened.
    static func readProcFile(_ path: String, maxBytes: Int) -> [UInt8]? {
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
