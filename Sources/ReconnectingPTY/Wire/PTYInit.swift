import AgentCore

/// A reconnecting-PTY connection's first frame: a 2-byte little-endian length, then that many
/// bytes of JSON with the Go struct's field names (no tags): `ID`, `Height`, `Width`,
/// `Command`, `Container`, `ContainerUser`, `BackendType`, matched case-insensitively as Go's
/// decoder does. The length's 16 bits bound it (65 535 bytes).
public struct PTYInit: Equatable, Sendable {
    public var id: String
    public var height: UInt16
    public var width: UInt16
    public var command: String
    public var container: String
    public var containerUser: String
    public var backendType: String

    public init(
        id: String, height: UInt16 = 0, width: UInt16 = 0, command: String = "", container: String = "", containerUser: String = "",
        backendType: String = ""
    ) {
        self.id = id
        self.height = height
        self.width = width
        self.command = command
        self.container = container
        self.containerUser = containerUser
        self.backendType = backendType
    }

    /// The IDs a client may name, at most this long (the reference's are UUIDs).
    public static let maxIDBytes = 256

    /// What reading the frame from `bytes` (a connection's first bytes) gives.
    public enum Reading: Equatable, Sendable {
        /// More bytes are needed.
        case incomplete
        /// The frame, and how many bytes it took (what follows is input).
        case frame(PTYInit, consumed: Int)
        /// The frame is not a valid init; the connection closes.
        case invalid(String)
    }

    public static func read(_ bytes: some Collection<UInt8>) -> Reading {
        guard bytes.count >= 2 else { return .incomplete }
        let length = Int(bytes[bytes.startIndex]) | Int(bytes[bytes.index(after: bytes.startIndex)]) << 8
        guard bytes.count >= 2 + length else { return .incomplete }
        switch decode(bytes.dropFirst(2).prefix(length)) {
        case .success(let frame): return .frame(frame, consumed: 2 + length)
        case .failure(let error): return .invalid(error.description)
        }
    }

    public struct DecodeError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// The JSON body as Go's `json.Unmarshal` fills `AgentReconnectingPTYInit`: null leaves
    /// a field alone, a wrong kind or a number out of range is an error; then the ID must be
    /// non-empty and at most ``maxIDBytes``.
    public static func decode(_ body: some Collection<UInt8>) -> Result<PTYInit, DecodeError> {
        let value: JSONValue
        do {
            value = try JSONValue.parseWhole(body)
        } catch {
            return .failure(DecodeError(description: error.description))
        }
        guard case .object = value else {
            if value == .null { return .failure(DecodeError(description: "no ID")) }
            return .failure(DecodeError(description: "json: cannot unmarshal \(value.goKind) into Go value of type workspacesdk.AgentReconnectingPTYInit"))
        }
        var frame = PTYInit(id: "")
        do throws(DecodeError) {
            frame.id = try string(value, "ID") ?? ""
            frame.height = try uint16(value, "Height") ?? 0
            frame.width = try uint16(value, "Width") ?? 0
            frame.command = try string(value, "Command") ?? ""
            frame.container = try string(value, "Container") ?? ""
            frame.containerUser = try string(value, "ContainerUser") ?? ""
            frame.backendType = try string(value, "BackendType") ?? ""
        } catch {
            return .failure(error)
        }
        guard !frame.id.isEmpty else { return .failure(DecodeError(description: "no ID")) }
        guard frame.id.utf8.count <= maxIDBytes else { return .failure(DecodeError(description: "ID longer than \(maxIDBytes) bytes")) }
        return .success(frame)
    }

    static func string(_ object: JSONValue, _ field: String) throws(DecodeError) -> String? {
        switch object.goField(field) {
        case nil, .null?: return nil
        case .string(let text)?: return text
        case let other?: throw mismatch(other, field, "string")
        }
    }

    static func uint16(_ object: JSONValue, _ field: String) throws(DecodeError) -> UInt16? {
        switch object.goField(field) {
        case nil, .null?: return nil
        case .number(let text)?:
            guard let number = UInt16(text) else {
                throw DecodeError(description: "json: cannot unmarshal number \(text) into Go struct field \(field) of type uint16")
            }
            return number
        case let other?: throw mismatch(other, field, "uint16")
        }
    }

    static func mismatch(_ value: JSONValue, _ field: String, _ goType: String) -> DecodeError {
        DecodeError(description: "json: cannot unmarshal \(value.goKind) into Go struct field \(field) of type \(goType)")
    }

    /// The frame's bytes, as the reference's client writes them (for tests and tools).
    public var frameBytes: [UInt8] {
        let body = Array(
            ("{\"ID\":\(jsonQuote(id)),\"Height\":\(height),\"Width\":\(width),\"Command\":\(jsonQuote(command)),"
                + "\"Container\":\(jsonQuote(container)),\"ContainerUser\":\(jsonQuote(containerUser)),\"BackendType\":\(jsonQuote(backendType))}").utf8)
        return [UInt8(body.count & 0xff), UInt8(body.count >> 8 & 0xff)] + body
    }
}
