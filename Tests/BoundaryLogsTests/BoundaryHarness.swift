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

/// An upward sink that records batches and delivers, holds (an outage) or rejects them. A
/// held batch can be withdrawn, as from the session's outbox before it is sent.
final class RecordingUpward: UpwardSink, Sendable {
    enum Mode: Sendable, Equatable {
        case deliver
        case hold
        case reject(Int)
    }

    private struct State {
        var mode: Mode
        var batches: [BoundaryLogBatch] = []
        var held: [(receipt: UpwardReceipt, batch: BoundaryLogBatch)] = []
        var withdrawn = 0
        var rejections = 0
    }
    private let state: Mutex<State>

    init(_ mode: Mode = .deliver) { state = Mutex(State(mode: mode)) }

    func send(_ status: AppStatusReport) -> UpwardReceipt { .settled(.logged) }
    func send(_ report: ConnectionReport) {}
    func send(_ line: AgentLogLine) {}

    func send(_ batch: BoundaryLogBatch) -> UpwardReceipt {
        let receipt = state.withLock { s -> UpwardReceipt in
            switch s.mode {
            case .deliver:
                s.batches.append(batch)
                return .settled(.delivered)
            case .hold:
                let receipt = UpwardReceipt()
                s.held.append((receipt, batch))
                return receipt
            case .reject(let left):
                s.mode = left > 1 ? .reject(left - 1) : .deliver
                s.rejections += 1
                return .settled(.rejected("batch size exceeds maximum of 1000"))
            }
        }
        receipt.allowWithdrawal { [weak self, weak receipt] in
            guard let self, let receipt else { return false }
            return state.withLock { s in
                guard let index = s.held.firstIndex(where: { $0.receipt === receipt }) else { return false }
                s.held.remove(at: index)
                s.withdrawn += 1
                return true
            }
        }
        return receipt
    }

    /// Delivers what is held now and goes on holding what comes next.
    func deliverHeld() { settleHeld(thenDeliver: false) }

    /// Ends the outage: what was held is delivered, and so is everything after.
    func release() { settleHeld(thenDeliver: true) }

    private func settleHeld(thenDeliver: Bool) {
        let held = state.withLock { s -> [UpwardReceipt] in
            if thenDeliver { s.mode = .deliver }
            defer { s.held = [] }
            s.batches += s.held.map(\.batch)
            return s.held.map(\.receipt)
        }
        for receipt in held { receipt.settle(.delivered) }
    }

    /// Delivered batches.
    var batches: [BoundaryLogBatch] { state.withLock { $0.batches } }
    var heldCount: Int { state.withLock { $0.held.count } }
    var withdrawn: Int { state.withLock { $0.withdrawn } }
    var rejections: Int { state.withLock { $0.rejections } }
    /// The delivered batches' URLs (a held batch may still be withdrawn and spooled).
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
