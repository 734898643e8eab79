import AgentTestSupport
import Foundation
import Glibc
import Synchronization
import Testing
import TunnelStack

/// What the tests need and could not get (namespace, TUN, tools): the test fails with it.
struct HarnessError: Error, CustomStringConvertible {
    let description: String
}

/// A private network namespace (held by `unshare -n sleep 600`, a child of the test) whose
/// TUN device `tst0` carries the namespace's IPv6 packets to a ``TunnelStack`` and the
/// stack's packets back. The namespace has fd7a:115c:a1e0::1/64 on the TUN and routes to
/// the stack's /128s through it; programs run inside it with ``run(_:)``.
final class NamespaceTunnel: Sendable {
    /// The namespace's own address on the TUN (the "tunnel peer").
    static let peerAddress = "fd7a:115c:a1e0::1"

    let stack: TunnelStack
    let addresses: [TunnelAddress]
    /// The last TCP segments both ways, for failure messages.
    let trace: PacketTrace
    private let holder: ChildProgram.Running
    private let tun: Int32
    private let stopped = TestFlag()
    private let readerDone = TestFlag()

    private init(stack: TunnelStack, addresses: [TunnelAddress], trace: PacketTrace, holder: ChildProgram.Running, tun: Int32) {
        self.stack = stack
        self.addresses = addresses
        self.trace = trace
        self.holder = holder
        self.tun = tun
    }

    /// The namespace's `/proc/<pid>/ns/net`.
    var namespacePath: String { "/proc/\(holder.pid)/ns/net" }

    /// Builds the namespace, the TUN and the stack on `addresses`.
    static func make(
        addresses: [TunnelAddress], configuration: TunnelStackConfiguration = TunnelStackConfiguration(),
        acceptors: [UInt16: TunnelAcceptor] = [:]
    ) async throws -> NamespaceTunnel {
        guard getuid() == 0 else { throw HarnessError(description: "the tunnel tests need root (a network namespace and /dev/net/tun)") }
        for tool in ["/usr/bin/unshare", "/usr/bin/nsenter", "/usr/sbin/ip", "/usr/bin/python3"] where access(tool, X_OK) != 0 {
            throw HarnessError(description: "the tunnel tests need \(tool)")
        }
        guard access("/dev/net/tun", R_OK | W_OK) == 0 else { throw HarnessError(description: "/dev/net/tun is missing or not accessible") }
        guard let holder = ChildProgram.start(["/usr/bin/unshare", "-n", "/bin/sleep", "600"]) else {
            throw HarnessError(description: "could not start unshare -n")
        }
        let ours = readLink("/proc/self/ns/net")
        let entered = await eventually(timeout: .seconds(10)) {
            let theirs = readLink("/proc/\(holder.pid)/ns/net")
            return theirs != nil && theirs != ours && readLink("/proc/\(holder.pid)/exe") == "/usr/bin/sleep"
        }
        guard entered else {
            holder.kill()
            throw HarnessError(description: "unshare -n did not enter a new network namespace (no CAP_SYS_ADMIN?)")
        }
        let path = "/proc/\(holder.pid)/ns/net"
        let opened = await onThread { openTUN(namespace: path, name: "tst0") }
        guard case .success(let tun) = opened else {
            holder.kill()
            if case .failure(let error) = opened { throw error }
            throw HarnessError(description: "TUN")
        }
        var commands = [
            ["ip", "link", "set", "lo", "up"],
            ["ip", "link", "set", "tst0", "up"],
            ["ip", "-6", "addr", "add", "\(peerAddress)/64", "dev", "tst0", "nodad"],
        ]
        for address in addresses {
            commands.append(["ip", "-6", "route", "add", "\(address)/128", "dev", "tst0"])
        }
        for command in commands {
            let outcome = await ChildProgram.run(["/usr/bin/nsenter", "--net=\(path)"] + command, stderrToStdout: true)
            guard outcome.status == 0 else {
                Glibc.close(tun)
                holder.kill()
                throw HarnessError(description: "\(command.joined(separator: " ")) in the namespace failed: \(outcome.stdout)")
            }
        }
        let stack: TunnelStack
        let trace = PacketTrace()
        do {
            stack = try await TunnelStack.start(
                addresses: addresses, configuration: configuration, eventLoop: lwIPTestLoop,
                output: { packet in
                    trace.record(packet, toStack: false)
                    _ = write(tun, packet.baseAddress, packet.count)
                }, acceptors: acceptors)
        } catch {
            Glibc.close(tun)
            holder.kill()
            throw error
        }
        let tunnel = NamespaceTunnel(stack: stack, addresses: addresses, trace: trace, holder: holder, tun: tun)
        tunnel.startReader()
        return tunnel
    }

    /// Reads the TUN on a thread of its own and feeds the stack, until ``close()`` (or 10
    /// minutes: bounded).
    private func startReader() {
        let tun = self.tun
        let stack = self.stack
        let stopped = self.stopped
        let trace = self.trace
        let done = readerDone
        Thread {
            let deadline = ContinuousClock.now + .seconds(600)
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !stopped.isSet, ContinuousClock.now < deadline {
                var poller = pollfd(fd: tun, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { read(tun, $0.baseAddress, $0.count) }
                if count <= 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    break
                }
                buffer.withUnsafeBytes { bytes in
                    let packet = UnsafeRawBufferPointer(rebasing: bytes[..<count])
                    trace.record(packet, toStack: true)
                    stack.input(packet)
                }
            }
            done.set()
        }.start()
    }

    /// Runs `arguments` inside the namespace; stderr joins stdout.
    func run(_ arguments: [String]) async -> ChildProgram.Outcome {
        await ChildProgram.run(["/usr/bin/nsenter", "--net=\(namespacePath)"] + arguments, stderrToStdout: true)
    }

    /// Runs a Python script inside the namespace.
    func python(_ script: String) async -> ChildProgram.Outcome {
        await run(["/usr/bin/python3", "-c", script])
    }

    /// Starts a Python script inside the namespace (the caller kills it).
    func startPython(_ script: String) -> ChildProgram.Running? {
        ChildProgram.start(["/usr/bin/nsenter", "--net=\(namespacePath)", "/usr/bin/python3", "-c", script])
    }

    /// What a failed client printed, the stack's counters and the last segments through the
    /// TUN: the text of a failed expectation.
    func report(_ outcome: ChildProgram.Outcome) -> Comment {
        "\(outcome.stdout)\nstack: \(stack.counters())\n\(trace.text())"
    }

    /// Stops the reader, the stack, the TUN and the namespace's holder.
    func close() async {
        stopped.set()
        await readerDone.wait(upTo: .seconds(10))
        await stack.shutdown()
        _ = Glibc.close(tun)
        holder.kill()
    }
}

private func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink(path, &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Opens a TUN device named `name` inside the namespace at `namespace`: this thread joins
/// the namespace (setns affects only the calling thread), then TUNSETIFF creates the device
/// there; the descriptor keeps it.
private func openTUN(namespace: String, name: String) -> Result<Int32, HarnessError> {
    let namespaceFD = open(namespace, O_RDONLY | O_CLOEXEC)
    guard namespaceFD >= 0 else { return .failure(HarnessError(description: "cannot open \(namespace): errno \(errno)")) }
    defer { Glibc.close(namespaceFD) }
    // setns(2) is not in Swift's Glibc module (it needs _GNU_SOURCE): found at run time.
    typealias SetNamespace = @convention(c) (Int32, Int32) -> Int32
    guard let symbol = dlsym(nil, "setns") else { return .failure(HarnessError(description: "setns is not in this libc")) }
    let setns = unsafeBitCast(symbol, to: SetNamespace.self)
    let cloneNewNet: Int32 = 0x4000_0000
    guard setns(namespaceFD, cloneNewNet) == 0 else {
        return .failure(HarnessError(description: "setns(CLONE_NEWNET) failed: errno \(errno)"))
    }
    let tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC)
    guard tun >= 0 else { return .failure(HarnessError(description: "cannot open /dev/net/tun: errno \(errno)")) }
    // struct ifreq: 16 bytes of name, then the flags (IFF_TUN 0x0001 | IFF_NO_PI 0x1000).
    var request = [UInt8](repeating: 0, count: 40)
    for (index, byte) in name.utf8.enumerated() { request[index] = byte }
    request[16] = 0x01
    request[17] = 0x10
    let tunSetInterface: UInt = 0x4004_54CA
    let result = request.withUnsafeMutableBytes { ioctl(tun, tunSetInterface, $0.baseAddress!) }
    guard result == 0 else {
        Glibc.close(tun)
        return .failure(HarnessError(description: "TUNSETIFF failed: errno \(errno)"))
    }
    return .success(tun)
}
