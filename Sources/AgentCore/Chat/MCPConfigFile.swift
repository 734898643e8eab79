/// One MCP server declared in an `.mcp.json`.
public struct MCPServerConfig: Sendable, Equatable {
    public var name: String
    /// `stdio`, `http`, `sse`, or whatever `type` said (the engine refuses what it cannot
    /// speak when it connects).
    public var transport: String
    public var command: String
    public var args: [String]
    /// With `$VAR` / `${VAR}` in the values expanded against the agent's environment
    /// (`CODER_AGENT_*` expands to nothing, see ``MCPConfigFile/isAgentVariable(_:)``).
    public var env: [String: String]
    public var url: String
    public var headers: [String: String]

    public init(
        name: String, transport: String, command: String = "", args: [String] = [], env: [String: String] = [:],
        url: String = "", headers: [String: String] = [:]
    ) {
        self.name = name
        self.transport = transport
        self.command = command
        self.args = args
        self.env = env
        self.url = url
        self.headers = headers
    }
}

/// An `.mcp.json` entry that was left out, and why.
public struct MCPConfigEntryError: Error, Sendable, Equatable {
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }
}

/// A whole `.mcp.json` that cannot be used: it is not JSON, or its top level is not
/// `{"mcpServers": {…}}`. `reason` is the JSON error as Go words it.
public struct MCPConfigFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// A parsed `.mcp.json`: `{"mcpServers": {"<name>": {command, args, env, type, url, headers}}}`.
///
/// Entries are validated one by one, so one bad entry costs only itself (its error is in
/// ``entryErrors``); the file fails as a whole only when it is not JSON or not that shape.
/// Keys match Go's `encoding/json` (case-insensitively; the last duplicate wins); unknown
/// keys are ignored; a missing or empty `mcpServers` is zero servers.
public struct MCPConfigFile: Sendable, Equatable {
    /// The usable servers, sorted by name (bytewise).
    public var servers: [MCPServerConfig]
    /// The entries left out, sorted by name.
    public var entryErrors: [MCPConfigEntryError]
    /// Entries kept with a note (an `env` value that referred to an agent variable), sorted
    /// by name: for the log, once per load.
    public var warnings: [MCPConfigEntryError] = []

    /// The largest file read, in bytes: far above any real configuration, and what bounds
    /// the parse.
    public static let maxFileBytes = 1 << 20
    /// Servers kept from one file; entries past it (in name order) are reported as errors.
    public static let maxServers = 128

    public init(servers: [MCPServerConfig] = [], entryErrors: [MCPConfigEntryError] = []) {
        self.servers = servers
        self.entryErrors = entryErrors
    }

    /// Whether `name` is one of the agent's own variables (`CODER_AGENT_*`: its token, its
    /// token file, its URL): an `env` value's `$NAME` never expands to one, so that no
    /// `.mcp.json` (which any process in the workspace can write) hands a server the token.
    public static func isAgentVariable(_ name: String) -> Bool { name.hasPrefix("CODER_AGENT_") }

    /// Parses a file's bytes; `environment` answers the `$VAR`s in `env` values, except the
    /// agent's own (``isAgentVariable(_:)``), which expand to nothing with a warning.
    public static func parse(_ bytes: some Collection<UInt8>, environment: (String) -> String?) throws(MCPConfigFileError) -> MCPConfigFile {
        let members = try serverMembers(bytes)
        var servers: [MCPServerConfig] = []
        var errors: [MCPConfigEntryError] = []
        var warnings: [MCPConfigEntryError] = []
        for (name, value) in members {
            if servers.count >= maxServers {
                errors.append(MCPConfigEntryError(name: name, message: "server \(goQuote(name)): more than \(maxServers) servers in one file"))
                continue
            }
            var withheld = Set<String>()
            let result = entry(name: name, value) { variable in
                if isAgentVariable(variable) {
                    withheld.insert(variable)
                    return nil
                }
                return environment(variable)
            }
            switch result {
            case .success(let server):
                servers.append(server)
                if !withheld.isEmpty {
                    let names = withheld.sorted { bytewisePrecedes($0, $1) }.map { "$" + $0 }.joined(separator: ", ")
                    warnings.append(
                        MCPConfigEntryError(
                            name: name, message: "server \(goQuote(name)): env refers to \(names), the agent's own; MCP servers never get it (expanded to empty)"))
                }
            case .failure(let error): errors.append(error)
            }
        }
        var file = MCPConfigFile(servers: servers, entryErrors: errors)
        file.warnings = warnings
        return file
    }

    /// The `mcpServers` members, the last duplicate of a name kept, sorted by name.
    /// Throws when the file is not usable at all.
    public static func serverMembers(_ bytes: some Collection<UInt8>) throws(MCPConfigFileError) -> [(String, JSONValue)] {
        let document: JSONValue
        do {
            document = try JSONValue.parseWhole(bytes)
        } catch {
            throw MCPConfigFileError(error.description)
        }
        switch document {
        case .null: return []
        case .object: break
        default: throw MCPConfigFileError("json: cannot unmarshal \(document.goKind) into Go value of type agentmcp.mcpConfigFile")
        }
        guard let servers = goField(document, "mcpServers") else { return [] }
        switch servers {
        case .null: return []
        case .object(let members):
            var byName: [String: JSONValue] = [:]
            for (name, value) in members { byName[name] = value }
            return byName.sorted { bytewisePrecedes($0.key, $1.key) }.map { ($0.key, $0.value) }
        default:
            throw MCPConfigFileError(
                "json: cannot unmarshal \(servers.goKind) into Go struct field mcpConfigFile.mcpServers of type map[string]json.RawMessage")
        }
    }

    /// A server name the tool prefix `<server>__<tool>` can be split back from, and that
    /// names one entry only: invalid UTF-8 decodes to U+FFFD, so two such keys could collide
    /// (and the last would silently win); a name with U+FFFD is refused.
    public static func nameProblem(_ name: String) -> String? {
        if name.unicodeScalars.contains("\u{FFFD}") {
            return "server name \(goQuote(name)) is not valid UTF-8 (or contains U+FFFD): such names cannot be told apart"
        }
        if name.contains("__") || name.hasPrefix("_") || name.hasSuffix("_") {
            return "server name \(goQuote(name)) contains reserved separator \"__\" or leading/trailing underscore"
        }
        return nil
    }

    static func entry(name: String, _ value: JSONValue, environment: (String) -> String?) -> Result<MCPServerConfig, MCPConfigEntryError> {
        func failure(_ message: String) -> Result<MCPServerConfig, MCPConfigEntryError> {
            .failure(MCPConfigEntryError(name: name, message: message))
        }
        var command = "", type = "", url = ""
        var args: [String] = [], env: [String: String] = [:], headers: [String: String] = [:]
        switch value {
        case .null: break
        case .object(let members):
            // Go keeps decoding after a type mismatch and reports the first one.
            var firstError: String?
            func mismatch(_ found: JSONValue, _ field: String, _ type: String) {
                guard firstError == nil else { return }
                // Words for people: the reference prints Go's decoder text, which names its
                // own struct (`Go struct field mcpServerEntry.args`); nothing parses it.
                let kind = found.goKind
                let found = (kind == "array" || kind == "object" ? "an " : "a ") + kind
                if type == "string", field == "args" || field == "env" || field == "headers" {
                    firstError = "\(goQuote(field)) must hold only strings, not \(found)"
                } else {
                    let wanted = ["string": "a string", "[]string": "an array of strings", "map[string]string": "an object of strings"][type] ?? type
                    firstError = "\(goQuote(field)) must be \(wanted), not \(found)"
                }
            }
            for (key, member) in members {
                guard let field = ["command", "args", "env", "type", "url", "headers"].first(where: { goKeyMatches(key, $0) }) else { continue }
                switch field {
                case "command", "type", "url":
                    guard case .string(let text) = member else {
                        if member != .null { mismatch(member, field, "string") }
                        continue
                    }
                    if field == "command" { command = text } else if field == "type" { type = text } else { url = text }
                case "args":
                    switch member {
                    case .null: args = []
                    case .array(let items):
                        args = items.map { item in
                            if case .string(let text) = item { return text }
                            if item != .null { mismatch(item, field, "string") }
                            return ""
                        }
                    default: mismatch(member, field, "[]string")
                    }
                default:
                    switch member {
                    case .null: if field == "env" { env = [:] } else { headers = [:] }
                    case .object(let pairs):
                        var map: [String: String] = [:]
                        for (k, v) in pairs {
                            if case .string(let text) = v {
                                map[k] = text
                            } else {
                                if v != .null { mismatch(v, field, "string") }
                                map[k] = ""
                            }
                        }
                        if field == "env" { env = map } else { headers = map }
                    default: mismatch(member, field, "map[string]string")
                    }
                }
            }
            if let firstError { return failure("parse server \(goQuote(name)): \(firstError)") }
        default:
            return failure("server \(goQuote(name)) must be a JSON object")
        }
        if let problem = nameProblem(name) { return failure(problem) }
        let transport = !type.isEmpty ? type : !command.isEmpty ? "stdio" : !url.isEmpty ? "http" : ""
        guard !transport.isEmpty else { return failure("server \(goQuote(name)) has no command or url") }
        let expanded = env.mapValues { goExpand($0, environment) }
        return .success(
            MCPServerConfig(
                name: name, transport: transport, command: command, args: args, env: expanded, url: url, headers: headers))
    }

    /// Go's field lookup: the exact key, else ASCII case-insensitively.
    static func goKeyMatches(_ key: String, _ field: String) -> Bool {
        key == field || key.lowercased() == field.lowercased()
    }

    static func goField(_ object: JSONValue, _ field: String) -> JSONValue? {
        guard case .object(let members) = object else { return nil }
        return members.last { goKeyMatches($0.0, field) }?.1
    }

    /// Servers across files in order: the first file that declares a name wins it; later
    /// declarations of that name are dropped (with the file that lost, for diagnostics).
    public static func merge(_ files: [(path: String, file: MCPConfigFile)]) -> (servers: [MCPServerConfig], shadowed: [(name: String, path: String)]) {
        var seen = Set<String>()
        var servers: [MCPServerConfig] = []
        var shadowed: [(name: String, path: String)] = []
        for (path, file) in files {
            for server in file.servers {
                if seen.insert(server.name).inserted { servers.append(server) } else { shadowed.append((server.name, path)) }
            }
        }
        servers.sort { bytewisePrecedes($0.name, $1.name) }
        return (servers, shadowed)
    }
}
