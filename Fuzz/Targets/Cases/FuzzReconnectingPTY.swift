import ReconnectingPTY

/// A reconnecting-PTY connection's bytes (ReconnectingPTY's `PTYInit.read` and
/// `PTYInputDecoder`): the init frame is read or refused, never a trap, and never takes more
/// than its length says; a read frame written back out reads as itself; the input objects
/// after it and the first error do not depend on how the stream is split, and a failed
/// decoder gives nothing more.
public func fuzzReconnectingPTY(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let splitSeed = input.byte()
    let bytes = input.rest()
    var rest = bytes[...]
    switch PTYInit.read(bytes) {
    case .incomplete:
        let length = bytes.count >= 2 ? Int(bytes[0]) | Int(bytes[1]) << 8 : 0
        require(bytes.count < 2 + length || bytes.count < 2, "a whole frame read as incomplete")
    case .invalid:
        break
    case .frame(let frame, let consumed):
        let length = Int(bytes[0]) | Int(bytes[1]) << 8
        require(consumed == 2 + length, "consumed \(consumed) of a \(length)-byte frame")
        require(PTYInit.read(frame.frameBytes) == .frame(frame, consumed: frame.frameBytes.count), "\(frame) does not read back")
        rest = bytes[consumed...]
    }
    var whole = PTYInputDecoder()
    let all = whole.feed(rest)
    var pieces = PTYInputDecoder()
    var inputs: [PTYInput] = []
    var firstError: PTYInputDecoder.DecodeError?
    var index = rest.startIndex
    var step = Int(splitSeed % 7) + 1
    while index < rest.endIndex, firstError == nil {
        let end = min(index + step, rest.endIndex)
        let result = pieces.feed(rest[index..<end])
        inputs += result.inputs
        firstError = result.error
        index = end
        step = step % 13 + 1
    }
    require(inputs == all.inputs, "inputs depend on the split")
    require((firstError == nil) == (all.error == nil), "the error depends on the split")
    if firstError != nil {
        require(pieces.feed(Array("{}".utf8)).inputs.isEmpty, "a failed decoder went on")
    }
    return 0
}
