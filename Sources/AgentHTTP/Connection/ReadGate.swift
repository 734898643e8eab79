/// Whether the connection reads, and how much waits for its turn. Reads stop while a
/// pipelined request waits behind the one being answered (as NIO's
/// `HTTPServerPipelineHandler` withholds `read()`), while a streamed body's reader is full,
/// and while an answer's bytes wait for the socket.
struct ReadGate: Sendable, Equatable {
    /// Most request parts (heads included) decoded while a request waits its turn; beyond it
    /// the connection closes. Reads stop at the first waiting head, so what waits is what the
    /// reads in progress held: for a well-behaved client a few parts.
    static var maxQueuedParts: Int { 256 }

    private var forPipeline = false
    private var forBody = false
    /// Answers wait for the socket to take them (the client reads nothing): no more requests
    /// are read until it does, so answers made at once cannot pile up unsent.
    private var forWrite = false
    /// Parts decoded since reads stopped for pipelining (an upper bound on what waits).
    private var queuedParts = 0

    var isPaused: Bool { forPipeline || forBody || forWrite }

    /// A head came while an earlier response is under way: reads stop.
    mutating func pauseForPipeline() {
        forPipeline = true
    }

    /// A part that waits for its turn; false once more than ``maxQueuedParts`` wait.
    mutating func queue() -> Bool {
        queuedParts += 1
        return queuedParts <= Self.maxQueuedParts
    }

    /// No request waits any more: true if reads resume.
    mutating func pipelineDrained() -> Bool {
        guard forPipeline else { return false }
        forPipeline = false
        queuedParts = 0
        return !isPaused
    }

    /// Answers wait for the socket (`blocked`) or it takes data again: true if reads resume.
    mutating func output(blocked: Bool) -> Bool {
        let was = isPaused
        forWrite = blocked
        return was && !isPaused
    }

    /// The body's reader is full (`stop`) or wants more: true if reads resume.
    mutating func body(stop: Bool) -> Bool {
        let was = isPaused
        forBody = stop
        return was && !isPaused
    }

    /// Nothing more is served: input is read and dropped. True if reads resume.
    mutating func open() -> Bool {
        let was = isPaused
        self = ReadGate()
        return was
    }
}
