import NIOCore

/// The state of one tunnel TCP connection seen as a NIO channel, without lwIP and without
/// the pipeline: bytes and FIN from the peer in, reads asked for, writes, flushes and closes
/// from the pipeline; out come the events to fire and what to tell lwIP. ``TunnelChannel``
/// carries them out on lwIP's loop; tests drive it directly.
///
/// Back pressure: bytes from the peer are acknowledged to lwIP (`tcp_recved`, which opens
/// the window again) only when they are handed to the pipeline, and they are handed over
/// only on a read (``read()``, or every time with `autoRead`); so a pipeline that does not
/// read closes the peer's window, and what waits here is at most the window (64 KiB).
/// Toward the peer, writes wait here while lwIP's send buffer is full; the channel turns
/// unwritable above ``highWaterMark`` bytes waiting and writable again below
/// ``lowWaterMark``.
public struct TunnelChannelCore {
    /// Bytes waiting for lwIP's send buffer beyond which the channel is not writable.
    public static let highWaterMark = 64 * 1024
    /// Bytes waiting below which an unwritable channel is writable again.
    public static let lowWaterMark = 32 * 1024

    /// Where the connection is.
    public enum State: Equatable, Sendable {
        /// Accepted; the pipeline is being set up (nothing is delivered yet).
        case accepted
        /// Active: events flow.
        case active
        /// Closed (by either side); nothing flows any more.
        case closed
    }

    /// One thing to do for the inbound side, in order.
    public enum InboundEvent {
        /// Acknowledge `count` bytes to lwIP, then fire `channelRead` with the buffer.
        case read(ByteBuffer)
        /// Fire `channelReadComplete`.
        case readComplete
        /// Fire `ChannelEvent.inputClosed` (the peer's FIN, remote half-closure allowed).
        case inputClosed
        /// The peer's FIN without remote half-closure: close the channel.
        case close
    }

    /// What a close or a failure leaves to do.
    public struct Closing {
        /// Writes that never reached lwIP: fail them.
        public var failedWrites: [EventLoopPromise<Void>]
        /// Bytes taken from lwIP but never handed to the pipeline: acknowledge them before
        /// closing, so lwIP ends with FIN, not RST.
        public var unacknowledged: Int
        /// Whether the channel had been active (fire `channelInactive`).
        public var wasActive: Bool
    }

    /// What handing writes to lwIP did.
    public struct Drained {
        /// Writes now wholly in lwIP: succeed them.
        public var completed: [EventLoopPromise<Void>] = []
        /// The new writability, when it changed.
        public var writabilityChanged: Bool?
        /// Send FIN now (every write before the output close is in lwIP); then succeed
        /// `outputClosePromise`.
        public var shutdownOutput = false
        public var outputClosePromise: EventLoopPromise<Void>?
    }

    private struct PendingWrite {
        var buffer: ByteBuffer
        var promise: EventLoopPromise<Void>?
    }

    public private(set) var state = State.accepted
    public var autoRead = true
    public var allowRemoteHalfClosure = false
    public private(set) var isWritable = true

    private var inbound = ByteBuffer()
    private var readPending = false
    private var readCompleteDue = false
    private var peerFinished = false
    private var inputClosed = false

    /// Flushed writes first (`flushedCount` of them), then unflushed ones.
    private var writes = CircularBuffer<PendingWrite>(initialCapacity: 4)
    private var flushedCount = 0
    private var waitingBytes = 0
    private var outputClosing: EventLoopPromise<Void>??
    public private(set) var outputClosed = false

    public init() {}

    /// Bytes from the peer held and not yet handed to the pipeline.
    public var heldBytes: Int { inbound.readableBytes }
    /// Whether a read would fire something now (bytes held, or the peer's FIN not yet told).
    public var hasDeliverable: Bool {
        state == .active && (inbound.readableBytes > 0 || (peerFinished && !inputClosed))
    }
    /// Bytes written and not yet in lwIP.
    public var bytesWaiting: Int { waitingBytes }

    // MARK: inbound

    /// The pipeline is set up: events flow, and with `autoRead` a read is pending.
    public mutating func activate() {
        guard state == .accepted else { return }
        state = .active
        if autoRead { readPending = true }
    }

    /// Bytes from the peer (lwIP's receive callback). False when closed (lwIP keeps them).
    public mutating func received(_ bytes: inout ByteBuffer) -> Bool {
        guard state != .closed, !peerFinished else { return false }
        inbound.writeBuffer(&bytes)
        return true
    }

    /// The peer's FIN (after its last byte).
    public mutating func receivedFIN() {
        peerFinished = true
    }

    /// The pipeline asks for a read.
    public mutating func read() {
        guard state != .closed else { return }
        readPending = true
    }

    /// The next inbound event to fire, if any; call until nil (the pipeline may call back in
    /// between).
    public mutating func nextInbound() -> InboundEvent? {
        guard state == .active else { return nil }
        if readCompleteDue {
            readCompleteDue = false
            if autoRead { readPending = true }
            return .readComplete
        }
        guard readPending else { return nil }
        if inbound.readableBytes > 0 {
            readPending = false
            readCompleteDue = true
            let bytes = inbound
            inbound = ByteBuffer()
            return .read(bytes)
        }
        if peerFinished, !inputClosed {
            inputClosed = true
            return allowRemoteHalfClosure ? .inputClosed : .close
        }
        return nil
    }

    // MARK: outbound

    /// A write from the pipeline; returns the promise to fail (with
    /// `ChannelError.outputClosed` or `.ioOnClosedChannel`) when it cannot be taken, and the
    /// writability when it changed.
    public mutating func write(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) -> (refused: Bool, writabilityChanged: Bool?) {
        guard state != .closed, !outputClosed, outputClosing == nil else { return (true, nil) }
        writes.append(PendingWrite(buffer: buffer, promise: promise))
        waitingBytes += buffer.readableBytes
        if isWritable, waitingBytes > Self.highWaterMark {
            isWritable = false
            return (false, false)
        }
        return (false, nil)
    }

    /// Marks every write so far as flushed.
    public mutating func flush() {
        flushedCount = writes.count
    }

    /// Hands flushed writes to lwIP in order: `send` takes bytes and returns how many lwIP
    /// queued (fewer when its send buffer is full; the rest waits for ``drain(into:)`` after
    /// lwIP's `sent`).
    public mutating func drain(into send: (ByteBuffer) -> Int) -> Drained {
        var result = Drained()
        guard state == .active || state == .accepted else { return result }
        while flushedCount > 0 {
            var head = writes[writes.startIndex]
            if head.buffer.readableBytes > 0 {
                let taken = send(head.buffer)
                head.buffer.moveReaderIndex(forwardBy: taken)
                waitingBytes -= taken
                if head.buffer.readableBytes > 0 {
                    writes[writes.startIndex] = head
                    break
                }
            }
            writes.removeFirst()
            flushedCount -= 1
            if let promise = head.promise { result.completed.append(promise) }
        }
        if !isWritable, waitingBytes < Self.lowWaterMark {
            isWritable = true
            result.writabilityChanged = true
        }
        if flushedCount == 0, let closing = outputClosing, !outputClosed {
            outputClosed = true
            outputClosing = nil
            result.shutdownOutput = true
            result.outputClosePromise = closing
        }
        return result
    }

    /// `close(mode: .output)`: FIN once the flushed writes are in lwIP; writes not flushed
    /// yet fail. Returns those, or nil when the output is already closed (or closing): the
    /// promise then fails.
    public mutating func closeOutput(promise: EventLoopPromise<Void>?) -> [EventLoopPromise<Void>]? {
        guard state != .closed, !outputClosed, outputClosing == nil else { return nil }
        var failed: [EventLoopPromise<Void>] = []
        while writes.count > flushedCount {
            let dropped = writes.removeLast()
            waitingBytes -= dropped.buffer.readableBytes
            if let promise = dropped.promise { failed.append(promise) }
        }
        outputClosing = .some(promise)
        return failed
    }

    /// Closes (the pipeline's `close(mode: .all)`, the peer's reset, a failure); nil when
    /// already closed.
    public mutating func close() -> Closing? {
        guard state != .closed else { return nil }
        let wasActive = state == .active
        state = .closed
        var failed = writes.compactMap(\.promise)
        if let closing = outputClosing, let promise = closing { failed.append(promise) }
        writes.removeAll()
        flushedCount = 0
        waitingBytes = 0
        outputClosing = nil
        let held = inbound.readableBytes
        inbound = ByteBuffer()
        readPending = false
        readCompleteDue = false
        return Closing(failedWrites: failed, unacknowledged: held, wasActive: wasActive)
    }
}
