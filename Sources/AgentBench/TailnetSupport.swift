import DERP
import DERPRelayDouble
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What `agent-bench tailnet` runs besides the agent: private network namespaces (held by
/// `unshare -n sleep`), Debian's wireguard-go in them, UDP bridges from wireguard-go to the
/// DERP relay double (what magicsock does), and blocking socket servers and clients made
/// inside a namespace. Copied in spirit from the tests' NetworkNamespace and PeerInNamespace
/// (test helpers are not visible here). Every loop is bounded in count and in time.
enum TailnetBench {
    static let wireGuardPort: UInt16 = 51820
    static let cloneNewNet: Int32 = 0x4000_0000

    /// Joins the network namespace open at `fd` on the calling thread (setns(2) is looked up
    /// in libc: Swift's Glibc module does not declare it).
    static func enter(namespace fd: Int32) -> Bool {
        typealias SetNS = @convention(c) (Int32, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setns") else { return false }
        return unsafeBitCast(symbol, to: SetNS.self)(fd, cloneNewNet) == 0
    }

    /// Runs `body` on a new thread that has first joined the namespace at `path` (nil: ours);
    /// waits for it. Sockets made there stay in that namespace after the thread ends.
    static func inNamespace<T: Sendable>(_ path: String?, _ body: @escaping @Sendable () -> T?) -> T? {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            defer { done.signal() }
            if let path {
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { return }
                defer { close(fd) }
                guard enter(namespace: fd) else { return }
            }
            let value = body()
            result.withLock { $0 = value }
        }.start()
        done.wait()
        return result.withLock { $0 }
    }

    /// Runs `argv` to completion (at most `seconds`, then SIGKILL); its status and output.
    static func run(_ argv: [String], seconds: Int = 30) -> (status: Int32, output: String) {
        let log = NSTemporaryDirectory() + "agent-bench-tailnet-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).out"
        defer { unlink(log) }
        let pid = Bench.spawn(argv, stdoutPath: log)
        var status: Int32 = 0
        var reaped = false
        for _ in 0..<(seconds * 100) {
            if waitpid(pid, &status, WNOHANG) == pid {
                reaped = true
                break
            }
            usleep(10_000)
        }
        if !reaped {
            kill(pid, SIGKILL)
            status = Bench.wait(pid)
        }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return ((status >> 8) & 0xff, output)
    }

    /// A TCP socket to `address` (IPv6 text, or IPv4) port `port`, made in the calling
    /// thread's namespace, with 10 s send/receive timeouts (connect obeys the send one).
    static func tcpSocket(ipv6: Bool) -> Int32? {
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return fd
    }

    static func connect(_ fd: Int32, address: String, port: Int) -> Bool {
        if address.contains(":") {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = UInt16(port).bigEndian
            guard inet_pton(AF_INET6, address, &sa.sin6_addr) == 1 else { return false }
            return withUnsafePointer(to: &sa) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0 }
            }
        }
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_port = UInt16(port).bigEndian
        sa.sin_addr.s_addr = inet_addr(address)
        return withUnsafePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// One HTTP/1.1 request with `Connection: close` on a fresh connection (curl's way):
    /// nanoseconds from connect to the server's close, or nil unless the status is 200.
    static func roundTrip(address: String, port: Int, path: String) -> Double? {
        guard let fd = tcpSocket(ipv6: address.contains(":")) else { return nil }
        defer { close(fd) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".utf8)
        var response = [UInt8](repeating: 0, count: 4096)
        let start = Bench.now()
        guard connect(fd, address: address, port: port), Bench.sendAll(fd, request) else { return nil }
        var total = 0
        // Bounded: 64 reads of a response that fits one.
        for _ in 0..<64 {
            let n = response.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + total, $0.count - total, 0) }
            if n <= 0 { break }
            total += n
            if total == response.count { break }
        }
        let elapsed = Double(Bench.now() - start)
        guard total >= 12, Array(response[9..<12]) == Array("200".utf8) else { return nil }
        return elapsed
    }

    /// One HTTP/1.1 GET on a fresh connection: the whole response (head and body, at most
    /// 64 KiB), or nil.
    static func get(address: String, port: Int, path: String) -> String? {
        guard let fd = tcpSocket(ipv6: address.contains(":")) else { return nil }
        defer { close(fd) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".utf8)
        guard connect(fd, address: address, port: port), Bench.sendAll(fd, request) else { return nil }
        var response = [UInt8](repeating: 0, count: 65536)
        var total = 0
        // Bounded: the buffer's size.
        while total < response.count {
            let n = response.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + total, $0.count - total, 0) }
            if n <= 0 { break }
            total += n
        }
        return String(decoding: response[0..<total], as: UTF8.self)
    }

    /// Sends `bytes` to the bulk server (`U`), half-closes and waits for its count: ns.
    static func upload(address: String, port: Int, bytes: Int) -> Double? {
        guard let fd = tcpSocket(ipv6: address.contains(":")) else { return nil }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x5a, count: 65536)
        let start = Bench.now()
        guard connect(fd, address: address, port: port), Bench.sendAll(fd, [UInt8(ascii: "U")]) else { return nil }
        var sent = 0
        while sent < bytes {
            let part = min(chunk.count, bytes - sent)
            guard chunk.withUnsafeBytes({ Bench.sendAll(fd, UnsafeRawBufferPointer(rebasing: $0[0..<part])) }) else { return nil }
            sent += part
        }
        shutdown(fd, Int32(SHUT_WR))
        var count: UInt64 = 0
        let n = withUnsafeMutableBytes(of: &count) { recv(fd, $0.baseAddress, 8, Int32(MSG_WAITALL)) }
        let elapsed = Double(Bench.now() - start)
        return n == 8 && Int(count) == bytes ? elapsed : nil
    }

    /// Asks the bulk server for `bytes` (`D` + 8 bytes) and reads them to its close: ns.
    static func download(address: String, port: Int, bytes: Int) -> Double? {
        guard let fd = tcpSocket(ipv6: address.contains(":")) else { return nil }
        defer { close(fd) }
        var size = UInt64(bytes)
        let ask = [UInt8(ascii: "D")] + withUnsafeBytes(of: &size) { Array($0) }
        var buffer = [UInt8](repeating: 0, count: 262_144)
        let start = Bench.now()
        guard connect(fd, address: address, port: port), Bench.sendAll(fd, ask) else { return nil }
        var received = 0
        // Bounded: a read returns at least one byte, or the loop ends.
        for _ in 0..<(bytes + 1) {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += n
        }
        let elapsed = Double(Bench.now() - start)
        return received == bytes ? elapsed : nil
    }
}

/// A blocking TCP server on its own thread, in a namespace of choice: either a minimal
/// HTTP/1.1 server (one answer per connection, then close: the baseline's kernel HTTP
/// server) or the bulk sink/source (`U` reads to EOF and answers the count, `D` + size sends
/// that many bytes). One connection at a time, at most `maxConnections`, until stop().
final class BenchSocketServer: Sendable {
    enum Kind: Sendable { case http, bulk }
    let fd: Int32
    let port: Int

    /// Listens on 127.0.0.1:`port` in our namespace (`namespace` nil) or on [::]:`port`
    /// inside the namespace at `namespace`.
    init?(kind: Kind, namespace: String?, port: Int, maxConnections: Int = 20_000) {
        let ipv6 = namespace != nil
        guard
            let fd = TailnetBench.inNamespace(
                namespace,
                { () -> Int32? in
                    let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                    guard fd >= 0 else { return nil }
                    var one: Int32 = 1
                    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
                    let bound: Bool
                    if ipv6 {
                        var sa = sockaddr_in6()
                        sa.sin6_family = sa_family_t(AF_INET6)
                        sa.sin6_port = UInt16(port).bigEndian
                        bound = withUnsafePointer(to: &sa) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0 }
                        }
                    } else {
                        var sa = sockaddr_in()
                        sa.sin_family = sa_family_t(AF_INET)
                        sa.sin_port = UInt16(port).bigEndian
                        sa.sin_addr.s_addr = inet_addr("127.0.0.1")
                        bound = withUnsafePointer(to: &sa) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
                        }
                    }
                    guard bound, listen(fd, 64) == 0 else {
                        close(fd)
                        return nil
                    }
                    return fd
                })
        else { return nil }
        self.fd = fd
        self.port = port
        Thread {
            for _ in 0..<maxConnections {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                var timeout = timeval(tv_sec: 10, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var one: Int32 = 1
                setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                switch kind {
                case .http: Self.answerHTTP(client)
                case .bulk: Self.serveBulk(client)
                }
                close(client)
            }
        }.start()
    }

    /// The agent's /healthz answer, byte for byte the same size.
    static let httpResponse = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\nConnection: close\r\n\r\n{\"status\":\"ok\"}".utf8)

    private static func answerHTTP(_ client: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var total = 0
        // Bounded: 16 reads of a head that fits one.
        for _ in 0..<16 {
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress! + total, $0.count - total, 0) }
            if n <= 0 { return }
            total += n
            if total >= 4, buffer[(total - 4)..<total].elementsEqual([13, 10, 13, 10]) { break }
            if total == buffer.count { return }
        }
        _ = Bench.sendAll(client, httpResponse)
    }

    private static func serveBulk(_ client: Int32) {
        var op: UInt8 = 0
        guard recv(client, &op, 1, Int32(MSG_WAITALL)) == 1 else { return }
        var buffer = [UInt8](repeating: 0xa5, count: 262_144)
        if op == UInt8(ascii: "U") {
            var count: UInt64 = 0
            // Bounded: 1 GiB of reads of at least one byte each at most... or the peer's EOF.
            for _ in 0..<(1 << 30) {
                let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                count += UInt64(n)
            }
            _ = withUnsafeBytes(of: &count) { Bench.sendAll(client, $0) }
        } else if op == UInt8(ascii: "D") {
            var size: UInt64 = 0
            guard withUnsafeMutableBytes(of: &size, { recv(client, $0.baseAddress, 8, Int32(MSG_WAITALL)) }) == 8 else { return }
            var sent: UInt64 = 0
            while sent < min(size, 1 << 32) {
                let part = Int(min(UInt64(buffer.count), size - sent))
                guard buffer.withUnsafeBytes({ Bench.sendAll(client, UnsafeRawBufferPointer(rebasing: $0[0..<part])) }) else { return }
                sent += UInt64(part)
            }
        }
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}

/// wireguard-go's UDP side bridged to the DERP relay with a DERP client under wireguard-go's
/// own key: one UDP socket per peer inside the namespace (wireguard-go's endpoint for that
/// peer), so packets from the relay reach wireguard-go from the address it expects.
final class RelayBridge: Sendable {
    let derp: DERPClient
    /// The UDP port (in the namespace, on 127.0.0.1) standing for each peer.
    let ports: [X25519PublicKey: UInt16]
    private let sockets: [(fd: Int32, peer: X25519PublicKey)]
    private let stopping = Atomic<Bool>(false)
    private let ended = DispatchSemaphore(value: 0)

    init?(namespace: String, key: X25519PrivateKey, peers: [X25519PublicKey], relay: DERPRelayDouble, lifetime: Duration) {
        var sockets: [(fd: Int32, peer: X25519PublicKey)] = []
        var ports: [X25519PublicKey: UInt16] = [:]
        for peer in peers {
            guard
                let (fd, port) = TailnetBench.inNamespace(
                    namespace,
                    { () -> UdpSocket? in
                        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                        guard fd >= 0 else { return nil }
                        var size: Int32 = 4 << 20
                        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
                        var sa = sockaddr_in()
                        sa.sin_family = sa_family_t(AF_INET)
                        sa.sin_addr.s_addr = inet_addr("127.0.0.1")
                        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                        let bound = withUnsafeMutablePointer(to: &sa) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
                        }
                        guard bound else {
                            close(fd)
                            return nil
                        }
                        return UdpSocket(fd: fd, port: UInt16(bigEndian: sa.sin_port))
                    }
                ).map({ ($0.fd, $0.port) })
            else {
                for s in sockets { close(s.fd) }
                return nil
            }
            sockets.append((fd, peer))
            ports[peer] = port
        }
        self.sockets = sockets
        self.ports = ports
        let byPeer = Dictionary(uniqueKeysWithValues: sockets.map { ($0.peer, $0.fd) })
        // Relay → wireguard-go: from the socket standing for the packet's source.
        var logger = Logger(label: "agent-bench.derp")
        logger.logLevel = .error
        derp = DERPClient(privateKey: key, node: relay.node(regionID: 1), logger: logger) { packet in
            guard let fd = byPeer[packet.source] else { return }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = TailnetBench.wireGuardPort.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = packet.packet.withUnsafeBytes { bytes in
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
        }
        derp.start()
        // wireguard-go → relay: one thread polls every socket until stop() or `lifetime`.
        let derp = self.derp
        let routes = self.sockets
        let ended = self.ended
        let deadline = ContinuousClock.now + lifetime
        Thread {
            defer { ended.signal() }
            var buffer = [UInt8](repeating: 0, count: 65536)
            var pollers = routes.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            while !self.stopping.load(ordering: .relaxed), ContinuousClock.now < deadline {
                guard poll(&pollers, nfds_t(pollers.count), 200) > 0 else { continue }
                for (index, poller) in pollers.enumerated() where poller.revents != 0 {
                    // Drain what is queued, at most 256 datagrams per wake-up.
                    for _ in 0..<256 {
                        let count = buffer.withUnsafeMutableBytes { recv(poller.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                        guard count > 0 else { break }
                        _ = derp.send(to: routes[index].peer, packet: buffer[0..<count])
                    }
                }
            }
        }.start()
    }

    func stop() async {
        stopping.store(true, ordering: .relaxed)
        let ended = self.ended
        await onThread { _ = ended.wait(timeout: .now() + 2) }
        await derp.close()
        for s in sockets { close(s.fd) }
    }
}

struct UdpSocket: Sendable {
    let fd: Int32
    let port: UInt16
}

/// A private network namespace held by `unshare -n sleep 600` (ours to kill).
struct BenchNamespace: Sendable {
    let holder: pid_t
    var path: String { "/proc/\(holder)/ns/net" }

    static func make() -> BenchNamespace? {
        let holder = Bench.spawn(["/usr/bin/unshare", "-n", "/bin/sleep", "600"])
        let ours = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/net")) ?? ""
        // At most 30 s.
        for _ in 0..<3000 {
            let theirs = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(holder)/ns/net")) ?? ours
            if theirs != ours { return BenchNamespace(holder: holder) }
            usleep(10_000)
        }
        kill(holder, SIGKILL)
        _ = Bench.wait(holder)
        return nil
    }

    func run(_ argv: [String]) -> (status: Int32, output: String) {
        TailnetBench.run(["/usr/bin/nsenter", "--net=\(path)"] + argv)
    }

    /// wireguard-go on a new interface in this namespace with `address`/128, MTU 1280 (the
    /// tailnet's), listening on 51820, with `peers` (public key, allowed /128, the bridge's
    /// UDP port standing for it). Returns wireguard-go's pid (nsenter and env exec it).
    func wireGuard(interface: String, privateKey: [UInt8], address: String, peers: [(key: [UInt8], address: String, port: UInt16)]) throws -> pid_t {
        try wireGuard(interface: interface, privateKey: privateKey, address: address, peers: peers.map { ($0.key, $0.address, "127.0.0.1:\($0.port)") })
    }

    /// As above, with each peer's endpoint (`ip:port`) and wireguard-go's listen port given.
    func wireGuard(
        interface: String, privateKey: [UInt8], address: String, peers: [(key: [UInt8], address: String, endpoint: String)],
        listenPort: UInt16 = TailnetBench.wireGuardPort
    ) throws -> pid_t {
        _ = run(["/usr/sbin/ip", "link", "set", "lo", "up"])
        let log = NSTemporaryDirectory() + "agent-bench-\(interface).log"
        let pid = Bench.spawn(
            [
                "/usr/bin/nsenter", "--net=\(path)", "/usr/bin/env", "WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1",
                "/usr/bin/wireguard-go", "-f", interface,
            ], stdoutPath: log)
        var ready = false
        for _ in 0..<3000 {
            if FileManager.default.fileExists(atPath: "/var/run/wireguard/\(interface).sock") {
                ready = true
                break
            }
            usleep(10_000)
        }
        guard ready else {
            kill(pid, SIGKILL)
            _ = Bench.wait(pid)
            throw BenchFailure("wireguard-go gave no UAPI socket for \(interface) (\(log))")
        }
        let keyFile = NSTemporaryDirectory() + "agent-bench-\(interface).key"
        _ = FileManager.default.createFile(atPath: keyFile, contents: Data(Data(privateKey).base64EncodedString().utf8), attributes: [.posixPermissions: 0o600])
        defer { unlink(keyFile) }
        var set = ["/usr/bin/wg", "set", interface, "private-key", keyFile, "listen-port", "\(listenPort)"]
        for peer in peers {
            set += ["peer", Data(peer.key).base64EncodedString(), "allowed-ips", "\(peer.address)/128", "endpoint", peer.endpoint]
        }
        var commands = [
            set,
            ["/usr/sbin/ip", "-6", "addr", "add", "\(address)/128", "dev", interface, "nodad"],
            ["/usr/sbin/ip", "link", "set", interface, "mtu", "1280", "up"],
        ]
        for peer in peers { commands.append(["/usr/sbin/ip", "-6", "route", "add", "\(peer.address)/128", "dev", interface]) }
        for command in commands {
            let outcome = run(command)
            guard outcome.status == 0 else {
                kill(pid, SIGTERM)
                _ = Bench.wait(pid)
                throw BenchFailure("\(command.joined(separator: " ")) failed: \(outcome.output)")
            }
        }
        return pid
    }

    func stop() {
        kill(holder, SIGKILL)
        _ = Bench.wait(holder)
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
