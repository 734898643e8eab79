import AgentCore
import AgentProto
import Logging
import SwiftProtobuf

/// `PushContextState` on each connected session: waits for the first snapshot (version > 0,
/// after the readiness gate), pushes it with `initial` set, then pushes each newer one whose
/// content differs from the last one this session delivered (snapshots coalesce: only the
/// newest unread is kept). A failed push is retried with the same request after 250 ms,
/// doubling to 30 s; `Unimplemented` ends the push for this session (the control plane does
/// not take context); `accepted=false` is not retried.
struct ContextPushParticipant: UpwardParticipant {
    static let rpc = DRPCMethodPath.agent("PushContextState")
    /// A failed push is retried after 250 ms, doubling to 30 s.
    static let retry = Backoff(initial: .milliseconds(250), maximum: .seconds(30), jitter: .none)

    let manager: ContextManager
    let redactor: @Sendable () -> ContextRedactor
    let metrics: ContextMetrics
    let logger: Logger

    var name: String { "chat context push" }

    func run(on session: any UpwardSession) async throws {
        var initial = true
        var delivered: ContextSnapshot?
        for await snapshot in manager.snapshots() {
            if let delivered, Self.sameContent(delivered, snapshot) { continue }
            let request = ContextPushRequest.make(snapshot, initial: initial, redactor: redactor())
            let bytes = try request.serializedBytes() as [UInt8]
            var failures = 0
            while true {
                do {
                    let answer = try await session.unary(Self.rpc, request: bytes)
                    let accepted = (try? Coder_Agent_V2_PushContextStateResponse(serializedBytes: answer))?.accepted ?? false
                    metrics.push(accepted ? "accepted" : "not_accepted")
                    logger.debug("context pushed", metadata: ["version": "\(snapshot.version)", "accepted": "\(accepted)"])
                    break
                } catch {
                    switch error.kind {
                    case .unsupported:
                        metrics.push("unimplemented")
                        logger.info("the control plane does not take the chat context; not pushing on this session")
                        return
                    case .sessionEnded, .cancelled:
                        throw error
                    default:
                        metrics.push("error")
                        failures += 1
                        let wait = Self.retry.delay(afterFailures: failures)
                        logger.warning("context push failed; retrying", metadata: ["error": "\(error)", "retry_in": "\(wait)"])
                        try await Task.sleep(for: wait)
                    }
                }
            }
            initial = false
            delivered = snapshot
        }
    }

    /// Everything but the version.
    static func sameContent(_ a: ContextSnapshot, _ b: ContextSnapshot) -> Bool {
        a.aggregateHash == b.aggregateHash && a.snapshotError == b.snapshotError && a.resources == b.resources
    }
}
