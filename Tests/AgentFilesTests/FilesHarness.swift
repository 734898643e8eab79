import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import Hummingbird
import Logging
import Testing

@testable import AgentFiles

/// A real agent HTTP server with the file module at `/api/v0`, on an ephemeral loopback port.
struct FilesHarness: Sendable {
    let client: RawHTTPClient
    let chatPaths: ChatPaths
    let directory: String
    /// The module's tool-call ledger, to wait until a request reached it.
    let ledger: ToolCallLedger

    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    func get(_ path: String, headers: [(String, String)] = []) async throws -> RawHTTPClient.Response {
        try await client.request("GET", "/api/v0/" + path, headers: headers)
    }

    func post(_ path: String, body: [UInt8], headers: [(String, String)] = []) async throws -> RawHTTPClient.Response {
        try await client.request("POST", "/api/v0/" + path, headers: headers, body: body)
    }

    func post(_ path: String, json: String, headers: [(String, String)] = []) async throws -> RawHTTPClient.Response {
        try await post(path, body: Array(json.utf8), headers: headers)
    }

    /// Percent-encodes a query value.
    static func q(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "/-._~"))) ?? value
    }

    func file(_ name: String) -> String { directory + "/" + name }
}

func withFilesServer(_ body: (FilesHarness) async throws -> Void) async throws {
    try await withFilesServer(listings: ListingCache(), body)
}

/// As ``withFilesServer(_:)`` with the listings kept for list-directory's pages given.
func withFilesServer(listings: ListingCache, _ body: (FilesHarness) async throws -> Void) async throws {
    let directory = NSTemporaryDirectory() + "agent-files-" + UUID().uuidString.prefix(8)
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let chatPaths = ChatPaths()
    let context = AgentContext.forTests(chatPaths: chatPaths, environment: ["HOME": directory], stateDirectory: directory)
    let module = FilesModule(context: context, agentStartedAt: .now - .seconds(10), listings: listings)
    try await withAgentServer([HTTPMount(module, at: "/api/v0")]) { port in
        try await body(FilesHarness(client: RawHTTPClient(port: port), chatPaths: chatPaths, directory: directory, ledger: module.ledger))
    }
}
