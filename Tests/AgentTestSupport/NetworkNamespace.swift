import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private network namespace held by a child `unshare -n sleep 600`, for tests that run
/// real network programs (wireguard-go) without touching the host's network. Commands run
/// inside it through `nsenter`; sockets are made inside it on a thread that joins it with
/// setns(2) and then ends (a socket stays in the namespace it was created in).
public struct NetworkNamespace: Sendable {
    public let holder: ChildProgram.Running
    public var path: String { "/proc/\(holder.pid)/ns/net" }

    /// Starts the holder and waits (at most 30 s) until it has left our namespace.
    public static func make() async -> NetworkNamespace? {
        guard let holder = ChildProgram.start(["unshare", "-n", "sleep", "600"]) else { return nil }
        let ours = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/net")) ?? ""
        let separate = await eventually {
            let theirs = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(holder.pid)/ns/net")) ?? ours
            return theirs != ours
        }
        guard separate else {
            await onThread { holder.kill() }
            return nil
        }
        return NetworkNamespace(holder: holder)
    }

    /// Runs a command inside the namespace to completion (stderr joined to stdout).
    public func run(
        _ arguments: [String], environment: [String: String] = [:], timeout: Duration = ChildProgram.defaultTimeout
    ) async -> ChildProgram.Outcome {
        await ChildProgram.run(["nsenter", "--net=\(path)"] + arguments, environment: environment, stderrToStdout: true, timeout: timeout)
    }

    /// Starts a long-running command inside the namespace.
    public func start(_ arguments: [String], environment: [String: String] = [:]) -> ChildProgram.Running? {
        ChildProgram.start(["nsenter", "--net=\(path)"] + arguments, environment: environment, stderrToStdout: true)
    }

    /// A UDP socket bound to `address` (IPv4 or IPv6; 127.0.0.1 by default) and `port` (0:
    /// any) inside the namespace, with its port.
    public func udpSocket(address host: String = "127.0.0.1", port requested: UInt16 = 0) async -> (fd: Int32, port: UInt16)? {
        let path = path
        return await onThread {
            // setns is not in Swift's Glibc module: it is looked up in libc.
            typealias SetNS = @convention(c) (Int32, Int32) -> Int32
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setns") else { return nil }
            let setns = unsafeBitCast(symbol, to: SetNS.self)
            let nsFD = open(path, O_RDONLY | O_CLOEXEC)
            guard nsFD >= 0 else { return nil }
            defer { Glibc.close(nsFD) }
            let cloneNewNet: Int32 = 0x4000_0000
            guard setns(nsFD, cloneNewNet) == 0 else { return nil }
            // This thread now lives in the namespace and ends after this closure.
            let v6 = host.contains(":")
            let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return nil }
            var port: UInt16?
            if v6 {
                var address = sockaddr_in6()
                address.sin6_family = sa_family_t(AF_INET6)
                address.sin6_port = requested.bigEndian
                guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else {
                    Glibc.close(fd)
                    return nil
                }
                var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
                let bound = withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
                }
                if bound { port = UInt16(bigEndian: address.sin6_port) }
            } else {
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr(host)
                address.sin_port = requested.bigEndian
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                let bound = withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
                }
                if bound { port = UInt16(bigEndian: address.sin_port) }
            }
            guard let port else {
                Glibc.close(fd)
                return nil
            }
            return (fd, port)
        }
    }

    /// Ends the holder (the namespace goes with its last user).
    public func shutDown() async {
        await onThread { holder.kill() }
    }
}
