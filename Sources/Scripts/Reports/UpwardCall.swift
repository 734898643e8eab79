import AgentCore
import SwiftProtobuf

/// A unary call upward with a deadline (the reference gives its reports 30 s): a call
/// still unanswered then is cancelled (its stream reset) and fails with ``TimedOut``.
enum UpwardCall {
    /// The reference's per-report timeout.
    static let defaultTimeout: Duration = .seconds(30)

    struct TimedOut: Error, CustomStringConvertible {
        let rpc: String
        let timeout: Duration
        var description: String { "\(rpc): no answer within \(timeout)" }
    }

    /// Sends `request` on `rpc` and returns the answer's bytes.
    static func unary(
        _ session: any UpwardSession, _ rpc: String, _ request: some SwiftProtobuf.Message & Sendable,
        timeout: Duration = defaultTimeout
    ) async throws -> [UInt8] {
        let bytes: [UInt8] = try request.serializedBytes()
        return try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            group.addTask { try await session.unary(rpc, request: bytes) }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let answer = first else { throw TimedOut(rpc: rpc, timeout: timeout) }
            return answer
        }
    }
}
