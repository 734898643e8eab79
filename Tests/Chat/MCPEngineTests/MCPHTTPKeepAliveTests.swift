import AgentTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import OutboundProxy
import Synchronization
import Testing

@testable import MCPEngine

/// An MCP server's requests on kept-alive connections, against a NIO server that counts its
/// connections: a burst of calls shares one; and when the server closes a connection as the
/// next request arrives on it (the race of a server closing an idle connection), a message
/// the server may read twice goes again on a new connection, and a `tools/call` fails rather
/// than run twice.
@Suite(.timeLimit(.minutes(2)))
struct MCPHTTPKeepAliveTests {
    /// Connections accepted.
    final class Accepted: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func add() { count.withLock { $0 += 1 } }
    }

    /// Answers each request `{}` (200, JSON), except that a connection's `closeOnRequest`-th
    /// request closes it unanswered.
    final class Answerer: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        private let closeOnRequest: Int?
        private var requests = 0
        init(closeOnRequest: Int?) { self.closeOnRequest = closeOnRequest }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            requests += 1
            if requests == closeOnRequest {
                context.close(promise: nil)
                return
            }
            let body = #"{"jsonrpc":"2.0","id":1,"result":{}}"#
            let headers = HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", String(body.utf8.count))])
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    static func withServer(closeOnRequest: Int?, _ body: (MCPHTTPConnection, URL, Accepted) async throws -> Void) async throws {
        let accepted = Accepted()
        let server = try await LoopbackListener { channel in
            accepted.add()
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false)
                try channel.pipeline.syncOperations.addHandler(Answerer(closeOnRequest: closeOnRequest))
            }
        }
        let url = URL(string: "http://127.0.0.1:\(server.port)/mcp")!
        let origin = try #require(MCPHTTPOrigin(url))
        // Idle connections wait long enough for a loaded host's slowest step between requests.
        let connection = MCPHTTPConnection(
            serverName: "s", origin: origin, headers: [:], connectTimeout: .seconds(10), keepAlive: .init(idleTimeout: .seconds(600)))
        do {
            try await body(connection, url, accepted)
        } catch {
            await server.close()
            throw error
        }
        await server.close()
    }

    /// One POST, its answer read whole; the status.
    static func post(_ connection: MCPHTTPConnection, _ url: URL, replayable: Bool) async throws(MCPHTTPFailure) -> UInt {
        try await connection.execute(
            .POST, url, headers: [("Content-Type", "application/json")], body: Array("{}".utf8), deadline: .now() + .seconds(30),
            replayable: replayable
        ) { response, _ in
            _ = try? await response.body.collect(upTo: 1 << 16)
            return response.status.code
        }
    }

    @Test func aBurstOfCallsSharesOneConnection() async throws {
        try await Self.withServer(closeOnRequest: nil) { connection, url, accepted in
            for _ in 0..<5 {
                let status = try await Self.post(connection, url, replayable: false)
                #expect(status == 200)
            }
            #expect(accepted.value == 1)
        }
    }

    @Test func aReplayableMessageGoesAgainOnANewConnection() async throws {
        try await Self.withServer(closeOnRequest: 2) { connection, url, accepted in
            let first = try await Self.post(connection, url, replayable: true)
            // Sent on the kept connection, which the server closes: sent again on a new one.
            let second = try await Self.post(connection, url, replayable: true)
            #expect(first == 200 && second == 200)
            #expect(accepted.value == 2)
        }
    }

    @Test func aToolCallIsNotSentTwice() async throws {
        try await Self.withServer(closeOnRequest: 2) { connection, url, accepted in
            let first = try await Self.post(connection, url, replayable: false)
            #expect(first == 200)
            await #expect(throws: MCPHTTPFailure.self) { try await Self.post(connection, url, replayable: false) }
            #expect(accepted.value == 1)
        }
    }
}
