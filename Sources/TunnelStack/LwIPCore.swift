import CLwIPGlue

/// lwIP for the whole process.
///
/// lwIP keeps its state in globals and `tcpip_init` (which calls `lwip_init`) may run only
/// once per process, so there is one core: a tcpip thread started on first use and never
/// stopped (it runs lwIP's timers: TCP every 250 ms while connections exist, ND, MLD and
/// reassembly every 100 ms–1 s; nothing of ours polls). Each ``TunnelStack`` adds a netif of
/// its own and binds its listeners (and so its connections) to it; removing the netif ends
/// them. All lwIP calls run under lwIP's core lock (`LWIP_TCPIP_CORE_LOCKING`): callers
/// take it through ``locked(_:)``; lwIP's callbacks into Swift run with it held, on the
/// tcpip thread (timers) or on the thread that called into lwIP.
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
                return TunnelRelay.from(connection).coreReceive(data, length: length) ? 1 : 0
            },
            finished: { connection in
                guard let connection else { return }
                TunnelRelay.from(connection).coreFinished()
            },
            sent: { connection, _ in
                guard let connection else { return }
                TunnelRelay.from(connection).coreSent()
            },
            failed: { connection, error in
                guard let connection else { return }
                TunnelRelay.from(connection).coreFailed(error: error)
            })
        return tl_core_start(&callbacks)
    }()

    /// Starts lwIP if it is not running.
    static func start() throws(TunnelStackError) {
        switch startResult {
        case 0: return
        case -1:
            throw TunnelStackError(description: "liblwip was built with other options than /usr/include/lwip/lwipopts.h describes (structure sizes differ)")
        default: throw TunnelStackError(description: "lwIP's tcpip thread did not start")
        }
    }

    /// Runs `body` with lwIP's core lock held (nests: a holder just runs it).
    static func locked<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        tl_lock()
        defer { tl_unlock() }
        return try body()
    }

    /// Traps unless this thread holds the core lock: the proof behind the `@unchecked
    /// Sendable` types whose state only that lock guards.
    static func assertHeld() {
        precondition(tl_lock_held() != 0, "lwIP's core lock is not held")
    }
}
