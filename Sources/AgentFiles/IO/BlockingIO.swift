import AgentCore
import AgentHTTP
import HTTPTypes

/// Runs the file API's blocking calls on its own threads (never on an event loop, Swift's
/// cooperative pool or a pool git watching shares): a slow disk, a huge file or a stuck
/// network mount stops at most these threads, and a client that leaves cancels its work.
enum BlockingIO {
    /// Threads for file work and how many requests may wait for one: beyond that a
    /// request is refused with 503 at once instead of queueing without bound.
    static let threads = 4
    static let maxQueued = 256
    static let pool = BlockingPool(name: "files", threads: threads, maxQueued: maxQueued)

    /// Runs `body` with a token cancelled when the request's client goes away or, with a
    /// `budget`, when that much time has passed.
    static func run<T: Sendable>(
        _ context: AgentRequestContext?, budget: Duration? = nil, _ body: @escaping @Sendable (CancelToken) throws -> T
    ) async throws -> T {
        let token = budget.map { CancelToken(budget: $0) } ?? CancelToken()
        let registration = context?.clientGone.whenGone { token.cancel() }
        defer { registration?.cancel() }
        do {
            return try await pool.run(token: token, body)
        } catch let overloaded as BlockingPool.Overloaded {
            throw APIError(.serviceUnavailable, "The file API is busy.", detail: overloaded.description)
        } catch let stopped as CancelToken.Stopped {
            throw stopped.apiError(budget)
        } catch is CancellationError {
            throw token.stopReason == .deadline
                ? CancelToken.Stopped(reason: .deadline).apiError(budget) : APIError(.serviceUnavailable, "The request was cancelled.")
        }
    }

    /// As ``run(_:budget:_:)`` without a client to watch.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await run(nil) { _ in try body() }
    }
}

extension CancelToken.Stopped {
    func apiError(_ budget: Duration?) -> APIError {
        switch reason {
        case .deadline:
            APIError(.unprocessableContent, "The request took too long.", detail: "stopped after \(budget.map { "\($0)" } ?? "its deadline"); try a smaller file or edit")
        case .cancelled:
            APIError(.serviceUnavailable, "The request was cancelled.")
        }
    }
}
