import CLwIPGlue
import NIOCore
import Synchronization

/// One tunnel connection forwarded to a local stream socket (127.0.0.1:<port>): bytes each
/// way, half-closes, resets, idle timeout. The local channel runs on lwIP's loop too.
///
/// Flow control: bytes from the peer are acknowledged to lwIP (`tcp_recved`, which opens
/// the window) only once written to the local socket, so what waits here is at most the
/// window (``receiveLimit``); the local socket is read only when lwIP has taken the last
/// read, so at most one read (``TunnelStackConfiguration/maxLocalRead``) waits for lwIP's
/// send buffer (after a local EOF NIO reads to the end at once: see
/// ``TunnelStackConfiguration``).
///
/// Order of data and FIN: the local EOF becomes `tcp_shutdown` (FIN) only once every byte
/// read before it was queued in lwIP; the peer's FIN (lwIP delivers it after its data)
/// becomes a local `shutdown(SHUT_WR)` only after the last write to the local socket
/// completed; the pcb is closed when both directions finished (or after the half-closed
/// timeout), and the local channel after its last write.
///
/// `@unchecked Sendable`: the mutable state is in two groups with one rule each. `core*`
/// properties are read and written only on lwIP's loop (inside ``LwIPCore/confined(_:)``
/// or an lwIP callback; ``LwIPCore/assertConfined()`` checks the entry points). `loop*`
/// properties only on ``eventLoop`` (the same loop; checked with
/// `eventLoop.preconditionInEventLoop()` at the entry points). The rest is immutable.
final class TunnelRelay: TunnelPCBOwner, @unchecked Sendable {
    let flow: TunnelFlow
    let eventLoop: any EventLoop
    private let stack: StackCore
    private let counters: TunnelCounters
    private let idleTimeout: TimeAmount?
    private let halfClosedTimeout: TimeAmount
    /// The most bytes from the peer held before the local side took them: lwIP's window
    /// (TCP_WND, 65535) never lets more arrive; beyond it lwIP keeps them (`ERR_MEM`).
    static let receiveLimit = 65535

    private var corePCB: OpaquePointer?
    private var coreLink: Unmanaged<PCBLink>?
    private var coreTowardLocal: ByteBuffer
    private var coreDrainScheduled = false
    private var corePeerFinished = false
    private var coreAwaitingSpace = false

    private var loopChannel: (any Channel)?
    private var loopStarted = false
    private var loopPending: ByteBuffer?
    private var loopLocalEOF = false
    private var loopLocalInactive = false
    private var loopFinSent = false
    private var loopOutputClosed = false
    private var loopLastWrite: EventLoopFuture<Void>?
    private var loopReading = false
    private var loopEnded = false
    private var loopLastActivity = NIODeadline.now()
    private var loopIdleTimer: Scheduled<Void>?

    init(
        flow: TunnelFlow, eventLoop: any EventLoop, stack: StackCore, counters: TunnelCounters, idleTimeout: TimeAmount?,
        halfClosedTimeout: TimeAmount
    ) {
        self.flow = flow
        self.eventLoop = eventLoop
        self.stack = stack
        self.counters = counters
        self.idleTimeout = idleTimeout
        self.halfClosedTimeout = halfClosedTimeout
        coreTowardLocal = ByteBuffer()
    }

    // MARK: lwIP side (core lock held)

    /// Takes `pcb`: its events come here; lwIP holds a reference until detached or failed.
    func coreAttach(_ pcb: OpaquePointer) {
        LwIPCore.assertConfined()
        corePCB = pcb
        coreLink = PCBLink.attach(pcb, to: self)
    }

    /// Detaches and closes (FIN) or aborts (RST) the pcb, if it is still ours.
    func coreRelease(reset: Bool) {
        LwIPCore.assertConfined()
        guard let pcb = corePCB else { return }
        corePCB = nil
        tl_pcb_detach(pcb)
        if reset { tl_pcb_abort(pcb) } else { tl_pcb_close(pcb) }
        coreLink?.release()
        coreLink = nil
    }

    func pcbReceive(_ data: OpaquePointer, length: Int) -> Bool {
        LwIPCore.assertConfined()
        guard coreTowardLocal.readableBytes + length <= Self.receiveLimit else { return false }
        coreTowardLocal.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { buffer in
            tl_data_copy(data, buffer.baseAddress, length, 0)
            return length
        }
        counters.bytesFromTunnel.increment(by: UInt64(length))
        coreScheduleDrain()
        return true
    }

    func pcbFinished() {
        LwIPCore.assertConfined()
        corePeerFinished = true
        coreScheduleDrain()
    }

    func pcbSent() {
        LwIPCore.assertConfined()
        guard coreAwaitingSpace else { return }
        coreAwaitingSpace = false
        eventLoop.execute { self.push() }
    }

    /// lwIP freed the pcb (peer reset, retransmissions exhausted, closed by both sides).
    func pcbFailed(error: Int32) {
        LwIPCore.assertConfined()
        guard corePCB != nil else { return }
        corePCB = nil
        coreLink?.release()
        coreLink = nil
        eventLoop.execute { self.end(reset: false) }
    }

    private func coreScheduleDrain() {
        guard !coreDrainScheduled else { return }
        coreDrainScheduled = true
        eventLoop.execute { self.drain() }
    }

    // MARK: local side (on eventLoop)

    /// The local channel is ready (its handler was added): start relaying.
    func start(channel: any Channel) {
        eventLoop.preconditionInEventLoop()
        guard !loopStarted, !loopEnded else { return }
        loopStarted = true
        loopChannel = channel
        touch()
        if let quietBound { armIdleTimer(at: loopLastActivity + quietBound) }
        push()
        drain()
    }

    /// A read from the local socket.
    func localRead(_ buffer: ByteBuffer) {
        eventLoop.preconditionInEventLoop()
        loopReading = false
        touch()
        if var pending = loopPending {
            var more = buffer
            pending.writeBuffer(&more)
            loopPending = pending
        } else {
            loopPending = buffer
        }
        push()
    }

    /// The local socket sent EOF (half-close): FIN to the peer after the pending bytes.
    func localInputClosed() {
        eventLoop.preconditionInEventLoop()
        loopLocalEOF = true
        push()
    }

    /// The local channel closed.
    func localInactive() {
        eventLoop.preconditionInEventLoop()
        loopLocalEOF = true
        loopLocalInactive = true
        loopReading = false
        push()
    }

    /// The local side failed (reset, write error): reset the peer.
    func localFailed() {
        eventLoop.preconditionInEventLoop()
        end(reset: true)
    }

    /// Hands pending local bytes to lwIP; then reads again, or sends FIN after EOF.
    private func push() {
        guard !loopEnded else { return }
        if var pending = loopPending, pending.readableBytes > 0 {
            let written: Int? = LwIPCore.confined {
                guard let pcb = corePCB else { return nil }
                let count = pending.withUnsafeReadableBytes { tl_pcb_write(pcb, $0.baseAddress, $0.count) }
                if count < pending.readableBytes { coreAwaitingSpace = true }
                return count
            }
            guard let written else {
                end(reset: false)
                return
            }
            counters.bytesToTunnel.increment(by: UInt64(written))
            if written > 0 { touch() }
            pending.moveReaderIndex(forwardBy: written)
            loopPending = pending.readableBytes > 0 ? pending : nil
            if loopPending != nil { return }  // lwIP's `sent` calls push again
        }
        guard !loopLocalEOF else {
            if loopLocalInactive {
                // Nothing more can reach the local side: close (lwIP sends what it holds, then FIN).
                end(reset: false)
                return
            }
            if !loopFinSent {
                loopFinSent = true
                LwIPCore.confined {
                    if let pcb = corePCB { tl_pcb_shutdown_output(pcb) }
                }
                rearmIdleTimer()
            }
            finishIfDone()
            return
        }
        if !loopReading, loopStarted, let channel = loopChannel {
            loopReading = true
            channel.read()
        }
    }

    /// Writes what lwIP delivered to the local socket; the peer's FIN becomes a half-close.
    private func drain() {
        guard !loopEnded, loopStarted, let channel = loopChannel else { return }
        let (bytes, finished): (ByteBuffer?, Bool) = LwIPCore.confined {
            coreDrainScheduled = false
            var bytes: ByteBuffer?
            if coreTowardLocal.readableBytes > 0 {
                bytes = coreTowardLocal
                coreTowardLocal = ByteBuffer()
            }
            return (bytes, corePeerFinished)
        }
        if let bytes {
            touch()
            let count = bytes.readableBytes
            // Its outcome is watched before the write starts: a write that fails at once
            // closes the channel from inside writeAndFlush, and the failure (a reset toward
            // the peer) must be seen before the close's channelInactive ends the flow cleanly.
            let written = channel.eventLoop.makePromise(of: Void.self)
            loopLastWrite = written.futureResult
            written.futureResult.whenComplete { result in
                switch result {
                case .success:
                    LwIPCore.confined {
                        if let pcb = self.corePCB { tl_pcb_received(pcb, count) }
                    }
                case .failure:
                    self.end(reset: true)
                }
            }
            channel.writeAndFlush(bytes, promise: written)
        }
        if finished, !loopOutputClosed {
            loopOutputClosed = true
            rearmIdleTimer()
            let closeOutput: @Sendable (Result<Void, any Error>) -> Void = { _ in channel.close(mode: .output, promise: nil) }
            if let last = loopLastWrite { last.whenComplete(closeOutput) } else { closeOutput(.success(())) }
            finishIfDone()
        }
    }

    /// Both FINs passed: lwIP finishes the close alone.
    private func finishIfDone() {
        if loopFinSent, loopOutputClosed {
            end(reset: false)
        }
    }

    /// Ends the relay once: closes (or resets) the pcb and the local channel.
    func end(reset: Bool) {
        eventLoop.preconditionInEventLoop()
        guard !loopEnded else { return }
        loopEnded = true
        loopIdleTimer?.cancel()
        loopIdleTimer = nil
        LwIPCore.confined {
            coreRelease(reset: reset)
            stack.coreRelayEnded(self)
        }
        if let channel = loopChannel {
            if let last = loopLastWrite, !reset {
                last.whenComplete { _ in channel.close(promise: nil) }
            } else {
                channel.close(promise: nil)
            }
        }
        loopChannel = nil
        loopPending = nil
    }

    private func touch() {
        loopLastActivity = .now()
    }

    /// Whether one direction has finished (the shorter ``halfClosedTimeout`` applies).
    private var halfClosed: Bool { loopFinSent || loopOutputClosed }

    /// How long the relay may go without a byte now (nil: no bound).
    private var quietBound: TimeAmount? {
        guard halfClosed else { return idleTimeout }
        return idleTimeout.map { min($0, halfClosedTimeout) } ?? halfClosedTimeout
    }

    private func armIdleTimer(at deadline: NIODeadline) {
        loopIdleTimer = eventLoop.scheduleTask(deadline: deadline) { self.idleCheck() }
    }

    /// The bound just became shorter (half-closed): the timer follows.
    private func rearmIdleTimer() {
        guard loopStarted, !loopEnded else { return }
        loopIdleTimer?.cancel()
        if let quietBound { armIdleTimer(at: loopLastActivity + quietBound) }
    }

    private func idleCheck() {
        guard !loopEnded, let quietBound else { return }
        let due = loopLastActivity + quietBound
        if NIODeadline.now() < due {
            armIdleTimer(at: due)
        } else if halfClosed {
            // Closed, not reset: bytes still queued toward either side go first.
            counters.halfClosedTimeouts.increment()
            end(reset: false)
        } else {
            counters.idleTimeouts.increment()
            end(reset: true)
        }
    }
}
