extension YamuxSessionStateMachine {
    // MARK: Ping

    /// Sends a ping: the value its answer will carry.
    mutating func ping() throws(YamuxSessionError) -> (value: UInt32, actions: [Action]) {
        if let closeReason { throw closeReason }
        let value = nextPing
        nextPing &+= 1
        var actions: [Action] = []
        enqueueControl(YamuxHeader(type: .ping, flags: .syn, streamID: 0, length: value), into: &actions)
        return (value, actions)
    }

    /// Names the task that waits for the answer to ping `value`.
    mutating func waitForPingAnswer(_ value: UInt32) -> WaiterID {
        let waiter = newWaiter()
        pingWaiters[value] = waiter
        return waiter
    }

    /// Ping `value`'s time is up: its task wakes to a timeout, unless the answer came first.
    mutating func pingExpired(_ value: UInt32) -> [Action] {
        guard let waiter = pingWaiters.removeValue(forKey: value) else { return [] }
        expiredPings.insert(value)
        return [.resume([waiter])]
    }

    /// The task of ping `value` woke: throws unless the answer came.
    mutating func pingEnded(_ value: UInt32) throws(YamuxSessionError) {
        if let closeReason { throw closeReason }
        if expiredPings.remove(value) != nil { throw .pingTimeout }
    }

    // MARK: GoAway and the end

    /// Tells the peer to open no more streams (code 0), or that the session is over.
    mutating func goAway(_ code: YamuxGoAwayCode) -> [Action] {
        var actions: [Action] = []
        enqueueControl(YamuxHeader(type: .goAway, streamID: 0, length: code.rawValue), into: &actions)
        return actions
    }

    /// Names a task that waits for the session to end.
    mutating func waitForClose() -> WaiterID {
        let waiter = newWaiter()
        closeWaiters.append(waiter)
        return waiter
    }

    /// The transport reached EOF or failed: the session ends.
    mutating func transportClosed() -> Job {
        fail(.sessionClosed)
    }

    /// The application closes the session: what is queued, data included, is written first.
    mutating func close() -> Job {
        fail(.sessionClosed, flushData: true)
    }

    /// Ends the session for `reason` (nothing happens if it has ended): every waiter wakes,
    /// every sink is told, what is queued is written (data only if `flushData`) and the
    /// transport is closed.
    mutating func fail(_ reason: YamuxSessionError, flushData: Bool = false) -> Job {
        startJob(.failure(FailureJob(reason: reason, flushData: flushData)))
    }

    /// How far the end of the session has got.
    struct FailureJob {
        let reason: YamuxSessionError
        let flushData: Bool
        var phase = Phase.start

        enum Phase {
            /// The reason is recorded, unless the session has already ended.
            case start
            /// Each stream's waiters wake and its sink is told (`toldSink`: dropped next).
            case streams(ids: [UInt32], next: Int, toldSink: Bool)
            /// The session's waiters wake and the transport closes.
            case close
            case done
        }
    }

    /// Records the end, then tells each stream's waiters and sink, one sink per step, then
    /// wakes the session's waiters and closes the transport.
    mutating func stepFailure(_ job: inout FailureJob) -> [Action]? {
        var actions: [Action] = []
        while true {
            switch job.phase {
            case .start:
                guard closeReason == nil else { return nil }
                closeReason = job.reason
                job.phase = .streams(ids: Array(streams.keys), next: 0, toldSink: false)

            case .streams(let ids, var next, let toldSink):
                if toldSink {
                    withJobStream(ids[next]) { $0.sink = nil }
                    next += 1
                }
                guard next < ids.count else {
                    job.phase = .close
                    continue
                }
                var waiters: [WaiterID] = []
                var sink: Sink?
                withJobStream(ids[next]) { state in
                    waiters = state.takeWaiters()
                    sink = state.sink
                }
                if !waiters.isEmpty { actions.append(.resume(waiters)) }
                if let sink {
                    job.phase = .streams(ids: ids, next: next, toldSink: true)
                    actions.append(.deliver(sink, .failed(job.reason)))
                    return actions
                }
                job.phase = .streams(ids: ids, next: next + 1, toldSink: false)

            case .close:
                job.phase = .done
                var waiters: [WaiterID] = []
                if let acceptWaiter { waiters.append(acceptWaiter) }
                acceptWaiter = nil
                waiters += pingWaiters.values
                pingWaiters.removeAll()
                waiters += spaceWaiters
                spaceWaiters.removeAll()
                waiters += closeWaiters
                closeWaiters.removeAll()
                if !waiters.isEmpty { actions.append(.resume(waiters)) }
                if sweepScheduled {
                    sweepScheduled = false
                    actions.append(.cancelSweep)
                }
                // What is queued (a GoAway, say, or the last data on close) goes out first.
                let frames = job.flushData ? dataQueue[dataHead...] : []
                let byteCount = frames.reduce(control.count) { $0 + $1.count }
                let finalWrite = byteCount > 0 ? OutboundWrite(control: control, frames: frames, byteCount: byteCount) : nil
                control = []
                dataQueue = []
                dataHead = 0
                queuedData = 0
                actions.append(.closeTransport(finalWrite: finalWrite))
                return actions

            case .done:
                return nil
            }
        }
    }
}
