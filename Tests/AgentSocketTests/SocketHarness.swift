import AgentCore
import AgentRPC
import AgentSocket
import AgentTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

#if canImport(Glibc)
import Glibc
#endif

let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

/// A fresh directory for one test's socket.
func socketDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "agent-socket-test-" + UUID().uuidString.prefix(8)
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A control-plane session without a control plane (standalone), as the real upward seam.
func standaloneUpward() -> ControlPlaneSession {
    ControlPlaneSession(configuration: .init(agentVersion: "0.1.0"), dialer: nil, logger: quiet)
}

/// Runs a real agent-socket server at a fresh path in a service group; `body` gets a client
/// and the server; graceful shutdown follows.
func withSocketServer(
    path: String? = nil,
    upward: any UpwardSink = standaloneUpward(),
    configure: (inout AgentSocketServer.Configuration) -> Void = { _ in },
    logger: Logger = quiet,
    _ body: (AgentSocketClient, AgentSocketServer) async throws -> Void
) async throws {
    let socketPath = try path ?? (socketDirectory() + "/agent.sock")
    var configuration = AgentSocketServer.Configuration(path: socketPath)
    configure(&configuration)
    let server = AgentSocketServer(
        configuration: configuration, service: AgentSocketService(units: UnitManager(), upward: upward), logger: logger)
    let group = ServiceGroup(configuration: .init(services: [server], logger: quiet))
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        #expect(await eventually { server.isListening || server.creationFailure != nil })
        do {
            try await body(AgentSocketClient(path: socketPath), server)
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await tasks.next()
    }
}

/// A raw unix-socket client for byte-level tests; blocking calls run on their own thread.
final class UnixSocketClient: Sendable {
    let fd: Int32

    init?(path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
    }

    deinit { close(fd) }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    /// Everything until the peer closes or `timeout` passes (bounded).
    func readAll(timeout: Duration = .seconds(10)) async -> (bytes: [UInt8], closed: Bool) {
        let fd = fd
        return await onThread {
            var out: [UInt8] = []
            let deadline = ContinuousClock.now + timeout
            var buffer = [UInt8](repeating: 0, count: 65536)
            while ContinuousClock.now < deadline {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let left = max(1, Int32((deadline - .now) / .milliseconds(1)))
                guard poll(&poller, 1, min(left, 100)) > 0 else { continue }
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { return (out, true) }
                out += buffer[0..<n]
            }
            return (out, false)
        }
    }
}

/// A dRPC unary call's bytes on `stream` (Invoke, Message, CloseSend).
func unaryFrames(_ method: String, _ request: [UInt8], stream: UInt8 = 1) -> [UInt8] {
    func frame(_ kind: UInt8, _ message: UInt8, _ data: [UInt8]) -> [UInt8] {
        [kind << 1 | 1, stream, message] + varint(data.count) + data
    }
    return frame(1, 1, Array(method.utf8)) + frame(2, 2, request) + frame(6, 3, [])
}

func varint(_ value: Int) -> [UInt8] {
    var value = UInt64(value)
    var out: [UInt8] = []
    while value >= 0x80 {
        out.append(UInt8(value & 0x7F) | 0x80)
        value >>= 7
    }
    out.append(UInt8(value))
    return out
}
