import AgentCore
import AgentHTTP
import CoreMetrics
import Glibc
import HTTPTypes
import Logging
import NIOCore
import NIOPosix
import NIOWebSocket

/// `GET /api/v0/desktop/vnc`: a WebSocket carrying the RFB stream of a
/// new TCP connection to the desktop's VNC port, bytes copied both ways unchanged, one
/// connection per viewer. Errors before the upgrade are JSON (`Failed to start desktop
/// session.`, `Failed to connect to VNC server.`).
///
/// Backpressure both ways: each direction reads the next chunk only after the previous one
/// was written, so a viewer that stops reading stops the VNC server's stream (its socket
/// buffers fill) instead of growing the agent's memory. Per viewer: the two sockets' kernel
/// buffers, the chunk being written and the chunks read ahead of it: ``readAhead``, and at
/// most 3 more that NIO's read loop takes in the wake-up that reached it (each up to 1 MiB),
/// so about 6 MiB for a viewer that stopped reading (NIOAsyncChannel's default read-ahead of
/// 10 made it about 14).
struct VNCBridge: Sendable {
    /// Chunks read from the VNC server ahead of the one being written to the viewer.
    static let readAhead = 2

    let supervisor: DesktopSupervisor
    private let logger = Logger(label: "workspace-agent.desktop")

    func route() -> AgentWebSocketRoute {
        AgentWebSocketRoute(path: "vnc") { _ throws(APIError) in
        } prepare: { _ throws(APIError) in
            let info: DesktopInfo
            do throws(DesktopError) {
                info = try await supervisor.ensureStarted()
            } catch {
                throw APIError(.internalServerError, "Failed to start desktop session.", detail: error.description)
            }
            // Not by connecting: a VNC server blacklists viewers that leave unauthenticated.
            let reachable = (try? await NIOThreadPool.singleton.runIfActive { LoopbackProbe.isListening(port: info.vncPort) }) ?? false
            guard reachable else {
                throw APIError(
                    .internalServerError, "Failed to connect to VNC server.", detail: "dial tcp 127.0.0.1:\(info.vncPort): connection refused")
            }
        } handler: { inbound, outbound, _ in
            try await bridge(inbound: inbound, outbound: outbound)
        }
    }

    func bridge(inbound: WebSocketInbound, outbound: WebSocketOutbound) async throws {
        let info = try await supervisor.ensureStarted()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            // Full-screen updates are megabytes: read up to 1 MiB at a time (fewer frames,
            // fewer hops); small updates still come in small reads.
            .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 65536, maximum: 1 << 20))
            .connect(host: "127.0.0.1", port: info.vncPort) { channel in
                channel.eventLoop.makeCompletedFuture {
                    // NIOAsyncChannel's default reads ahead 10 chunks (10 MiB here) before it
                    // stops reading.
                    let readAhead = NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark(
                        lowWatermark: 1, highWatermark: Self.readAhead)
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                        wrappingChannelSynchronously: channel, configuration: .init(backPressureStrategy: readAhead))
                }
            }
        await supervisor.viewerOpened()
        defer { Task { await supervisor.viewerClosed() } }
        let toViewer = DesktopMetrics.bridged("to_viewer")
        let toDesktop = DesktopMetrics.bridged("to_desktop")
        try await channel.executeThenClose { vncInbound, vncOutbound in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Desktop → viewer: one binary frame per chunk read.
                    for try await chunk in vncInbound {
                        toViewer.increment(by: Int64(chunk.readableBytes))
                        try await outbound.write(.binary(chunk))
                    }
                    try? await outbound.close(.normalClosure, reason: "VNC server closed the connection")
                }
                group.addTask {
                    // Viewer → desktop: frame payloads as they come (RFB is not message-aligned).
                    for await frame in inbound where frame.opcode != .text {
                        toDesktop.increment(by: Int64(frame.data.readableBytes))
                        try await vncOutbound.write(frame.data)
                    }
                }
                // Either side ending ends both.
                try await group.next()
                group.cancelAll()
            }
        }
    }
}
