import AgentCore
import AgentHTTP

/// The agent's own JSON parser (every request body) and Go-style field access, and the chat
/// headers (a UUID, and ancestors as a JSON array). A parsed value written back out and
/// parsed again is the same value; nesting is bounded; the typed accessors either give a
/// value of their type or the reference's 400; a canonical UUID is canonical again.
public func fuzzJSONRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    if input.byte() % 4 == 0 {
        chatHeaders(&input)
        return 0
    }
    let bytes = input.rest()
    guard let value = try? JSONValue.parseFirst(bytes) else { return 0 }
    var written: [UInt8] = []
    write(value, into: &written)
    guard let again = try? JSONValue.parseFirst(written) else {
        require(false, "the value written back does not parse: \(String(decoding: written, as: UTF8.self))")
        return 0
    }
    require(again == value, "parse -> write -> parse changed the value")
    require(depth(of: value) <= 256, "nesting beyond the parser's bound")

    guard let request = try? JSONRequest.parse(bytes, typeName: "FuzzRequest") else { return 0 }
    for key in ["command", "path", "env", "files", "edits", "Command", "background", "ſignal", "\u{212A}ey"] {
        // Each accessor answers its type or throws the 400; none may trap.
        _ = try? request.string(key)
        _ = try? request.bool(key)
        _ = try? request.stringArray(key)
        _ = try? request.stringMap(key)
        if let nested = request.value(key) { _ = request.with(nested) }
    }
    return 0
}

/// JSON text for `value`: strings escaped as `\uXXXX` below U+0020 and for `"` and `\`.
private func write(_ value: JSONValue, into out: inout [UInt8]) {
    switch value {
    case .null: out += Array("null".utf8)
    case .bool(let b): out += Array((b ? "true" : "false").utf8)
    case .number(let text): out += Array(text.utf8)
    case .string(let text): writeString(text, into: &out)
    case .array(let items):
        out.append(UInt8(ascii: "["))
        for (index, item) in items.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(item, into: &out)
        }
        out.append(UInt8(ascii: "]"))
    case .object(let members):
        out.append(UInt8(ascii: "{"))
        for (index, (key, item)) in members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            writeString(key, into: &out)
            out.append(UInt8(ascii: ":"))
            write(item, into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}

private func writeString(_ text: String, into out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    for byte in text.utf8 {
        if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            let hex = Array("0123456789abcdef".utf8)
            out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
        } else {
            out.append(byte)
        }
    }
    out.append(UInt8(ascii: "\""))
}

private func depth(of value: JSONValue) -> Int {
    switch value {
    case .array(let items): return 1 + (items.map(depth(of:)).max() ?? 0)
    case .object(let members): return 1 + (members.map { depth(of: $0.1) }.max() ?? 0)
    default: return 0
    }
}

/// `Coder-Chat-Id` and `Coder-Ancestor-Chat-Ids` as the chat middleware reads them.
private func chatHeaders(_ input: inout FuzzInput) {
    let id = String(decoding: input.data(maxLength: 60), as: UTF8.self)
    if let canonical = ChatIdentity.canonicalUUID(id) {
        require(canonical.utf8.count == 36 && canonical == canonical.lowercased(), "not canonical: \(canonical)")
        require(ChatIdentity.canonicalUUID(canonical) == canonical, "canonical form is not stable")
    }
    let ancestors = input.rest()
    guard let value = try? JSONValue.parseFirst(ancestors), let items = value.arrayValue else { return }
    for item in items {
        if let text = item.stringValue, let canonical = ChatIdentity.canonicalUUID(text) {
            require(ChatIdentity.canonicalUUID(canonical) == canonical, "canonical form is not stable")
        }
    }
}
