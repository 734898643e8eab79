import Synchronization

/// A thread-safe ``HeadTail``: any number of writers and readers at once.
///
/// Memory is bounded by `headCapacity + tailCapacity` bytes whatever is written.
public final class HeadTailBuffer: Sendable {
    private let state: Mutex<HeadTail>

    public init(
        headCapacity: Int = HeadTail.defaultHeadCapacity,
        tailCapacity: Int = HeadTail.defaultTailCapacity,
        maxLineLength: Int = HeadTail.defaultMaxLineLength
    ) {
        state = Mutex(HeadTail(headCapacity: headCapacity, tailCapacity: tailCapacity, maxLineLength: maxLineLength))
    }

    /// Appends `bytes` and returns how many were accepted (always all of them).
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Int {
        bytes.withUnsafeBytes { raw in state.withLock { $0.write(raw) } }
        return bytes.count
    }

    /// Appends raw bytes; the caller keeps ownership of the memory.
    public func write(_ raw: UnsafeRawBufferPointer) {
        state.withLock { $0.write(raw) }
    }

    /// The rendered output and truncation metadata (spec §3).
    public func output() -> (bytes: [UInt8], truncation: OutputTruncation?) {
        state.withLock { $0.output() }
    }

    /// A copy of the retained bytes (head then tail), without markers.
    public func bytes() -> [UInt8] {
        state.withLock { $0.headBytes + $0.tailBytes }
    }

    /// Retained byte count.
    public var count: Int { state.withLock { $0.retainedCount } }

    /// Every byte ever written.
    public var totalWritten: Int { state.withLock { $0.totalWritten } }

    /// Forgets everything.
    public func reset() {
        state.withLock { $0.reset() }
    }
}
