import AgentCore
import Synchronization

/// One budget of bytes for what every MCP server makes the agent hold at once: unfinished
/// messages, input queued for a server, answers being read. Holders charge the capacity of
/// their buffers (real memory, not payload bytes) and give it back when they shrink; growth
/// past ``limit`` is refused, and the holder fails its own session or send.
///
/// After a burst (use above a quarter of the limit, then down to an eighth) the heap is
/// trimmed (``FreeMemory``), so the pages the burst took go back to the system.
public final class MCPMemoryBudget: Sendable {
    public let limit: Int
    private let used = Atomic<Int>(0)
    private let highest = Atomic<Int>(0)
    /// Set when use passed the high mark since the last release.
    private let burst = Atomic<Bool>(false)
    private let releaseMemory: @Sendable () -> Void
    private let observe: @Sendable (_ inUse: Int) -> Void

    /// `observe` hears the bytes in use after each change (a gauge).
    public init(
        limit: Int = MCPLimits.memoryBudgetBytes, releaseMemory: @escaping @Sendable () -> Void = { FreeMemory.releaseSoon() },
        observe: @escaping @Sendable (_ inUse: Int) -> Void = { _ in }
    ) {
        self.limit = limit
        self.releaseMemory = releaseMemory
        self.observe = observe
    }

    /// Bytes charged now.
    public var inUse: Int { used.load(ordering: .relaxed) }
    /// The most ever charged at once.
    public var peak: Int { highest.load(ordering: .relaxed) }

    /// Moves a holder's charge from `old` to `new` bytes: a shrink always, a growth only
    /// when the budget has room (false, and nothing charged, otherwise).
    public func recharge(from old: Int, to new: Int) -> Bool {
        let delta = new - old
        if delta == 0 { return true }
        if delta < 0 {
            let now = used.subtract(-delta, ordering: .relaxed).newValue
            observe(now)
            if now <= limit / 8, burst.exchange(false, ordering: .relaxed) { releaseMemory() }
            return true
        }
        var current = used.load(ordering: .relaxed)
        while true {
            guard current + delta <= limit else { return false }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + delta, ordering: .relaxed)
            if exchanged { break }
            current = original
        }
        let now = current + delta
        observe(now)
        highest.max(now, ordering: .relaxed)
        if now > limit / 4 { burst.store(true, ordering: .relaxed) }
        return true
    }

    /// The refusal's text: `what` is what could not grow.
    public func refusal(_ what: String, bytes: Int) -> String {
        "\(what) of \(bytes) bytes does not fit: the MCP servers' buffers are full (\(limit >> 20) MiB for all servers)"
    }
}

/// What one holder has charged to an ``MCPMemoryBudget``: a buffer's capacity, updated as it
/// changes.
public struct MCPMemoryCharge: Sendable {
    public let budget: MCPMemoryBudget
    public private(set) var bytes = 0

    public init(_ budget: MCPMemoryBudget) { self.budget = budget }

    /// Charges `capacity` instead of what was charged; false when the budget refuses it.
    public mutating func update(_ capacity: Int) -> Bool {
        guard budget.recharge(from: bytes, to: capacity) else { return false }
        bytes = capacity
        return true
    }

    /// Gives everything back.
    public mutating func release() {
        _ = budget.recharge(from: bytes, to: 0)
        bytes = 0
    }
}
