import AgentCore
import AgentProto
import AgentTestSupport
import Foundation
import Logging
import ServiceLifecycle
import SwiftProtobuf
import Synchronization
import Testing

@testable import BoundaryLogs

/// An upward sink that records batches and delivers, holds (an outage) or rejects them.
final class RecordingUpward: UpwardSink, Sendable {
    enum Mode: Sendable, Equatable {
        case deliver
        case hold
        case reject(Int)
    }

    private struct State {
        var mode: Mode
        var batches: [BoundaryLogBatch] = []
        var held: [UpwardReceipt] = []
        var rejections = 0
    }
    private let state: Mutex<State>

    init(_ mode: Mode = .deliver) { state = Mutex(State(mode: mode)) }

    func send(_ status: AppStatusReport) -> UpwardReceipt { .settled(.logged) }
    func send(_ report: ConnectionReport) {}
    func send(_ line: AgentLogLine) {}

    func send(_ batch: BoundaryLogBatch) -> UpwardReceipt {
        state.withLock { s in
            switch s.mode {
            case .deliver:
                s.batches.append(batch)
                return .settled(.delivered)
            case .hold:
                let receipt = UpwardReceipt()
                s.held.append(receipt)
                s.batches.append(batch)
                return receipt
            case .reject(let left):
                s.mode = left > 1 ? .reject(left - 1) : .deliver
                s.rejections += 1
                return .settled(.rejected("batch size exceeds maximum of 1000"))
            }
        }
    }

    /// Ends the outage: what was held is delivered, and so is everything after.
    func release() {
        let held = state.withLock { s -> [UpwardReceipt] in
            s.mode = .deliver
            defer { s.held = [] }
            return s.held
        }
        for receipt in held { receipt.settle(.delivered) }
    }

    var batches: [BoundaryLogBatch] { state.withLock { $0.batches } }
    var rejections: Int { state.withLock { $0.rejections } }
    /// Delivered ones only (held receipts may be sent again after a shutdown).
    var urls: [String] { batches.flatMap { $0.entries.compactMap { $0.httpRequest?.url } } }
    var isConnected: Bool { state.withLock { $0.mode != .hold } }
    var hasControlPlane: Bool { true }
}

/// A socket server and forwarder running in a service group, over a temporary directory.
struct BoundaryHarness {
    let path: String
    let directory: String
    let upward: RecordingUpward
    let server: BoundarySocketServer
    let forwarder: BoundaryForwarder

    static func with(
        upward: RecordingUpward = RecordingUpward(), spoolBytes: Int = 1 << 20, directory: String? = nil,
        configure: (inout BoundarySocketServer.Configuration) -> Void = { _ in },
        _ body: (BoundaryHarness) async throws -> Void
    ) async throws {
        let directory = directory ?? NSTemporaryDirectory() + "boundary-test-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let spool = spoolBytes > 0 ? BoundarySpool(directory: directory + "/spool", maxBytes: spoolBytes, logger: quiet) : nil
        let forwarder = BoundaryForwarder(upward: upward, spool: spool)
        let path = directory + "/audit.sock"
        var configuration = BoundarySocketServer.Configuration(path: path)
        configure(&configuration)
        let server = BoundarySocketServer(configuration: configuration, forwarder: forwarder)
        let group = ServiceGroup(configuration: .init(services: [forwarder, server], logger: quiet))
        let harness = BoundaryHarness(path: path, directory: directory, upward: upward, server: server, forwarder: forwarder)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            #expect(await eventually { server.isListening })
            do {
                try await body(harness)
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    func connect() throws -> LoopbackSocket { try #require(LoopbackSocket(unixPath: path)) }
}
