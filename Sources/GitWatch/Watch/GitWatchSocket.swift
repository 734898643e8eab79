import AgentCore
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOWebSocket
import Synchronization

/// `GET /api/v0/git/watch?chat_id=`: scans the chat's repositories on
/// `refresh`, when the chat touches a path, when inotify sees a change in a watched
/// repository, and on the fallback poll; at most one scan that reads repositories per
/// cooldown (a check that finds no event since the last scan reads nothing), requests
/// arriving meanwhile fold into one; each finished scan sends `changes` (the changed
/// repositories, or none as a heartbeat) while anything is watched.
struct GitWatchSocket: Sendable {
    let chatPaths: ChatPaths
    let sessions: WatchSessions
    let watcher: TreeWatcher
    let timing: WatchTiming
    /// What every socket shares of each repository (one poll per repository).
    let cache = RepositoryCache()
    static let maxMessageBytes = 4 << 20

    func route() -> AgentWebSocketRoute {
        AgentWebSocketRoute(path: "watch") { _ throws(APIError) in
        } handler: { inbound, outbound, context in
            // Missing or not a UUID: no chat is linked, the socket stays open (as the reference).
            let chat = GoQuery(context.request).get("chat_id").flatMap(ChatIdentity.canonicalUUID)
            try await serve(chat: chat, inbound: inbound, outbound: outbound)
        }
    }

    func serve(chat: String?, inbound: WebSocketInbound, outbound: WebSocketOutbound) async throws {
        let wake = WorkSignal()
        let requests = ScanRequests()
        let scanner = WatchScanner(watcher: watcher, signal: wake, cache: cache, sharedFreshness: timing.poll / 2)
        let (sessionID, closing) = sessions.register()
        defer { sessions.remove(sessionID) }
        let encoder = JSONEncoder()
        let timing = self.timing
        // Subscribe first, then read what is there, so nothing arriving between is lost.
        let arrivals = chat.map { chatPaths.arrivalsIfRoom(chat: $0) }
        if case .some(.none) = arrivals {
            // The chat's watcher limit: said in the close frame, not a bare 1000.
            try await outbound.close(
                .policyViolation, reason: "too many watch sockets for this chat (at most \(ChatPaths.maxSubscribersPerChat))")
            return
        }
        if let chat { await scanner.resolve(chatPaths.paths(chat: chat)) }
        wake.notify()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await message in inbound.messages(maxSize: Self.maxMessageBytes) {
                    guard case .text(let text) = message else { continue }
                    let type = (try? JSONValue.parseFirst(Array(text.utf8)))?["type"]?.stringValue
                    if type == "refresh" {
                        requests.requestFingerprint()
                        wake.notify()
                    } else {
                        let error = String(decoding: try encoder.encode(ErrorMessage(message: "unknown message type")), as: UTF8.self)
                        try await outbound.write(.text(error))
                    }
                }
            }
            if let arrivals = arrivals ?? nil, let chat {
                group.addTask {
                    for await _ in arrivals {
                        await scanner.resolve(chatPaths.paths(chat: chat))
                        wake.notify()
                    }
                    // The stream ends when the bounded path store forgot the chat (evicted
                    // for newer chats): the socket closes and says so.
                    if !Task.isCancelled {
                        try await outbound.close(
                            .unknown(1013), reason: "chat evicted from the agent's path store (at most \(chatPaths.maxChats) chats); reconnect")
                    }
                }
            }
            group.addTask {
                // The fallback tick, skipped right after a scan; now and then a fingerprint check.
                var lastVerify = ContinuousClock.now
                while true {
                    try await Task.sleep(for: timing.poll)
                    if ContinuousClock.now - lastVerify >= timing.verify {
                        lastVerify = .now
                        requests.requestFingerprint()
                    } else if requests.scannedWithin(timing.poll / 2) {
                        continue
                    }
                    wake.notify()
                }
            }
            group.addTask {
                var lastScan: ContinuousClock.Instant?
                while !Task.isCancelled {
                    await wake.wait()
                    if let lastScan, ContinuousClock.now - lastScan < timing.cooldown {
                        try await Task.sleep(until: lastScan + timing.cooldown, clock: .continuous)
                    }
                    guard let result = await scanner.scan(requests.takeCheck()) else { continue }
                    if result.readRepositories {
                        lastScan = .now
                        requests.scanEnded()
                    }
                    let frames = try ChangesMessage.frames(scannedAt: Date().formatted(.iso8601), changed: result.changed) {
                        [UInt8](try encoder.encode($0))
                    }
                    for frame in frames { try await outbound.write(.text(String(decoding: frame, as: UTF8.self))) }
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

/// What the next scan of one socket should do, and when its last scan ended.
final class ScanRequests: Sendable {
    private struct State {
        var fingerprint = false
        var lastScanEnded: ContinuousClock.Instant?
    }
    private let state = Mutex(State())

    func requestFingerprint() { state.withLock { $0.fingerprint = true } }

    /// The check the next scan makes; a pending fingerprint request is consumed.
    func takeCheck() -> WatchScanner.Check {
        state.withLock { s in
            defer { s.fingerprint = false }
            return s.fingerprint ? .fingerprint : .events
        }
    }

    func scanEnded() { state.withLock { $0.lastScanEnded = .now } }

    func scannedWithin(_ duration: Duration) -> Bool {
        state.withLock { s in s.lastScanEnded.map { ContinuousClock.now - $0 < duration } ?? false }
    }
}
