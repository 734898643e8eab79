import AgentCore
import AgentHTTP
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import NIOCore
import NIOWebSocket


/// `GET /api/v0/git/watch?chat_id=` (spec git-watch §1): scans the chat's repositories on
/// `refresh`, when the chat touches a path, and every ``pollInterval``; at most one scan per
/// ``cooldown``; each finished scan sends `changes` (the changed repositories, or none as a
/// heartbeat) while anything is watched.
struct GitWatchSocket: Sendable {
    let chatPaths: ChatPaths
    let sessions: WatchSessions
    static let pollInterval: Duration = .seconds(5)
    static let cooldown: Duration = .seconds(1)
    static let maxMessageBytes = 4 << 20

    func route() -> AgentWebSocketRoute {
        AgentWebSocketRoute(path: "watch") { _ throws(APIError) in } handler: { inbound, outbound, context in
            let chat = context.request.uri.queryParameters.get("chat_id").flatMap(ChatIdentity.canonicalUUID)
            try await serve(chat: chat, inbound: inbound, outbound: outbound)
        }
    }

    func serve(chat: String?, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async throws {
        let scanner = WatchScanner()
        let wake = WorkSignal()
        let (sessionID, closing) = sessions.register()
        defer { sessions.remove(sessionID) }
        let encoder = JSONEncoder()
        // Subscribe first, then read what is there, so nothing arriving between is lost.
        let arrivals = chat.map { chatPaths.arrivals(chat: $0) }
        if let chat { await scanner.resolve(chatPaths.paths(chat: chat)) }
        wake.notify()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await message in inbound.messages(maxSize: Self.maxMessageBytes) {
                    guard case .text(let text) = message else { continue }
                    let type = (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["type"] as? String
                    if type == "refresh" {
                        wake.notify()
                    } else {
                        let error = String(decoding: try encoder.encode(ErrorMessage(message: "unknown message type")), as: UTF8.self)
                        try await outbound.write(.text(error))
                    }
                }
            }
            if let arrivals, let chat {
                group.addTask {
                    for await _ in arrivals {
                        await scanner.resolve(chatPaths.paths(chat: chat))
                        wake.notify()
                    }
                }
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: Self.pollInterval)
                    wake.notify()
                }
            }
            group.addTask {
                var lastScan: ContinuousClock.Instant?
                while !Task.isCancelled {
                    await wake.wait()
                    if let lastScan, ContinuousClock.now - lastScan < Self.cooldown {
                        try await Task.sleep(until: lastScan + Self.cooldown, clock: .continuous)
                    }
                    guard let changed = await scanner.scan() else { continue }
                    lastScan = .now
                    let message = ChangesMessage(
                        scannedAt: Date().formatted(.iso8601), repositories: changed.isEmpty ? nil : changed)
                    try await outbound.write(.text(String(decoding: try encoder.encode(message), as: UTF8.self)))
                }
            }
            group.addTask {
                // The agent is shutting down: GoingAway, as the reference closes.
                await closing.wait()
                if !Task.isCancelled { try await outbound.close(.goingAway, reason: "agent shutting down") }
            }
            // The reader ends when the client closes (or after our close); then everything stops.
            try await group.next()
            group.cancelAll()
        }
    }
}
