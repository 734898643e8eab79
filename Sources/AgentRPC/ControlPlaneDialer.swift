import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore
import NIOSSL
import NIOWebSocket

/// Opens the byte connection the upward RPC runs over.
///
/// The caller feeds received bytes to its yamux session (`onBytes`), learns of EOF
/// (`onClosed`), and runs its protocol in `body` with a writer. The connection lasts until
/// `body` returns or throws, or the peer closes it.
public protocol ControlPlaneDialer: Sendable {
    func connect(
        onBytes: @escaping @Sendable ([UInt8]) async -> Void,
        onClosed: @escaping @Sendable () async -> Void,
        body: @escaping @Sendable (_ write: @escaping @Sendable ([UInt8]) async throws -> Void) async throws -> Void
    ) async throws
}

/// Dials `GET /api/v2/workspaceagents/me/rpc?version=…&role=agent` as a WebSocket with
/// `Coder-Session-Token`, binary messages up to 4 MiB (spec agent-rpc §3.1). `wss://` uses
/// the system trust store.
public struct WebSocketDialer: ControlPlaneDialer {
    /// Largest WebSocket message either way: 4 MiB.
    public static let maxMessageSize = 4 << 20

    public let url: String
    private let token: String
    private let logger: Logger

    /// - Parameters:
    ///   - baseURL: the control plane's access URL, e.g. `https://coder.example.com`.
    ///   - token: the agent token (never logged).
    ///   - version: the API version requested (`major.minor`).
    public init(baseURL: String, token: String, version: String, logger: Logger) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("https://") {
            base = "wss://" + base.dropFirst("https://".count)
        } else if base.hasPrefix("http://") {
            base = "ws://" + base.dropFirst("http://".count)
        }
        self.url = base + "/api/v2/workspaceagents/me/rpc?version=\(version)&role=agent"
        self.token = token
        self.logger = logger
    }

    public func connect(
        onBytes: @escaping @Sendable ([UInt8]) async -> Void,
        onClosed: @escaping @Sendable () async -> Void,
        body: @escaping @Sendable (_ write: @escaping @Sendable ([UInt8]) async throws -> Void) async throws -> Void
    ) async throws {
        // WSCore closes every WebSocket as soon as graceful shutdown reaches the task that
        // runs it; ours must stay up until the final lifecycle states are delivered, so the
        // connection runs detached from the service group's shutdown context (cancellation
        // is still forwarded).
        let connection = Task.detached { [self] in
            try await self.run(onBytes: onBytes, onClosed: onClosed, body: body)
        }
        try await withTaskCancellationHandler {
            try await connection.value
        } onCancel: {
            connection.cancel()
        }
    }

    private func run(
        onBytes: @escaping @Sendable ([UInt8]) async -> Void,
        onClosed: @escaping @Sendable () async -> Void,
        body: @escaping @Sendable (_ write: @escaping @Sendable ([UInt8]) async throws -> Void) async throws -> Void
    ) async throws {
        var headers = HTTPFields()
        headers[HTTPField.Name("Coder-Session-Token")!] = token
        let tls: TLSConfiguration? = url.hasPrefix("wss://") ? .makeClientConfiguration() : nil
        try await WebSocketClient.connect(
            url: url,
            configuration: .init(maxFrameSize: Self.maxMessageSize, additionalHeaders: headers),
            tlsConfiguration: tls,
            logger: logger
        ) { inbound, outbound, _ in
            enum Finished { case reader, body, closeTimeout }
            try await withThrowingTaskGroup(of: Finished.self) { group in
                group.addTask {
                    // The reader is never cancelled while the body runs (WSCore needs it for
                    // the close handshake); it ends when the peer closes or answers our close.
                    do {
                        for try await message in inbound.messages(maxSize: Self.maxMessageSize) {
                            if case .binary(let buffer) = message { await onBytes(Array(buffer.readableBytesView)) }
                        }
                    } catch {}
                    await onClosed()
                    return .reader
                }
                group.addTask {
                    do {
                        try await body { bytes in try await outbound.write(.binary(ByteBuffer(bytes: bytes))) }
                    } catch {
                        try? await outbound.close(.normalClosure, reason: nil)
                        throw error
                    }
                    try? await outbound.close(.normalClosure, reason: nil)
                    return .body
                }
                var readerDone = false
                var bodyDone = false
                while let finished = try await group.next() {
                    switch finished {
                    case .reader:
                        readerDone = true
                        // The peer is gone: stop the body (its yamux calls fail anyway).
                        if !bodyDone { group.cancelAll() }
                    case .body:
                        bodyDone = true
                        if !readerDone {
                            group.addTask {
                                try? await Task.sleep(for: .seconds(5))
                                return .closeTimeout
                            }
                        }
                    case .closeTimeout:
                        group.cancelAll()
                    }
                    if readerDone && bodyDone { group.cancelAll() }
                }
            }
        }
    }
}
