/// The requests of one server-side streaming call, handed from the connection's reader to
/// the handler. Holds at most one message: the reader waits until the handler took it
/// (back-pressure, as the reference's one-slot buffer).
actor DRPCInbox {
    private var slot: [UInt8]?
    private var end: Result<Void, DRPCCallError>?
    private var handlerGone = false
    private var readWaiter: CheckedContinuation<Void, Never>?
    private var writeWaiter: CheckedContinuation<Void, Never>?

    /// Queues one message; false when the handler no longer reads (it returned), or the
    /// serving task was cancelled while the handler left the previous message untaken (so
    /// a handler that stops reading cannot hold its connection's reader forever).
    func put(_ message: [UInt8]) async -> Bool {
        while slot != nil, !handlerGone, end == nil, !Task.isCancelled {
            await withTaskCancellationHandler {
                await withCheckedContinuation { writeWaiter = $0 }
            } onCancel: {
                Task { await self.wakeWriter() }
            }
        }
        guard !handlerGone, end == nil, !Task.isCancelled else { return false }
        slot = message
        readWaiter?.resume()
        readWaiter = nil
        return true
    }

    /// No more messages: `.success` for the client's CloseSend, a failure for Close,
    /// Cancel or a dead transport.
    func finish(_ result: Result<Void, DRPCCallError>) {
        guard end == nil else { return }
        end = result
        readWaiter?.resume()
        readWaiter = nil
        writeWaiter?.resume()
        writeWaiter = nil
    }

    private func wakeWriter() {
        writeWaiter?.resume()
        writeWaiter = nil
    }

    /// The handler returned: later messages are dropped.
    func handlerReturned() {
        handlerGone = true
        writeWaiter?.resume()
        writeWaiter = nil
    }

    func take() async throws(DRPCCallError) -> [UInt8]? {
        while true {
            if let message = slot {
                slot = nil
                writeWaiter?.resume()
                writeWaiter = nil
                return message
            }
            switch end {
            case .success: return nil
            case .failure(let error): throw error
            case nil: await withCheckedContinuation { readWaiter = $0 }
            }
        }
    }
}
