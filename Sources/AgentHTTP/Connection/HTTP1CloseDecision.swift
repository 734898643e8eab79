/// Which response is the connection's last: the one in progress after shutdown, the
/// client's FIN or broken framing; the answer to the first request that asked to close
/// (HTTP/1.0, `Connection: close`); or one that said itself that it closes.
struct HTTP1CloseDecision: Sendable, Equatable {
    private var afterResponse = false
    /// The number of the first request that asked to close.
    private var afterRequest: Int?
    /// Responses ended so far (numbered as the requests they answer).
    private var responsesEnded = 0
    /// The client half-closed: requests already received are served, then the connection closes.
    private(set) var inputClosed = false
    /// A response written said it closes the connection.
    private var responseSaidClose = false

    /// The response in progress (or the next) is the last.
    mutating func closeAfterResponse() { afterResponse = true }

    /// Request `number` asked to close: its response is the last, however many were pipelined before it.
    mutating func requestAsksClose(_ number: Int) {
        afterRequest = min(afterRequest ?? number, number)
    }

    mutating func inputEnded() { inputClosed = true }

    mutating func responseSaysClose() { responseSaidClose = true }

    mutating func responseEnded() { responsesEnded += 1 }

    /// A response written said it closes the connection (nothing may follow it).
    var responseClosed: Bool { responseSaidClose }

    /// The response that just ended is the connection's last.
    var lastResponseEnded: Bool {
        responseSaidClose || afterResponse || afterRequest.map { responsesEnded >= $0 } ?? false
    }

    /// Whether the response being started must say `Connection: close`, when `outstanding`
    /// responses (this one included) are under way and `idle`: no request is being read.
    func responseMustClose(outstanding: Int, idle: Bool) -> Bool {
        if afterResponse { return true }
        if let last = afterRequest, responsesEnded + 1 >= last { return true }
        guard inputClosed else { return false }
        return !idle || outstanding <= 1
    }
}
