extension YamuxSessionStateMachine {
    /// A flush in progress: the control frames it took when it began, which lead its first
    /// write.
    struct PendingFlush {
        var control: [UInt8]
    }

    /// One transport write: control frames, then whole Data (and FIN) frames, `byteCount`
    /// bytes in all, so the session can size one buffer and copy each byte once.
    struct OutboundWrite {
        var control: [UInt8]
        var frames: ArraySlice<[UInt8]>
        var byteCount: Int

        /// The bytes as one array (for tests).
        var bytes: [UInt8] { control + Array(frames.joined()) }
    }

    /// The transport can take data again: flush if data frames wait.
    func transportWritable() -> [Action] {
        dataQueue.isEmpty ? [] : [.flush]
    }

    // MARK: Queueing

    /// Queues a control frame: written with the next flush, ahead of queued data, now (or at
    /// the end of the chunk being received) unless `lazy`.
    mutating func enqueueControl(_ header: YamuxHeader, lazy: Bool = false, into actions: inout [Action]) {
        guard closeReason == nil else { return }
        header.encode(into: &control)
        if lazy { scheduleLazyFlush(into: &actions) } else { requestFlush(into: &actions) }
    }

    /// Queues Data frames for `bytes[offset...]` while stream `id`'s window and the outbound
    /// queue allow; returns how far it got.
    mutating func enqueueData(_ id: UInt32, _ bytes: [UInt8], from offset: Int) -> Int {
        var offset = offset
        while offset < bytes.count, let window = streams[id]?.sendWindow, window > 0, queuedData < configuration.maxQueuedData {
            let n = min(bytes.count - offset, Int(window), configuration.maxDataFrame)
            streams[id]!.sendWindow -= UInt32(n)
            var frame = YamuxHeader(type: .data, streamID: id, length: UInt32(n)).encoded
            frame.append(contentsOf: bytes[offset..<(offset + n)])
            dataQueue.append(frame)
            queuedData += n
            offset += n
        }
        return offset
    }

    /// Writes now, or at the end of the chunk being received (one write per chunk read).
    mutating func requestFlush(into actions: inout [Action]) {
        if receiving { needsFlush = true } else { actions.append(.flush) }
    }

    /// Arms the lazy-flush timer unless it is armed.
    mutating func scheduleLazyFlush(into actions: inout [Action]) {
        guard !lazyFlushScheduled else { return }
        lazyFlushScheduled = true
        actions.append(.scheduleLazyFlush)
    }

    /// Arms the periodic check of open and close timeouts while there is something to check.
    mutating func scheduleSweep(into actions: inout [Action]) {
        guard !sweepScheduled, closeReason == nil else { return }
        sweepScheduled = true
        actions.append(.scheduleSweep)
    }

    // MARK: Flushing

    /// Begins a flush (the lazy timer, if armed, is to be cancelled); nil once the session
    /// has ended.
    mutating func startFlush() -> PendingFlush? {
        needsFlush = false
        lazyFlushScheduled = false
        guard closeReason == nil else { return nil }
        defer { control = [] }
        return PendingFlush(control: control)
    }

    /// The next write of a flush: control frames first, then data frames while the transport
    /// is writable, up to ``Configuration/maxBatch`` bytes; nil when nothing more goes now
    /// (what is left waits for ``YamuxSession/transportWritable()``).
    mutating func nextWrite(_ flush: inout PendingFlush, transportWritable: Bool) -> OutboundWrite? {
        var end = dataHead
        var size = flush.control.count
        if transportWritable {
            while end < dataQueue.count, size < configuration.maxBatch {
                size += dataQueue[end].count
                end += 1
            }
        }
        guard size > 0 else { return nil }
        let frames = dataQueue[dataHead..<end]
        for frame in frames { queuedData -= max(0, frame.count - YamuxHeader.size) }
        dataHead = end
        defer { flush.control = [] }
        return OutboundWrite(control: flush.control, frames: frames, byteCount: size)
    }

    /// Ends a flush: drops written frames; wakes writers waiting for queue space if there is
    /// some now.
    mutating func finishFlush() -> [Action] {
        if dataHead == dataQueue.count {
            dataQueue.removeAll(keepingCapacity: true)
            dataHead = 0
        } else if dataHead >= 64 {
            dataQueue.removeFirst(dataHead)
            dataHead = 0
        }
        guard queuedData < configuration.maxQueuedData, !spaceWaiters.isEmpty else { return [] }
        defer { spaceWaiters.removeAll() }
        return [.resume(spaceWaiters)]
    }
}
