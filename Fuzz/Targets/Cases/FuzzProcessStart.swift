import AgentCore
import AgentProc

/// The process API's inputs: `POST /start` bodies (no NUL may reach exec, a command is
/// required), the environment block built from them (every variable once, `KEY=VALUE`,
/// sorted), `{id}` path segments, and the head/tail store of a child's output (bounded,
/// the head is the first bytes written and the tail the last). The first byte picks which.
public func fuzzProcessStart(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 3 {
    case 0: startRequest(input.rest())
    case 1: processID(String(decoding: input.rest(), as: UTF8.self))
    default: headTail(&input)
    }
    return 0
}

private func startRequest(_ json: [UInt8]) {
    guard let start = try? ProcessFuzzing.startRequest(json: json) else { return }
    require(!start.command.isEmpty, "a start without a command")
    require(!start.command.utf8.contains(0), "a NUL in the command")
    require(!(start.workdir?.utf8.contains(0) ?? false), "a NUL in the working directory")
    let env = start.env ?? [:]
    for (key, value) in env { require(!key.utf8.contains(0) && !value.utf8.contains(0), "a NUL in the environment") }
    let block = EnvironmentBlock(env)
    let expected = env.sorted { $0.key < $1.key }.map { Array($0.key.utf8) + [UInt8(ascii: "=")] + Array($0.value.utf8) }
    block.withPointers { pointers in
        var index = 0
        while let entry = pointers[index], index <= expected.count {
            var bytes: [UInt8] = []
            var at = 0
            while entry[at] != 0 { bytes.append(UInt8(bitPattern: entry[at])); at += 1 }
            require(index < expected.count && bytes == expected[index], "environment entry \(index) is not KEY=VALUE in key order")
            index += 1
        }
        require(index == expected.count, "the block holds \(index) entries, the request \(expected.count)")
    }
}

private func processID(_ raw: String) {
    let id = ProcessFuzzing.processID(raw)
    if !raw.contains("%") { require(id == raw, "an id without % was changed") }
    if id != raw { require(raw.percentDecoded() == id, "the id is not the percent-decoded segment") }
}

private func headTail(_ input: inout FuzzInput) {
    let headCapacity = Int(input.byte() % 65)
    let tailCapacity = Int(input.byte() % 65)
    let maxLine = 17 + Int(input.byte() % 48)
    var store = HeadTail(headCapacity: headCapacity, tailCapacity: tailCapacity, maxLineLength: maxLine)
    var all: [UInt8] = []
    var tailStart = 0
    // What the output shows: after a skip, the tail and total of the last write until the
    // next one (the total of now when no tail byte was ever written).
    var shownTail: [UInt8] = []
    var shownTotal = 0
    for _ in 0..<Int(input.byte() % 16) {
        if store.isHeadFull, input.byte() % 8 == 0 {
            let skipped = Int(input.byte())
            store.skip(skipped)
            all += [UInt8](repeating: 0, count: skipped)
            if skipped > 0 { tailStart = all.count }
            if shownTail.isEmpty { shownTotal = all.count }
            continue
        }
        let chunk = input.data(maxLength: 200)
        store.write(chunk)
        all += chunk
        if !chunk.isEmpty {
            let afterHead = max(headCapacity, tailStart)
            shownTail = afterHead >= all.count ? [] : Array(all[afterHead...].suffix(tailCapacity))
            shownTotal = all.count
        }
        require(store.retainedCount <= headCapacity + tailCapacity, "more retained than head and tail hold")
    }
    require(store.totalWritten == all.count, "total written is not what was written")
    require(store.headBytes == Array(all.prefix(headCapacity)), "the head is not the first bytes")
    let afterHead = max(headCapacity, tailStart)
    let tailExpected = afterHead >= all.count ? [] : Array(all[afterHead...].suffix(tailCapacity))
    require(store.tailBytes == tailExpected, "the tail is not the last bytes")
    let output = store.output()
    // Cut lines never grow; the omission marker is the only addition.
    require(output.bytes.count <= headCapacity + tailCapacity + 64, "output beyond its bound")
    if store.isHeadFull, all.count > store.headBytes.count {
        require(output.truncation != nil, "more written than the head holds, and no truncation")
    }
    if let truncation = output.truncation {
        require(
            truncation.originalBytes == shownTotal && truncation.omittedBytes == shownTotal - store.headBytes.count - shownTail.count
                && truncation.retainedBytes == output.bytes.count, "truncation counts do not add up")
    }
}
