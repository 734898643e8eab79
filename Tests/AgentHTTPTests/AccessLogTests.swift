import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

/// The HTTP API logs one line per request at info: method, path without its query, status,
/// duration and bytes; never a query string or a header. A flag turns it off.
@Suite(.timeLimit(.minutes(2)))
struct AccessLogTests {
    static func withServer(accessLog: Bool, _ body: (Int, CapturedLog) async throws -> Void) async throws {
        let captured = CapturedLog(level: .info)
        let (ports, portSink) = AsyncStream<Int>.makeStream()
        let app = AgentHTTPServer.makeApplication(
            address: BindTarget(kind: .tcp(host: "127.0.0.1", port: 0)), mounts: [HTTPMount(GuardTestRoutes(), at: "/")],
            accessLog: accessLog, logger: captured.logger
        ) { channel in
            portSink.yield(channel.localAddress?.port ?? 0)
            portSink.finish()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            defer { group.cancelAll() }
            try await body(port, captured)
        }
    }

    @Test func oneLinePerRequestWithStatusAndNoQuery() async throws {
        try await Self.withServer(accessLog: true) { port, captured in
            let client = RawHTTPClient(port: port)
            let health = try await client.request("GET", "/healthz?token=s3cret&path=/home/me", headers: [("Authorization", "Bearer hidden")])
            #expect(health.status == 200)
            let missing = try await client.request("GET", "/no/such?x=1")
            #expect(missing.status == 404)
            let echo = try await client.request("POST", "/echo", json: #"{"command":"hi"}"#)
            #expect(echo.status == 200)
            #expect(await eventually { captured.requests.count == 3 }, "\(captured.all)")
            let lines = captured.requests
            #expect(lines.map { $0["method"] } == ["GET", "GET", "POST"])
            #expect(lines.map { $0["path"] } == ["/healthz", "/no/such", "/echo"])
            #expect(lines.map { $0["status"] } == ["200", "404", "200"])
            #expect(lines[0]["bytes"] == "\(health.body.count)")
            #expect(lines[2]["bytes"] == "\(echo.body.count)")
            for line in lines {
                #expect(line["duration_ms"].flatMap(Double.init) != nil, "\(line)")
            }
            let everything = "\(captured.all)"
            for secret in ["s3cret", "token", "Bearer", "hidden", "x=1"] {
                #expect(!everything.contains(secret), "\(secret) logged: \(everything)")
            }
        }
    }

    @Test func aWebSocketSessionIsOneLineWhenItEnds() async throws {
        try await Self.withServer(accessLog: true) { port, captured in
            try await TestWebSocket.withConnection(port: port, path: "/ws/one?key=abc") { ws in
                #expect(try await ws.next() == .text("hello"))
                try await ws.close()
                _ = try await ws.next()
            }
            #expect(await eventually { captured.requests.count == 1 }, "\(captured.all)")
            #expect(captured.requests.first?["status"] == "101")
            #expect(captured.requests.first?["path"] == "/ws/one")
        }
    }

    @Test func theFlagTurnsItOff() async throws {
        try await Self.withServer(accessLog: false) { port, captured in
            let health = try await RawHTTPClient(port: port).request("GET", "/healthz")
            #expect(health.status == 200)
            let again = try await RawHTTPClient(port: port).request("GET", "/healthz")
            #expect(again.status == 200)
            #expect(captured.requests.isEmpty, "\(captured.all)")
        }
    }

    /// `--access-log` and its environment twin, resolved like every flag (the flag wins).
    @Test func theOptionResolvesFromFlagAndEnvironment() throws {
        func resolve(_ flag: String?, _ environment: [String: String] = [:]) throws -> HTTPOptions.Configuration {
            var options = HTTPOptions()
            options.httpAddress = nil
            options.accessLog = flag
            return try options.resolve(Settings(environment: environment))
        }
        #expect(try resolve(nil).accessLog)
        #expect(try !resolve("false").accessLog)
        #expect(try !resolve(nil, ["CODER_AGENT_HTTP_ACCESS_LOG": "off"]).accessLog)
        #expect(try resolve("true", ["CODER_AGENT_HTTP_ACCESS_LOG": "off"]).accessLog)
        #expect(throws: ConfigurationError.self) { try resolve("maybe") }
    }
}

extension CapturedLog {
    /// The access log's lines: each request's metadata.
    var requests: [[String: String]] { all.filter { $0.message == "request" }.map(\.metadata) }
}
