import AgentJSON
import AgentSpeedtest

/// The speed test's request (AgentSpeedtest's `SpeedtestRequest`): any bytes give an end or
/// none and an answer, never a trap; the end lies within the bytes and no shorter prefix of a
/// value has one (so reading it in pieces stops where reading it whole does); what follows
/// a value that parses never changes the answer; a started test is within 0 s and the cap; a refusal
/// is one JSON line.
public func fuzzSpeedtestRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let bytes = input.rest()
    let end = SpeedtestRequest.end(of: bytes)
    if let end {
        require(end >= 1 && end <= bytes.count, "end \(end) outside \(bytes.count) bytes")
        for cut in stride(from: 0, to: min(end, 512), by: 1) {
            require(SpeedtestRequest.end(of: bytes.prefix(cut)) == nil, "a prefix of \(cut) bytes already ends at \(end)")
        }
        let answer = SpeedtestRequest.answer(bytes.prefix(end))
        // A value that parses is answered the same whatever follows it (a malformed one may
        // not be: Go reports where the error is, which the next bytes can move).
        if (try? JSONValue.parseFirst(bytes.prefix(end))) != nil {
            require(SpeedtestRequest.answer(bytes.prefix(end) + Array(" {\"version\":1}".utf8)) == answer, "trailing bytes changed the answer")
        }
        check(answer)
    } else {
        check(SpeedtestRequest.answer(bytes))
    }
    return 0
}

private func check(_ answer: SpeedtestRequest.Answer) {
    switch answer {
    case .start(let request):
        require(request.version == SpeedtestRequest.version, "started version \(request.version)")
        require(request.duration >= .zero && request.duration <= SpeedtestRequest.maxDuration, "duration \(request.duration)")
        require(answer.bytes == Array("{}\n".utf8), "start answer \(answer.bytes)")
    case .refuse:
        let bytes = answer.bytes
        require(bytes.last == 0x0a && bytes.dropLast().allSatisfy { $0 != 0x0a }, "refusal is not one line")
    }
}
