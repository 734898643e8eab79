extension YamuxSessionStateMachine {
    /// How far handling the received bytes has got, so that the rest of a frame still
    /// applies after a callout it made.
    struct InboundJob {
        /// The frame being handled, or nil between frames.
        var frame: YamuxFrame?
        /// What of `frame` is handled next.
        var phase: FramePhase = .syn
    }

    /// The parts of a Data or WindowUpdate frame, in the order they apply.
    enum FramePhase {
        /// A SYN opens the stream.
        case syn
        /// The stream is looked up; credit the peer grants is added.
        case stream
        /// The payload is buffered or delivered.
        case data
        /// A FIN ends the peer's side.
        case fin
        /// An RST aborts the stream.
        case reset
        /// The aborted stream is forgotten.
        case resetDone
    }

    /// Bytes read from the transport (split anywhere): the job that handles their frames, or
    /// nil once the session has ended. What the frames make us send waits for
    /// ``endReceive()``, so that it leaves in one write.
    mutating func receive(_ bytes: [UInt8]) -> Job? {
        guard closeReason == nil else { return nil }
        receiving = true
        decoder.feed(bytes)
        return startJob(.inbound(InboundJob()))
    }

    /// The received chunk is handled; true when what it produced must be flushed now.
    mutating func endReceive() -> Bool {
        receiving = false
        return needsFlush
    }

    /// Handles frames until one makes a callout, the session ends or the bytes run out.
    mutating func stepInbound(_ job: inout InboundJob) -> [Action]? {
        var actions: [Action] = []
        while true {
            guard let frame = job.frame else {
                guard closeReason == nil else { break }
                do {
                    guard let next = try decoder.next() else { break }
                    job.frame = next
                    job.phase = .syn
                } catch {
                    if protocolFailure(error.description, into: &actions) { return actions }
                    break
                }
                continue
            }
            if handle(frame, &job, into: &actions) { return actions }
        }
        return actions.isEmpty ? nil : actions
    }

    /// Handles `frame` from `job.phase` on; true when it stopped at a callout (the job
    /// resumes there), false when the frame is done.
    private mutating func handle(_ frame: YamuxFrame, _ job: inout InboundJob, into actions: inout [Action]) -> Bool {
        let header = frame.header
        switch header.type {
        case .ping:
            job.frame = nil
            if header.flags.contains(.syn) {
                enqueueControl(YamuxHeader(type: .ping, flags: .ack, streamID: 0, length: header.length), into: &actions)
            } else if header.flags.contains(.ack), let waiter = pingWaiters.removeValue(forKey: header.length) {
                actions.append(.resume([waiter]))
            }
            return false
        case .goAway:
            job.frame = nil
            if header.length == YamuxGoAwayCode.normal.rawValue {
                remoteGoneAway = true
                return false
            }
            actions.append(.run(fail(.protocolError("remote GoAway code \(header.length)"))))
            return true
        case .data, .windowUpdate:
            return handleStreamFrame(frame, &job, into: &actions)
        }
    }

    /// The phases of a Data or WindowUpdate frame; true when stopped at a callout.
    private mutating func handleStreamFrame(_ frame: YamuxFrame, _ job: inout InboundJob, into actions: inout [Action]) -> Bool {
        let header = frame.header
        let id = header.streamID
        let window = configuration.window
        while true {
            switch job.phase {
            case .syn:
                job.phase = .stream
                guard header.flags.contains(.syn) else { continue }
                guard id != 0, isPeerID(id), streams[id] == nil else {
                    job.frame = nil
                    return protocolFailure("invalid or duplicate SYN for stream \(id)", into: &actions)
                }
                if acceptQueue.count >= configuration.acceptBacklog {
                    enqueueControl(YamuxHeader(type: .windowUpdate, flags: .rst, streamID: id, length: 0), into: &actions)
                    job.frame = nil
                    return false
                }
                streams[id] = StreamState(window: window)
                if acceptsWithHandler {
                    enqueueControl(YamuxHeader(type: .windowUpdate, flags: .ack, streamID: id, length: 0), lazy: true, into: &actions)
                    actions.append(.accept(streamID: id))
                    return true
                }
                acceptQueue.append(id)
                if let waiter = acceptWaiter {
                    acceptWaiter = nil
                    actions.append(.resume([waiter]))
                }

            case .stream:
                // Looked up anew: the accept handler may have reset the stream.
                guard streams[id] != nil else {  // unknown stream: discard
                    job.frame = nil
                    return false
                }
                job.phase = .data
                streams[id]!.openedAt = nil  // any answer (ACK, data, FIN, RST) counts as acknowledged
                if header.type == .windowUpdate, header.length > 0 {
                    // Saturates: a peer whose updates add up past 4 GiB gets the largest window,
                    // not one that wrapped to a few bytes (a stalled stream).
                    let (sum, overflow) = streams[id]!.sendWindow.addingReportingOverflow(header.length)
                    streams[id]!.sendWindow = overflow ? .max : sum
                    let waiters = streams[id]!.windowWaiters
                    streams[id]!.windowWaiters.removeAll()
                    if !waiters.isEmpty { actions.append(.resume(waiters)) }
                }

            case .data:
                job.phase = .fin
                guard header.type == .data, !frame.payload.isEmpty else { continue }
                let count = UInt32(frame.payload.count)
                guard let receiveWindow = jobStream(id)?.receiveWindow, count <= receiveWindow else {
                    job.frame = nil
                    return protocolFailure("stream \(id) sent \(frame.payload.count) bytes beyond its window", into: &actions)
                }
                var credit: UInt32?
                var sink: Sink?
                var reader: WaiterID?
                withJobStream(id) { state in
                    state.receiveWindow -= count
                    if state.discarding || state.sink != nil {
                        // Consumed on arrival: the credit goes straight back.
                        state.unacknowledged += count
                        credit = state.takeCreditIfDue(window: window)
                        if !state.discarding { sink = state.sink }
                    } else {
                        state.buffer.append(frame.payload)
                        reader = state.readWaiter
                        state.readWaiter = nil
                    }
                }
                if let credit { enqueueControl(YamuxHeader(type: .windowUpdate, streamID: id, length: credit), into: &actions) }
                if let reader { actions.append(.resume([reader])) }
                if let sink {
                    actions.append(.deliver(sink, .data(frame.payload)))
                    return true
                }

            case .fin:
                job.phase = .reset
                guard header.flags.contains(.fin) else { continue }
                var reader: WaiterID?
                withJobStream(id) { state in
                    state.remoteFin = true
                    reader = state.readWaiter
                    state.readWaiter = nil
                }
                if let reader {
                    // The woken reader sees the EOF and forgets the stream itself.
                    actions.append(.resume([reader]))
                } else {
                    forgetIfDone(id)
                }
                if let sink = jobStream(id)?.sink {
                    actions.append(.deliver(sink, .end))
                    return true
                }

            case .reset:
                guard header.flags.contains(.rst) else {
                    job.frame = nil
                    return false
                }
                job.phase = .resetDone
                var waiters: [WaiterID] = []
                var sink: Sink?
                withJobStream(id) { state in
                    state.wasReset = true
                    waiters = state.takeWaiters()
                    sink = state.sink
                }
                if !waiters.isEmpty { actions.append(.resume(waiters)) }
                if let sink {
                    actions.append(.deliver(sink, .failed(.streamReset)))
                    return true
                }

            case .resetDone:
                withJobStream(id) { $0.sink = nil }
                forget(id)
                acceptQueue.removeAll { $0 == id }
                job.frame = nil
                return false
            }
        }
    }

    /// Answers a broken peer with GoAway(protocol error) and ends the session; true when
    /// that queued the failure job (the session was still open).
    mutating func protocolFailure(_ text: String, into actions: inout [Action]) -> Bool {
        guard closeReason == nil else { return false }
        enqueueControl(YamuxHeader(type: .goAway, streamID: 0, length: YamuxGoAwayCode.protocolError.rawValue), into: &actions)
        actions.append(.run(fail(.protocolError(text))))
        return true
    }
}
