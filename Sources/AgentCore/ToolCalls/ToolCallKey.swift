import HTTPTypes

/// The tool call a request belongs to: three headers, all or none, and a chat. The file
/// API's writes and edits and the process API's starts run at most once per tool call.
public struct ToolCallKey: Hashable, Sendable {
    public static let messageHeader = HTTPField.Name("Coder-Tool-Call-Message-Id")!
    public static let callHeader = HTTPField.Name("Coder-Tool-Call-Id")!
    public static let ageHeader = HTTPField.Name("Coder-Tool-Call-Age-Ms")!
    public static let runAgeHeader = HTTPField.Name("Coder-Tool-Call-Run-Age-Ms")!

    /// Longest call id accepted (decoded).
    public static let maxCallIDBytes = 1024

    public var chat: String
    public var messageID: UInt64
    public var callID: String

    public init(chat: String, messageID: UInt64, callID: String) {
        self.chat = chat
        self.messageID = messageID
        self.callID = callID
    }

    /// The id its cancel route carries: a UUIDv5 in the reference's namespace over the chat
    /// id's 16 bytes, the message id (big-endian) and the raw call id.
    public var cancelID: String {
        let namespace: [UInt8] = [0xc5, 0x77, 0x3f, 0x4c, 0x0b, 0x3f, 0x57, 0xbc, 0x91, 0x47, 0x36, 0xda, 0xf7, 0x92, 0x1a, 0x1b]
        var name = Self.uuidBytes(chat)
        for shift in stride(from: 56, through: 0, by: -8) { name.append(UInt8(truncatingIfNeeded: messageID >> UInt64(shift))) }
        name += Array(callID.utf8)
        return uuidV5(namespace: namespace, name: name)
    }

    static func uuidBytes(_ uuid: String) -> [UInt8] {
        let hex = Array(uuid.filter { $0 != "-" }.utf8)
        return stride(from: 0, to: hex.count - 1, by: 2).compactMap { UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16) }
    }
}
