extension YamuxSessionStateMachine {
    // MARK: Opening and accepting

    /// Opens a stream (WindowUpdate+SYN, sent lazily: it rides with the first data or leaves
    /// within the lazy delay).
    mutating func open(now: Duration) throws(YamuxSessionError) -> (streamID: UInt32, actions: [Action]) {
        if let closeReason { throw closeReason }
        if remoteGoneAway { throw .remoteGoAway }
        let id = nextStreamID
        nextStreamID &+= 2
        var state = StreamState(window: configuration.window)
        state.openedAt = now
        streams[id] = state
        var actions: [Action] = []
        scheduleSweep(into: &actions)
        enqueueControl(YamuxHeader(type: .windowUpdate, flags: .syn, streamID: id, length: 0), lazy: true, into: &actions)
        return (id, actions)
    }

    /// What ``accept()`` found.
    enum AcceptStep {
        /// A stream the peer opened, now accepted.
        case stream(UInt32, [Action])
        /// None, and none will come: the session has ended.
        case ended
        /// None yet: wait (``waitToAccept()``) and ask again.
        case wait
    }

    /// The next stream the peer opened, if any is queued.
    mutating func accept() -> AcceptStep {
        if let next = acceptNext() { return .stream(next.streamID, next.actions) }
        return closeReason == nil ? .wait : .ended
    }

    /// Accepts the oldest queued stream: its ACK rides with its first reply (or leaves
    /// within the lazy delay), so the opener does not wait for it.
    mutating func acceptNext() -> (streamID: UInt32, actions: [Action])? {
        guard !acceptQueue.isEmpty else { return nil }
        let id = acceptQueue.removeFirst()
        var actions: [Action] = []
        enqueueControl(YamuxHeader(type: .windowUpdate, flags: .ack, streamID: id, length: 0), lazy: true, into: &actions)
        return (id, actions)
    }

    /// From now on streams the peer opens are accepted at once (``Action/accept(streamID:)``);
    /// the ones already queued are taken with ``acceptNext()``.
    mutating func acceptWithHandler() {
        acceptsWithHandler = true
    }

    /// Names the task that waits for a stream to accept.
    mutating func waitToAccept() -> WaiterID {
        let waiter = newWaiter()
        acceptWaiter = waiter
        return waiter
    }

    // MARK: Reading

    /// What ``read(_:)`` found.
    enum ReadStep {
        /// Everything buffered, as one chunk; the actions return credit to the peer.
        case data([UInt8], [Action])
        /// The peer's FIN: no more data.
        case end
        /// Nothing yet: wait (``waitToRead(_:)``) and ask again.
        case wait
    }

    /// Reads stream `id`: what is buffered, the end, or that the reader must wait.
    mutating func read(_ id: UInt32) throws(YamuxSessionError) -> ReadStep {
        guard let wasReset = streams[id]?.wasReset else { throw closeReason ?? .streamReset }
        if wasReset { throw .streamReset }
        if !streams[id]!.buffer.isEmpty {
            let chunk = streams[id]!.takeBuffered()
            let credit = streams[id]!.takeCreditIfDue(window: configuration.window)
            var actions: [Action] = []
            if let credit { enqueueControl(YamuxHeader(type: .windowUpdate, streamID: id, length: credit), into: &actions) }
            return .data(chunk, actions)
        }
        if streams[id]!.remoteFin {
            forgetIfDone(id)
            return .end
        }
        if let closeReason { throw closeReason }
        return .wait
    }

    /// Names the task that waits to read stream `id`.
    mutating func waitToRead(_ id: UInt32) -> WaiterID {
        let waiter = newWaiter()
        streams[id]?.readWaiter = waiter
        return waiter
    }

    /// Push mode: from now on stream `id`'s data, end and failure go to `sink`, starting
    /// with what is buffered (credited back as it is delivered).
    mutating func setSink(_ id: UInt32, _ sink: @escaping Sink) -> Job {
        startJob(.attachSink(AttachJob(streamID: id, sink: sink)))
    }

    /// How far handing a stream to its sink has got.
    struct AttachJob {
        let streamID: UInt32
        let sink: Sink
        var phase = Phase.start

        enum Phase {
            /// The sink is installed, or told the stream is gone.
            case start
            /// Buffered chunks go to the sink, one per step.
            case drain
            /// Credit for what was delivered goes back.
            case credit
            /// The peer's FIN, if it came, goes to the sink.
            case end
            case done
        }
    }

    /// Installs the sink, then hands it one buffered chunk per step, returns the credit and
    /// passes on the peer's FIN.
    mutating func stepAttachSink(_ job: inout AttachJob) -> [Action]? {
        let id = job.streamID
        while true {
            switch job.phase {
            case .start:
                guard streams[id] != nil else {
                    job.phase = .done
                    return [.deliver(job.sink, .failed(closeReason ?? .streamReset))]
                }
                streams[id]!.sink = job.sink
                job.phase = .drain
            case .drain:
                let chunk: [UInt8]? =
                    withJobStream(id) { state in
                        guard !state.buffer.isEmpty else { return nil }
                        let chunk = state.buffer.removeFirst()
                        state.unacknowledged += UInt32(chunk.count)
                        return chunk
                    } ?? nil
                if let chunk { return [.deliver(job.sink, .data(chunk))] }
                job.phase = .credit
            case .credit:
                job.phase = .end
                let window = configuration.window
                if let credit = withJobStream(id, { $0.takeCreditIfDue(window: window) }) ?? nil {
                    var actions: [Action] = []
                    enqueueControl(YamuxHeader(type: .windowUpdate, streamID: id, length: credit), into: &actions)
                    if !actions.isEmpty { return actions }
                }
            case .end:
                job.phase = .done
                if jobStream(id)?.remoteFin == true { return [.deliver(job.sink, .end)] }
            case .done:
                return nil
            }
        }
    }

    // MARK: Writing

    /// What ``write(_:_:from:)`` did.
    enum WriteStep {
        /// The stream has no send credit: wait (``waitForWindow(_:)``) and try again.
        case waitForWindow
        /// The outbound queue is full: wait (``waitForQueueSpace()``) and try again.
        case waitForQueueSpace
        /// Queued up to this offset (all the window and the queue allowed).
        case queued(upTo: Int, [Action])
    }

    /// Queues as much of `bytes[offset...]` on stream `id` as its window and the outbound
    /// queue take now.
    mutating func write(_ id: UInt32, _ bytes: [UInt8], from offset: Int) throws(YamuxSessionError) -> WriteStep {
        let window = try sendWindow(id)
        if window == 0 { return .waitForWindow }
        if queuedData >= configuration.maxQueuedData { return .waitForQueueSpace }
        let end = enqueueData(id, bytes, from: offset)
        var actions: [Action] = []
        requestFlush(into: &actions)
        return .queued(upTo: end, actions)
    }

    /// Queues all of `bytes` if stream `id`'s window and the outbound queue take them now;
    /// nil, with nothing queued, when a writer would have to wait.
    mutating func tryWrite(_ id: UInt32, _ bytes: [UInt8]) throws(YamuxSessionError) -> [Action]? {
        let window = try sendWindow(id)
        guard bytes.count <= Int(window), queuedData + bytes.count <= configuration.maxQueuedData else { return nil }
        _ = enqueueData(id, bytes, from: 0)
        var actions: [Action] = []
        requestFlush(into: &actions)
        return actions
    }

    /// Stream `id`'s send credit if it can be written now, else why not.
    private func sendWindow(_ id: UInt32) throws(YamuxSessionError) -> UInt32 {
        guard let state = streams[id] else { throw closeReason ?? .streamReset }
        if state.wasReset { throw .streamReset }
        if state.localFin { throw .streamClosed }
        if let closeReason { throw closeReason }
        return state.sendWindow
    }

    /// Names a writer that waits for stream `id`'s send credit.
    mutating func waitForWindow(_ id: UInt32) -> WaiterID {
        let waiter = newWaiter()
        streams[id]?.windowWaiters.append(waiter)
        return waiter
    }

    /// Names a writer that waits for room in the outbound queue.
    mutating func waitForQueueSpace() -> WaiterID {
        let waiter = newWaiter()
        spaceWaiters.append(waiter)
        return waiter
    }

    // MARK: Closing and resetting

    /// Half-closes stream `id`: FIN, behind its queued data; reading continues.
    mutating func closeWrite(_ id: UInt32, now: Duration) -> [Action] {
        var actions: [Action] = []
        closeWrite(id, now: now, into: &actions)
        return actions
    }

    /// Half-closes stream `id` unless it is closed for writing or reset; arms the close timeout while the peer's side is open.
    private mutating func closeWrite(_ id: UInt32, now: Duration, into actions: inout [Action]) {
        guard let state = streams[id], !state.localFin, !state.wasReset else { return }
        streams[id]!.localFin = true
        // Writers still waiting for credit can send nothing after the FIN: they wake and find
        // the stream closed. (Left waiting, they were lost once the peer's FIN forgot the
        // stream: a reply that arrives before a large request is fully sent.)
        let writers = streams[id]!.windowWaiters
        streams[id]!.windowWaiters.removeAll()
        if !writers.isEmpty { actions.append(.resume(writers)) }
        if !state.remoteFin {
            streams[id]!.closedAt = now
            scheduleSweep(into: &actions)
        }
        // Behind this stream's queued data, so the FIN cannot overtake it.
        dataQueue.append(YamuxHeader(type: .windowUpdate, flags: .fin, streamID: id, length: 0).encoded)
        // Nobody waits for a FIN: it rides with the next write or leaves within the lazy delay.
        scheduleLazyFlush(into: &actions)
        forgetIfDone(id)
    }

    /// FIN and stop reading: what is buffered or still arrives is dropped, so the stream is
    /// forgotten as soon as the peer's FIN arrives.
    mutating func closeStream(_ id: UInt32, now: Duration) -> [Action] {
        guard streams[id] != nil else { return [] }
        streams[id]!.discarding = true
        streams[id]!.buffer.removeAll()
        var actions: [Action] = []
        closeWrite(id, now: now, into: &actions)
        forgetIfDone(id)
        return actions
    }

    /// Aborts stream `id` (RST): its waiters wake, its sink is told, it is forgotten.
    mutating func reset(_ id: UInt32) -> Job {
        startJob(.reset(ResetJob(streamID: id)))
    }

    /// How far a reset has got.
    struct ResetJob {
        let streamID: UInt32
        var phase = Phase.start

        enum Phase {
            /// Waiters wake; the sink is told.
            case start
            /// The stream is forgotten and the RST queued.
            case forget
            case done
        }
    }

    /// Wakes the stream's waiters and tells its sink, then forgets it and queues the RST.
    mutating func stepReset(_ job: inout ResetJob) -> [Action]? {
        let id = job.streamID
        var actions: [Action] = []
        switch job.phase {
        case .start:
            guard streams[id] != nil else { return nil }
            job.phase = .forget
            streams[id]!.wasReset = true
            let waiters = streams[id]!.takeWaiters()
            let sink = streams[id]!.sink
            if !waiters.isEmpty { actions.append(.resume(waiters)) }
            if let sink {
                actions.append(.deliver(sink, .failed(.streamReset)))
                return actions
            }
            fallthrough
        case .forget:
            job.phase = .done
            withJobStream(id) { $0.sink = nil }
            forget(id)
            enqueueControl(YamuxHeader(type: .windowUpdate, flags: .rst, streamID: id, length: 0), into: &actions)
            return actions
        case .done:
            return nil
        }
    }

    // MARK: Timeouts

    /// The periodic check of open and close timeouts (the sweep timer fired).
    mutating func sweep(now: Duration) -> Job {
        startJob(.sweep(SweepJob(now: now)))
    }

    /// How far a sweep has got.
    struct SweepJob {
        let now: Duration
        /// The streams to check, as they were when the sweep began (nil until then).
        var streamIDs: [UInt32]?
        /// The next of `streamIDs` to check.
        var next = 0
        /// A stream still has a timeout running: the sweep timer is armed again.
        var pending = false
        var done = false
    }

    /// Checks each stream's timeouts: an unanswered open ends the session, an unanswered
    /// close resets the stream (one reset per step); arms the timer again while any runs.
    mutating func stepSweep(_ job: inout SweepJob) -> [Action]? {
        guard !job.done else { return nil }
        if job.streamIDs == nil {
            sweepScheduled = false
            guard closeReason == nil else { return nil }
            job.streamIDs = Array(streams.keys)
        }
        let ids = job.streamIDs!
        while job.next < ids.count {
            let id = ids[job.next]
            job.next += 1
            guard let state = jobStream(id) else { continue }
            if let openedAt = state.openedAt {
                if job.now - openedAt >= configuration.streamOpenTimeout {
                    job.done = true  // the session ends
                    let reason = YamuxSessionError.protocolError(
                        "stream \(id) was not acknowledged within \(configuration.streamOpenTimeoutText)")
                    return [.run(fail(reason))]
                }
                job.pending = true
            }
            if let closedAt = state.closedAt, !state.remoteFin {
                if job.now - closedAt >= configuration.streamCloseTimeout {
                    return [.run(reset(id))]
                }
                job.pending = true
            }
        }
        job.done = true
        var actions: [Action] = []
        if job.pending { scheduleSweep(into: &actions) }
        return actions.isEmpty ? nil : actions
    }
}
