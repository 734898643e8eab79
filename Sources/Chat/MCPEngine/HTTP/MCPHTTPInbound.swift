import AgentCore
import Synchronization

/// One HTTP server's reading: the rates of ``MCPInboundLimiter`` (a reader that is ahead
/// waits before its next chunk, so a flooding server waits on its TCP window) and the shared
/// ``MCPMemoryBudget`` that the buffers of its answers are charged to.
final class MCPHTTPInbound: Sendable {
    let budget: MCPMemoryBudget
    private let limiter: Mutex<MCPInboundLimiter>

    init(budget: MCPMemoryBudget) {
        self.budget = budget
        limiter = Mutex(MCPInboundLimiter(now: .now))
    }

    /// Spends `count` bytes just read; waits until reading may go on (or the task is
    /// cancelled).
    func pace(_ count: Int) async {
        let resume = limiter.withLock { l -> ContinuousClock.Instant? in
            let now = ContinuousClock.now
            l.read(count, now: now)
            return l.mayRead(now: now) ? nil : l.readyAt(now: now)
        }
        if let resume { try? await Task.sleep(until: resume) }
    }

    /// Whether `message` may be handled (see ``MCPInboundLimiter/admit(_:now:)``).
    func admit(_ message: JSONRPCMessage) -> Bool {
        let admitted = limiter.withLock { $0.admit(message, now: .now) }
        if !admitted { MCPFlowMetrics.droppedUnsolicited() }
        return admitted
    }
}
