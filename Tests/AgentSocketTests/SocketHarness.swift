import AgentCore
import AgentRPC
import AgentSocket
import AgentTestSupport
import DRPC
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
    context: (any ContextControl)? = nil,
    configure: (inout AgentSocketServer.Configuration) -> Void = { _ in },
    logger: Logger = quiet,
    _ body: (AgentSocketClient, AgentSocketServer) async throws -> Void
) async throws {
    // A directory made here goes again with the server (the caller's own path stays).
    let socketPath: String
    var made: String?
    if let path {
        socketPath = path
    } else {
        let directory = try socketDirectory()
        made = directory
        socketPath = directory + "/agent.sock"
    }
    defer { if let made { try? FileManager.default.removeItem(atPath: made) } }
    var configuration = AgentSocketServer.Configuration(path: socketPath)
    configure(&configuration)
    let server = AgentSocketServer(
        configuration: configuration, service: AgentSocketService(units: UnitManager(), upward: upward, context: context), logger: logger)
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

/// A dRPC unary call's bytes on `stream` (Invoke, Message, CloseSend).
func unaryFrames(_ method: String, _ request: [UInt8], stream: UInt64 = 1) -> [UInt8] {
    func frame(_ kind: UInt8, _ message: UInt8, _ data: [UInt8]) -> [UInt8] {
        [kind << 1 | 1] + Varint.encoded(stream) + [message] + varint(data.count) + data
    }
    return frame(1, 1, Array(method.utf8)) + frame(2, 2, request) + frame(6, 3, [])
}

func varint(_ value: Int) -> [UInt8] { Varint.encoded(UInt64(value)) }
