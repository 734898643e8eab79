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
/// Bounds: those of AgentSystem's ``ProcSocketOwners`` (tables of 16 MiB, the owners'
/// search over at most 16 384 processes and 262 144 descriptors, stopping once every socket
/// is placed).
public struct ListeningPortScanner: Sendable {
    /// Ports below this are the agent's own tunnel services (the reference's rule).
    public static let minimumPort: UInt16 = 9

    /// Where `net/tcp`, `net/tcp6` and the processes are (a test may point elsewhere).
    let proc: ProcSocketOwners
    /// Ports never listed (the agent's own listeners: metrics, debug), read at each scan.
    let ignored: OwnListenerPorts

    public init(procRoot: String = "/proc", ignored: OwnListenerPorts = OwnListenerPorts()) {
        self.proc = ProcSocketOwners(procRoot: procRoot)
        self.ignored = ignored
    }

    public init(procRoot: String = "/proc", ignored: Set<UInt16>) {
        self.init(procRoot: procRoot, ignored: OwnListenerPorts(ignored))
    }

    public struct ScanError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The listening ports, sorted by port. Throws when neither table can be read.
    public func scan() throws(ScanError) -> [ListeningPort] {
        let (v4, v6) = proc.tables()
        guard v4 != nil || v6 != nil else {
            throw ScanError(description: "open \(proc.procRoot)/net/tcp: \(String(cString: strerror(errno)))")
        }
        let ignored = ignored.all
        var byPort: [UInt16: UInt64] = [:]
        var order: [UInt16] = []
        for listener in ProcNetTCP.listeners(v4 ?? []) + ProcNetTCP.listeners(v6 ?? [])
        where listener.port >= Self.minimumPort && !ignored.contains(listener.port) && byPort[listener.port] == nil {
            byPort[listener.port] = listener.inode
            order.append(listener.port)
        }
        let names = processNames(forInodes: Set(byPort.values))
        return order.sorted().map { port in ListeningPort(processName: names[byPort[port]!] ?? "", port: port) }
    }

    /// The `comm` of the process holding each socket inode.
    func processNames(forInodes inodes: Set<UInt64>) -> [UInt64: String] {
        var commands: [Int32: String] = [:]
        return proc.owners(ofInodes: inodes).mapValues { pid in
            if let known = commands[pid] { return known }
            let command = proc.command(pid: pid) ?? ""
            commands[pid] = command
            return command
        }
    }
}
