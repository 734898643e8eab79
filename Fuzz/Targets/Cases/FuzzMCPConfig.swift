import AgentCore

/// `.mcp.json` as the resolver and the MCP engine read it (`MCPConfigFile.parse`), and the
/// `env` values' expansion (`goExpand`, Go's `os.Expand`).
///
/// A file is refused with a reason, or every `mcpServers` member is accounted for exactly
/// once: as a server whose name keeps the tool-prefix rules (no `__`, no leading or trailing
/// `_`), with a transport, at most 128 of them, sorted and unique; or as an entry error that
/// names it. Parsing is deterministic, and the servers written back out as JSON parse to the
/// same servers. Expansion of a text built from pieces (`$NAME`, `${…}`, `${}`, specials,
/// a `$` before anything else, an unclosed `${`, a trailing `$`) gives exactly what each
/// piece stands for.
public func fuzzMCPConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 4 {
    case 0: expansion(&input)
    case 1: check(generatedDocument(&input))
    default: check(input.rest())
    }
    return 0
}

/// The environment `env` values expand against.
private let environment: [String: String] = ["HOME": "/home/coder", "TOKEN": "s3cret", "DOLLAR": "$HOME", "EMPTY": ""]

private func check(_ bytes: [UInt8]) {
    let parsed: MCPConfigFile
    do {
        parsed = try MCPConfigFile.parse(bytes) { environment[$0] }
    } catch {
        require(!error.reason.isEmpty, "a refused file without a reason")
        require((try? MCPConfigFile.serverMembers(bytes)) == nil, "parse refused a file whose members read")
        return
    }
    let again = try? MCPConfigFile.parse(bytes) { environment[$0] }
    require(again == parsed, "parsing is not deterministic")
    let members = (try? MCPConfigFile.serverMembers(bytes)) ?? []
    require(
        members.count == parsed.servers.count + parsed.entryErrors.count,
        "\(members.count) members, \(parsed.servers.count) servers and \(parsed.entryErrors.count) errors")
    let memberNames = Set(members.map(\.0))
    require(memberNames.count == members.count, "a member name twice")
    require(parsed.servers.count <= MCPConfigFile.maxServers, "more than \(MCPConfigFile.maxServers) servers")
    var names = Set<String>()
    for (index, server) in parsed.servers.enumerated() {
        require(MCPConfigFile.nameProblem(server.name) == nil, "a server named \(goQuote(server.name)) breaks the name rules")
        require(
            !server.name.contains("__") && !server.name.hasPrefix("_") && !server.name.hasSuffix("_"),
            "a server named \(goQuote(server.name)) can't be split from its tools")
        require(!server.transport.isEmpty, "server \(goQuote(server.name)) without a transport")
        require(index == 0 || bytewisePrecedes(parsed.servers[index - 1].name, server.name), "servers not sorted and unique")
        require(names.insert(server.name).inserted && memberNames.contains(server.name), "a server that is no member")
    }
    for error in parsed.entryErrors {
        require(error.message.contains(goQuote(error.name)), "an entry error that does not name its entry: \(error.message)")
        require(names.insert(error.name).inserted && memberNames.contains(error.name), "an entry error that is no member, or a second one")
    }
    // Written back out ($ as $$, which expands to `$` itself), the servers parse the same.
    let written = document(parsed.servers)
    guard let reread = try? MCPConfigFile.parse(written, environment: { $0 == "$" ? "$" : nil }) else {
        require(false, "the servers written back out do not parse: \(String(decoding: written, as: UTF8.self))")
        return
    }
    require(reread.entryErrors.isEmpty, "servers written back out are refused: \(reread.entryErrors)")
    require(reread.servers == parsed.servers, "servers do not round-trip through JSON")
}

// MARK: Documents

private func document(_ servers: [MCPServerConfig]) -> [UInt8] {
    var out = Array(#"{"mcpServers":{"#.utf8)
    for (index, server) in servers.enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        writeString(server.name, into: &out)
        out += Array(#":{"type":"#.utf8)
        writeString(server.transport, into: &out)
        out += Array(#","command":"#.utf8)
        writeString(server.command, into: &out)
        out += Array(#","url":"#.utf8)
        writeString(server.url, into: &out)
        out += Array(#","args":["#.utf8)
        for (i, arg) in server.args.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            writeString(arg, into: &out)
        }
        out += Array(#"],"env":"#.utf8)
        writeMap(server.env.mapValues { $0.replacing("$", with: "$$") }, into: &out)
        out += Array(#","headers":"#.utf8)
        writeMap(server.headers, into: &out)
        out.append(UInt8(ascii: "}"))
    }
    out += Array("}}".utf8)
    return out
}

private func writeMap(_ map: [String: String], into out: inout [UInt8]) {
    out.append(UInt8(ascii: "{"))
    for (index, key) in map.keys.sorted(by: bytewisePrecedes).enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        writeString(key, into: &out)
        out.append(UInt8(ascii: ":"))
        writeString(map[key]!, into: &out)
    }
    out.append(UInt8(ascii: "}"))
}

/// A JSON string: `"`, `\` and controls escaped, everything else as UTF-8.
private func writeString(_ text: String, into out: inout [UInt8]) {
    let hex = Array("0123456789abcdef".utf8)
    out.append(UInt8(ascii: "\""))
    for byte in text.utf8 {
        if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            out += [UInt8(ascii: "\\"), byte]
        } else if byte < 0x20 {
            out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 15)]]
        } else {
            out.append(byte)
        }
    }
    out.append(UInt8(ascii: "\""))
}

/// A document of entries built from the input: names from a small alphabet (so duplicates,
/// `__` and case variants of keys happen), values of the right and the wrong JSON types.
private func generatedDocument(_ input: inout FuzzInput) -> [UInt8] {
    let nameAlphabet = Array("ab_-A.é".utf8)
    func text(_ input: inout FuzzInput, max: Int) -> String {
        String(decoding: input.data(maxLength: max), as: UTF8.self)
    }
    func name(_ input: inout FuzzInput) -> String {
        let raw = input.data(maxLength: 6)
        return String(decoding: raw.map { nameAlphabet[Int($0) % nameAlphabet.count] }, as: UTF8.self)
    }
    let keys = ["command", "args", "env", "type", "url", "headers", "COMMAND", "Url", "other"]
    var out = Array(#"{"mcpServers":{"#.utf8)
    let count = Int(input.byte() % 12)
    for index in 0..<count {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        writeString(name(&input), into: &out)
        out.append(UInt8(ascii: ":"))
        switch input.byte() % 8 {
        case 0: out += Array("null".utf8)
        case 1: out += Array("[1]".utf8)
        default:
            out.append(UInt8(ascii: "{"))
            let fields = Int(input.byte() % 5)
            for f in 0..<fields {
                if f > 0 { out.append(UInt8(ascii: ",")) }
                writeString(keys[Int(input.byte()) % keys.count], into: &out)
                out.append(UInt8(ascii: ":"))
                switch input.byte() % 7 {
                case 0: out += Array("null".utf8)
                case 1: out += Array("7".utf8)
                case 2:
                    out.append(UInt8(ascii: "["))
                    for i in 0..<Int(input.byte() % 3) {
                        if i > 0 { out.append(UInt8(ascii: ",")) }
                        if input.byte() % 4 == 0 { out += Array("false".utf8) } else { writeString(text(&input, max: 12), into: &out) }
                    }
                    out.append(UInt8(ascii: "]"))
                case 3:
                    var map: [String: String] = [:]
                    for _ in 0..<Int(input.byte() % 3) { map[text(&input, max: 6)] = text(&input, max: 16) }
                    writeMap(map, into: &out)
                case 4: out += Array(#"{"K":1}"#.utf8)
                default: writeString(text(&input, max: 24), into: &out)
                }
            }
            out.append(UInt8(ascii: "}"))
        }
    }
    out += Array("}}".utf8)
    return out
}

// MARK: Expansion

/// What `goExpand` is checked against: names of odd length are unset, others expand to
/// `<name>`.
private func lookup(_ name: String) -> String? {
    name.utf8.count % 2 == 1 ? nil : "<\(name)>"
}

private func expansion(_ input: inout FuzzInput) {
    let nameStart = Array("abcXYZ_".utf8)
    let nameRest = Array("abcXYZ_019".utf8)
    let specials = Array("*#$@!?-0123456789".utf8)
    let others = Array("/. :+=%\"é".unicodeScalars)
    var text = ""
    var expected = ""
    let pieces = Int(input.byte() % 16)
    for _ in 0..<pieces {
        switch input.byte() % 8 {
        case 0, 1:
            // Literal text without `$`.
            let literal = String(decoding: input.data(maxLength: 12).filter { $0 != UInt8(ascii: "$") }, as: UTF8.self)
            text += literal
            expected += literal
        case 2:
            // `$NAME` ended by a character that is no name character.
            let raw = input.data(maxLength: 6)
            let name = String(decoding: [nameStart[Int(input.byte()) % nameStart.count]] + raw.map { nameRest[Int($0) % nameRest.count] }, as: UTF8.self)
            text += "$\(name)/"
            expected += (lookup(name) ?? "") + "/"
        case 3:
            // `${anything but }}`, non-empty.
            var name = String(decoding: input.data(maxLength: 8).filter { $0 != UInt8(ascii: "}") }, as: UTF8.self)
            if name.isEmpty { name = "x" }
            text += "${\(name)}"
            expected += lookup(name) ?? ""
        case 4:
            // `${}` is bad syntax: eaten.
            text += "${}"
        case 5:
            // A one-character special.
            let special = String(UnicodeScalar(specials[Int(input.byte()) % specials.count]))
            text += "$" + special
            expected += lookup(special) ?? ""
        default:
            // `$` before anything else stays.
            let other = String(others[Int(input.byte()) % others.count])
            text += "$" + other
            expected += "$" + other
        }
    }
    switch input.byte() % 4 {
    case 0:
        // An unclosed `${`: the `${` is eaten, the rest stays.
        let rest = String(decoding: input.data(maxLength: 8).filter { $0 != UInt8(ascii: "}") && $0 != UInt8(ascii: "$") }, as: UTF8.self)
        text += "${" + rest
        expected += rest
    case 1:
        text += "$"
        expected += "$"
    default: break
    }
    let got = goExpand(text, lookup)
    require(got == expected, "goExpand(\(goQuote(text))) = \(goQuote(got)), want \(goQuote(expected))")
    // Without any `$` nothing changes; with no variable set the text only shrinks.
    let plain = String(decoding: input.rest().filter { $0 != UInt8(ascii: "$") }, as: UTF8.self)
    require(goExpand(plain, lookup) == plain, "a text without $ changed")
    require(goExpand(text, { _ in nil }).utf8.count <= text.utf8.count, "expanding unset names made the text longer")
}
