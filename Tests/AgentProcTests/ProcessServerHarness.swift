import AgentCore
import AgentHTTP
import AgentProc
import AgentTestSupport
import Foundation
import Hummingbird
import Logging
import NIOCore
import Testing

/// A real agent HTTP server on an ephemeral loopback port, with a real process manager.
struct Harness: Sendable {
    let client: RawHTTPClient
    let manager: ProcessManager
    var port: Int { client.port }

    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Starts `command`; returns its id (asserting 200).
    func start(
        _ command: String, workdir: String? = nil, env: [String: String]? = nil, background: Bool? = nil,
        chat: String? = nil
    ) async throws -> String {
        var body: [String: Any] = ["command": command]
        if let workdir { body["workdir"] = workdir }
        if let env { body["env"] = env }
        if let background { body["background"] = background }
        let data = try JSONSerialization.data(withJSONObject: body)
        // 60 s: 200 starts at once on a loaded 2-core host were seen to take over 30 s.
        let response = try await client.request(
            "POST", "/api/v0/processes/start", headers: chatHeaders(chat), body: Array(data), timeout: .seconds(60))
        try #require(response.status == 200, "start failed: \(response)")
        let json = try #require(jsonObject(response.body))
        #expect(json["started"] as? Bool == true)
        return try #require(json["id"] as? String)
    }

    func output(_ id: String, wait: Bool = false, chat: String? = nil) async throws -> RawHTTPClient.Response {
        try await client.request(
            "GET", "/api/v0/processes/\(id)/output" + (wait ? "?wait=true" : ""), headers: chatHeaders(chat),
            timeout: .seconds(60))
    }

    /// Waits for exit and returns the output JSON (asserting 200 and `running: false`).
    func finalOutput(_ id: String, chat: String? = nil) async throws -> [String: Any] {
        let response = try await output(id, wait: true, chat: chat)
        try #require(response.status == 200, "output failed: \(response)")
        let json = try #require(jsonObject(response.body))
        try #require(json["running"] as? Bool == false, "still running: \(response)")
        return json
    }

    func list(chat: String? = nil) async throws -> [[String: Any]] {
        let response = try await client.request("GET", "/api/v0/processes/list", headers: chatHeaders(chat))
        try #require(response.status == 200, "list failed: \(response)")
        let json = try #require(jsonObject(response.body))
        return try #require(json["processes"] as? [[String: Any]])
    }

    func signal(_ id: String, _ body: String, chat: String? = nil) async throws -> RawHTTPClient.Response {
        try await client.request("POST", "/api/v0/processes/\(id)/signal", headers: chatHeaders(chat), json: body)
    }

    func chatHeaders(_ chat: String?) -> [(String, String)] {
        chat.map { [("Coder-Chat-Id", $0)] } ?? []
    }
}

/// Runs `body` against a fresh server; shuts everything down afterwards.
func withProcessServer(
    configure: (inout ProcessManager.Configuration) -> Void = { _ in },
    logger: Logger = Harness.quiet,
    _ body: (Harness) async throws -> Void
) async throws {
    var configuration = ProcessManager.Configuration(priority: .unchanged)
    configuration.shutdownGrace = .seconds(2)
    configure(&configuration)
    let manager = try ProcessManager(configuration: configuration, logger: logger)
    let (ports, portSink) = AsyncStream<Int>.makeStream()
    let app = AgentHTTPServer.makeApplication(
        address: BindTarget(kind: .tcp(host: "127.0.0.1", port: 0)),
        mounts: [HTTPMount(ProcessModule(manager: manager), at: "/api/v0/processes")],
        headTimeout: testServerHeadTimeout,
        logger: Harness.quiet
    ) { channel in
        portSink.yield(channel.localAddress?.port ?? 0)
        portSink.finish()
    }
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.run() }
        // The manager's service starts its reactor thread.
        group.addTask { try await manager.run() }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        let harness = Harness(client: RawHTTPClient(port: port), manager: manager)
        do {
            try await body(harness)
        } catch {
            await manager.shutdown()
            group.cancelAll()
            throw error
        }
        await manager.shutdown()
        group.cancelAll()
    }
}

/// A fresh temporary directory.
func makeTempDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "agent-test-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
