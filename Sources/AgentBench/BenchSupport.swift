import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Timing, statistics, processes and a blocking keep-alive HTTP client for the benchmarks.
/// Everything talks to 127.0.0.1 only, and every loop is bounded.
enum Bench {
    /// The `workspace-agent` to measure: `path`, or the one next to `agent-bench`.
    static func agentBinary(_ path: String?) throws -> String {
        let binary =
            path
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("workspace-agent").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("workspace-agent not found at \(binary); build it with -c release first")
        }
        return binary
    }

    /// A blocking TCP connection to 127.0.0.1:`port`, or nil. `receiveBuffer` > 0 shrinks
    /// the kernel's receive buffer first (a client that does not read).
    static func connect(port: Int, noDelay: Bool = false, receiveBuffer: Int32 = 0) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        if noDelay {
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        if receiveBuffer > 0 {
            var size = receiveBuffer
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// `path` relative to the working directory when it is inside it (output stays portable).
    static func relative(_ path: String) -> String {
        let cwd = FileManager.default.currentDirectoryPath + "/"
        return path.hasPrefix(cwd) ? String(path.dropFirst(cwd.count)) : path
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Medians of the nanoseconds per call of `a` and of `b`, timed `count` times each,
    /// alternating over `rounds` rounds (this host's speed drifts between rounds).
    static func alternate(rounds: Int = 5, count: Int, _ a: () async -> Void, _ b: () async -> Void) async -> (Double, Double) {
        var first: [Double] = []
        var second: [Double] = []
        for _ in 0..<rounds {
            let t0 = now()
            for _ in 0..<count { await a() }
            first.append(Double(now() - t0) / Double(count))
            let t1 = now()
            for _ in 0..<count { await b() }
            second.append(Double(now() - t1) / Double(count))
        }
        return (median(first), median(second))
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    /// Spawns with raw posix_spawn (the baseline) and an explicit empty signal mask, with
    /// this process's environment or `environment` instead.
    static func spawn(_ argv: [String], stdoutPath: String? = nil, environment: [String: String]? = nil) -> pid_t {
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdoutPath {
            posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        var pid: pid_t = 0
        let args = argv.map { strdup($0) } + [nil]
        defer { for a in args { free(a) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for e in envp ?? [] { free(e) } }
        let rc = envp.map { posix_spawn(&pid, argv[0], &actions, &attr, args, $0) } ?? posix_spawn(&pid, argv[0], &actions, &attr, args, environ)
        precondition(rc == 0, "posix_spawn \(argv[0]) failed: \(rc)")
        return pid
    }

    static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }

    /// User plus system CPU time of `pid` in seconds (/proc/pid/stat fields 14 and 15).
    static func cpuSeconds(_ pid: pid_t) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident set size of `pid` in bytes, from /proc (`field` VmRSS, or RssAnon for private memory).
    static func rss(_ pid: pid_t, field: String = "VmRSS") -> Int { procKiB("/proc/\(pid)/status", field) }

    /// A field of /proc/`pid`/smaps_rollup (Pss, Rss, ...) in bytes.
    static func smapsRollup(_ pid: pid_t, field: String) -> Int { procKiB("/proc/\(pid)/smaps_rollup", field) }

    /// The `field:` line of a /proc file whose value is in kB, in bytes (0 if absent).
    private static func procKiB(_ path: String, _ field: String) -> Int {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return (Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" })[1]) ?? 0) * 1024
        }
        return 0
    }

    /// A blocking listener on 127.0.0.1 at an ephemeral port: its descriptor and port, or
    /// nil.
    static func listen(backlog: Int32 = 64) -> (fd: Int32, port: Int)? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        guard bound == 0, Glibc.listen(fd, backlog) == 0,
            withUnsafeMutablePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0
        else {
            close(fd)
            return nil
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A free loopback port (bound then released).
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    static func format(_ ns: Double) -> String {
        if ns >= 1e9 { return String(format: "%.2f s", ns / 1e9) }
        if ns >= 1e6 { return String(format: "%.2f ms", ns / 1e6) }
        return String(format: "%.1f µs", ns / 1e3)
    }

    static func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1048576) }

    /// `name` on PATH, or nil.
    static func onPath(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Sends every byte on a blocking socket; false if the peer is gone.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { sendAll(fd, $0) }
    }

    static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}

/// A blocking HTTP/1.1 keep-alive client to 127.0.0.1 (benchmarks run on their own thread).
final class BlockingHTTP {
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []
    let port: Int
    private var lastHeadBytes: [UInt8] = []
    private var scratch = [UInt8](repeating: 0, count: 65536)

    init?(port: Int) {
        self.port = port
        guard connect() else { return nil }
    }

    deinit { if fd >= 0 { close(fd) } }

    private func connect() -> Bool {
        if fd >= 0 { close(fd) }
        buffer.removeAll()
        guard let socket = Bench.connect(port: port, noDelay: true) else {
            fd = -1
            return false
        }
        fd = socket
        return true
    }

    /// Sends a request and returns (status, body); nil on a transport error. The response
    /// is parsed at the byte level: the client's own work is part of every figure it times.
    func request(_ method: String, _ path: String, body: String? = nil) -> (Int, [UInt8])? {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)" } else { text += "\r\n" }
        guard Bench.sendAll(fd, Array(text.utf8)) else { return nil }
        var head: (end: Int, length: Int)?
        for _ in 0..<100_000 {
            head = RawHTTPClient.parseHead(buffer, buffer.count)
            if head != nil { break }
            guard fill() else { return nil }
        }
        guard let head, buffer.count >= 12 else { return nil }
        let status = buffer[9..<12].reduce(0) { $0 * 10 + Int($1) - 48 }
        lastHeadBytes = Array(buffer[..<head.end])
        for _ in 0..<100_000 where buffer.count < head.end + head.length {
            guard fill() else { return nil }
        }
        let body = Array(buffer[head.end..<(head.end + head.length)])
        buffer.removeFirst(head.end + head.length)
        return (status, body)
    }

    /// The last response's status line and header fields.
    var lastHead: [String] {
        String(decoding: lastHeadBytes, as: UTF8.self).split(separator: "\r\n").map(String.init)
    }

    private func fill() -> Bool {
        let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return false }
        buffer += scratch[0..<n]
        return true
    }
}

/// Extracts a top-level string field from a small JSON body.
func jsonString(_ body: [UInt8], _ key: String) -> String? {
    (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?[key] as? String
}
