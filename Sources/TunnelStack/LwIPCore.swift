import CLwIPGlue
import NIOCore
import Synchronization

/// lwIP for the whole process, confined to one NIO event loop.
///
/// lwIP keeps its state in globals and `lwip_init` may run only once per process, so there
/// is one core, bound to the loop of the first ``TunnelStack`` for the rest of the process.
/// Every lwIP call, every callback out of it and its timers (TCP every 250 ms while
/// connections exist; ND, MLD and reassembly every 100 ms–1 s) run on that loop, so lwIP
/// needs no lock and no thread of its own: `tcpip_init` is never called. Each stack adds a
/// netif of its own and binds its listeners (and so its connections) to it; removing the
/// netif ends them.
enum LwIPCore {
    /// tl_core_start's result: 0, or why lwIP could not start.
    private static let startResult: Int32 = {
        var callbacks = tl_callbacks(
            output: { context, packet, length in
                guard let context, let packet else { return }
                StackCore.from(context).emit(UnsafeRawBufferPointer(start: packet, count: length))
            },
            accept: { context, pcb, flow in
                guard let context, let pcb, let flow else { return 0 }
                return StackCore.from(context).accept(pcb, TunnelFlow(flow.pointee)) ? 1 : 0
            },
            receive: { connection, data, length in
                guard let connection, let data else { return 0 }
                return PCBLink.from(connection).owner.pcbReceive(data, length: length) ? 1 : 0
            },
            finished: { connection in
                guard let connection else { return }
                PCBLink.from(connection).owner.pcbFinished()
            },
            sent: { connection, _ in
                guard let connection else { return }
                PCBLink.from(connection).owner.pcbSent()
            },
            failed: { connection, error in
                guard let connection else { return }
                PCBLink.from(connection).owner.pcbFailed(error: error)
            })
        return tl_core_start(&callbacks)
    }()

    /// The loop lwIP is confined to (set once, by the first stack).
    private static let boundLoop = Mutex<(any EventLoop)?>(nil)
    static let timers = LwIPTimers()

    /// Starts lwIP if it is not running and returns its loop: `preferred` for the first
    /// stack of the process, the first stack's loop for the others.
    static func start(preferred: any EventLoop) throws(TunnelStackError) -> any EventLoop {
        switch startResult {
        case 0: break
        default:
            throw TunnelStackError(description: "liblwip was built with other options than /usr/include/lwip/lwipopts.h describes (structure sizes differ)")
        }
        return boundLoop.withLock { bound in
            if let bound { return bound }
            bound = preferred
            timers.loop = preferred
            return preferred
        }
    }

    /// Runs `body`, which calls into lwIP, on lwIP's loop (the caller is on it), then
    /// re-arms lwIP's timer for whatever the call scheduled.
    /// When the outermost call returns, what lwIP's callbacks deferred runs (see
    /// ``LwIPTimers/defer(_:failed:)``).
    @inline(__always)
    static func confined<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        timers.depth += 1
        defer {
            timers.depth -= 1
            if timers.depth == 0 { timers.returned() }
        }
        return try body()
    }

    /// Checks (in debug builds) that this thread is lwIP's loop: the proof behind the
    /// `@unchecked Sendable` types whose state only that loop touches.
    @inline(__always)
    static func assertConfined() {
        timers.loop?.assertInEventLoop()
    }
}

/// lwIP's timers as one scheduled task on its loop, armed for the earliest due timeout
/// (`sys_timeouts_sleeptime`) after every call into lwIP; with no connections lwIP's own
/// cyclic timers (ND, MLD, reassembly) are all it wakes for.
///
/// `@unchecked Sendable`: `loop` is written once under ``LwIPCore``'s start lock before any
/// stack exists; the rest is touched only on that loop.
final class LwIPTimers: @unchecked Sendable {
    fileprivate(set) var loop: (any EventLoop)?
    private var armed: NIODeadline?
    private var task: Scheduled<Void>?
    /// Nesting of ``LwIPCore/confined(_:)`` calls.
    fileprivate var depth = 0
    /// Channels whose lwIP events wait for lwIP to return (a callback must not re-enter lwIP
    /// or run the pipeline), oldest first; at most one entry per channel and kind.
    private var deferred: [(channel: TunnelChannel, failed: Bool)] = []
    private var runningDeferred = false

    /// Runs `channel`'s deferred work once lwIP returned.
    func `defer`(_ channel: TunnelChannel, failed: Bool) {
        deferred.append((channel, failed))
    }

    /// The outermost lwIP call returned: deferred work, then the timer.
    fileprivate func returned() {
        if !deferred.isEmpty, !runningDeferred {
            runningDeferred = true
            var index = 0
            // Work may add work (a delivery that writes): run until none is left.
            while index < deferred.count {
                let (channel, failed) = deferred[index]
                index += 1
                channel.runDeferred(failed: failed)
            }
            deferred.removeAll(keepingCapacity: true)
            runningDeferred = false
        }
        rearm()
    }

    /// Arms the task for lwIP's next timeout when that is earlier than the armed one.
    func rearm() {
        guard let loop else { return }
        let sleep = tl_timers_sleep()
        guard sleep != UInt32.max else { return }
        let due = NIODeadline.now() + .milliseconds(Int64(sleep))
        if let armed, armed <= due { return }
        task?.cancel()
        armed = due
        task = loop.scheduleTask(deadline: due) { [self] in fire() }
    }

    private func fire() {
        armed = nil
        task = nil
        LwIPCore.confined { tl_timers_run() }
    }
}

/// What an attached lwIP pcb reports (a ``TunnelChannel`` or a ``TunnelRelay``); called on
/// lwIP's loop.
protocol TunnelPCBOwner: AnyObject {
    /// Data arrived; return false to leave it with lwIP (offered again later).
    func pcbReceive(_ data: OpaquePointer, length: Int) -> Bool
    /// The peer sent FIN.
    func pcbFinished()
    /// The peer acknowledged bytes: lwIP's send buffer has room again.
    func pcbSent()
    /// lwIP freed the pcb (reset by the peer, retransmissions exhausted, netif removed).
    func pcbFailed(error: Int32)
}

/// The context lwIP holds for one attached pcb (retained while attached).
final class PCBLink {
    let owner: any TunnelPCBOwner

    init(_ owner: any TunnelPCBOwner) {
        self.owner = owner
    }

    static func from(_ pointer: UnsafeMutableRawPointer) -> PCBLink {
        Unmanaged<PCBLink>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Attaches `pcb` to a new link for `owner`; lwIP holds it until the owner releases the
    /// returned reference (after detaching the pcb, or once lwIP freed it).
    static func attach(_ pcb: OpaquePointer, to owner: any TunnelPCBOwner) -> Unmanaged<PCBLink> {
        let link = Unmanaged.passRetained(PCBLink(owner))
        tl_pcb_attach(pcb, link.toOpaque())
        return link
    }
}
