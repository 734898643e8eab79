import AgentCore
import AgentFiles
import AgentHTTP

/// The file API's request decoding: read-file-lines' query and its window (line numbers,
/// budgets, the reference's errors), read-file's query, edit-files bodies, the tool-call
/// headers and path cleaning. The first byte picks which.
public func fuzzFileRequests(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 5 {
    case 0: readFileLines(&input)
    case 1: readFile(&input)
    case 2: editRequest(&input)
    case 3: toolCall(&input)
    default: cleanPath(&input)
    }
    return 0
}

private func readFileLines(_ input: inout FuzzInput) {
    let query = String(decoding: input.data(maxLength: 300), as: UTF8.self)
    let content = input.rest()
    guard let answer = try? FilesFuzzing.readFileLines(query: query, content: content) else { return }
    let window = answer.window
    let lineCount = content.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 } + 1
    require(window.offset >= 1, "offset below 1")
    // As the reference: an empty file is `{"success":true}` alone, and a failure carries
    // its error and nothing else.
    if content.isEmpty {
        require(
            answer.success && answer.fileSize == 0 && answer.totalLines == 0 && answer.linesRead == 0 && answer.content.isEmpty,
            "an empty file is not {\"success\":true} alone")
        return
    }
    guard answer.success else {
        require(!answer.error.isEmpty && answer.linesRead == 0 && answer.content.isEmpty, "a failure without its error, or with lines")
        require(answer.fileSize == 0 && answer.totalLines == 0, "a failure with more than its error")
        return
    }
    require(answer.fileSize == content.count, "file_size is not the content's size")
    require(answer.totalLines == lineCount, "total_lines \(answer.totalLines), the content has \(lineCount)")
    require(answer.error.isEmpty, "a success with an error")
    let wanted = window.limit == 0 ? window.maxResponseLines : window.limit
    require(answer.linesRead <= wanted && answer.linesRead <= window.maxResponseLines, "more lines than asked")
    require(answer.linesRead == min(wanted, lineCount - window.offset + 1), "lines_read is not what the window holds")
    let newlines = answer.content.utf8.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 }
    require(answer.linesRead == 0 ? answer.content.isEmpty : newlines == answer.linesRead - 1, "lines joined wrongly")
    if answer.linesRead > 0 { require(answer.content.utf8.starts(with: "\(window.offset)\t".utf8), "the first line is not numbered offset") }
}

private func readFile(_ input: inout FuzzInput) {
    let query = String(decoding: input.rest(), as: UTF8.self)
    guard let (path, offset, limit) = try? FilesFuzzing.readFile(query: query) else { return }
    require(path.utf8.first == UInt8(ascii: "/") && !path.utf8.contains(0), "a relative path or a NUL accepted")
    require(offset >= 0 && limit >= 0, "a negative number accepted")
}

private func editRequest(_ input: inout FuzzInput) {
    guard let (_, files) = try? FilesFuzzing.editRequest(json: input.rest()) else { return }
    for file in files {
        require(!file.path.utf8.contains(0), "a path with a NUL accepted")
        if let expected = file.expectedSHA256 { require(expected == expected.lowercased(), "expected_sha256 not lowered") }
    }
}

private func toolCall(_ input: inout FuzzInput) {
    let names = [
        "Coder-Tool-Call-Message-Id", "Coder-Tool-Call-Id", "Coder-Tool-Call-Age-Ms", "coder-tool-call-id", "Coder-Chat-Id", "X-Other",
    ]
    var headers: [(String, String)] = []
    for _ in 0..<Int(input.byte() % 7) {
        let name = names[Int(input.byte()) % names.count]
        // A well-formed chat id most of the time, so the rest of the headers get checked.
        let value =
            name == "Coder-Chat-Id" && input.bool()
            ? "6F1C1F7E7A0B4A439C531D2E3F405162" : String(decoding: input.data(maxLength: 40), as: UTF8.self)
        headers.append((name, value))
    }
    guard let call = try? FilesFuzzing.toolCall(headers: headers) else { return }
    require(ChatIdentity.canonicalUUID(call.chatID) == call.chatID, "a tool call accepted without a chat")
    require(call.messageID > 0 && !call.callID.isEmpty, "a tool call accepted without its id or message")
    require(ChatIdentity.canonicalUUID(call.cancelID) == call.cancelID, "cancel id \(call.cancelID) is not a canonical UUID")
}

private func cleanPath(_ input: inout FuzzInput) {
    let path = String(decoding: input.rest(), as: UTF8.self)
    let clean = FilesFuzzing.cleanPath(path)
    // Byte-wise, as the kernel and Go see paths (a `/` and a combining mark are one Character).
    let bytes = Array(clean.utf8)
    let slash = UInt8(ascii: "/")
    require(bytes.first == slash, "not absolute: \(bytes)")
    require(!zip(bytes, bytes.dropFirst()).contains { $0 == slash && $1 == slash }, "a double slash: \(bytes)")
    require(bytes == [slash] || bytes.last != slash, "a trailing slash: \(bytes)")
    let parts = bytes.split(separator: slash)
    require(!parts.contains { $0.elementsEqual([0x2E]) || $0.elementsEqual([0x2E, 0x2E]) }, "a dot part left: \(bytes)")
    let original = path.utf8.split(separator: slash).filter { !$0.elementsEqual([0x2E]) && !$0.elementsEqual([0x2E, 0x2E]) }
    require(parts.allSatisfy { part in original.contains { $0.elementsEqual(part) } }, "a part that the path did not have: \(bytes)")
    require(FilesFuzzing.cleanPath(clean) == clean, "cleaning is not idempotent")
}
